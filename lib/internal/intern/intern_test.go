package intern

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

func TestTableSharesOneFreshCopy(t *testing.T) {
	src := []byte("machine-0001 claim-0001")
	a, b := string(src[:12]), string(src[:12]) // equal, in allocations of their own
	tab := New()
	ca, cb := tab.String(a), tab.String(b)
	assert.Equal(t, a, ca)
	assert.True(t, unsafe.StringData(ca) == unsafe.StringData(cb), "equal strings share the table's copy")
	assert.True(t, unsafe.StringData(a) != unsafe.StringData(ca), "the copy is fresh, not the string given")
	assert.Equal(t, "", tab.String(""))
	assert.Equal(t, 1, tab.Len())
	var none *Table
	assert.True(t, unsafe.StringData(a) == unsafe.StringData(none.String(a)), "a nil table copies nothing")
}
