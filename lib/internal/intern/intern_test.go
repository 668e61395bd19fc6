package intern

import (
	"fmt"
	"runtime"
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

func TestTableCarvesFromChunks(t *testing.T) {
	tab := New()
	first := tab.String("m-000000000000")
	base := uintptr(unsafe.Pointer(unsafe.StringData(first)))
	for i := range 1000 {
		s := tab.String(fmt.Sprintf("m-%012d", i+1))
		off := uintptr(unsafe.Pointer(unsafe.StringData(s))) - base
		assert.Less(t, off, uintptr(chunkSize), "1,000 names fit in the first chunk, one after the other")
	}
	b := tab.Bytes([]byte("data"))
	next := tab.String("after")
	assert.Equal(t, len(b), cap(b), "a carved slice ends where it ends")
	b = append(b, "-more"...)
	assert.Equal(t, "data-more", string(b))
	assert.Equal(t, "after", next, "appending to a carved slice copies it, never writing over its neighbour")
	assert.Nil(t, tab.Bytes(nil))
	assert.Equal(t, []byte{}, tab.Bytes([]byte{}), "empty, not nil, stays empty")

	big := tab.String(string(make([]byte, chunkSize)))
	assert.Len(t, big, chunkSize, "a value larger than a chunk gets its own")
}

func TestSlabCarvesValues(t *testing.T) {
	var s Slab[[4]uint64]
	a, b := s.New(), s.New()
	assert.Equal(t, uintptr(unsafe.Pointer(a))+32, uintptr(unsafe.Pointer(b)), "values follow each other in a chunk")
	few := s.Make(3)
	assert.Len(t, few, 3)
	assert.Equal(t, 3, cap(few), "an append copies out of the slab")
	few[2][0] = 7
	c := s.New()
	assert.Equal(t, uint64(0), c[0], "the value after a slice is its own")
	many := s.Make(10_000)
	assert.Len(t, many, 10_000, "more than a chunk's share gets its own allocation")
}

func TestTableSharesEqualBytes(t *testing.T) {
	tab := New()
	a := tab.Bytes([]byte(`{"template":"t-1"}`))
	b := tab.Bytes([]byte(`{"template":"t-1"}`))
	c := tab.Bytes([]byte(`{"template":"t-2"}`))
	assert.True(t, unsafe.SliceData(a) == unsafe.SliceData(b), "equal data is kept once")
	assert.False(t, unsafe.SliceData(a) == unsafe.SliceData(c))
	assert.Equal(t, `{"template":"t-2"}`, string(c))
	var none *Table
	d := []byte("data")
	assert.False(t, unsafe.SliceData(d) == unsafe.SliceData(none.Bytes(d)), "a nil table copies bytes all the same: never b itself")
	assert.Equal(t, "data", string(none.Bytes(d)))
}

// Shrunk keeps what a map holds in a map of that size: the room of a
// burst's keys, deleted since, goes with the old map.
func TestShrunk(t *testing.T) {
	assert.Nil(t, Shrunk[string, int](nil))
	heapNow := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	m := map[string]int{}
	for i := range 50_000 {
		m[fmt.Sprint(i)] = i
	}
	for i := range 50_000 {
		if i%1000 != 0 {
			delete(m, fmt.Sprint(i))
		}
	}
	before := heapNow()
	m = Shrunk(m)
	after := heapNow()
	t.Logf("heap %d kB with the burst's map, %d kB shrunk", before>>10, after>>10)
	assert.Greater(t, before, after+1<<20)
	assert.Len(t, m, 50)
	assert.Equal(t, 49_000, m["49000"])
}

// Trimmed copies into an array of the slice's length, and drops the array
// of an empty one (a reslice to length 0 keeps it).
func TestTrimmed(t *testing.T) {
	big := make([]int, 3, 1<<16)
	big[0], big[1], big[2] = 1, 2, 3
	tr := Trimmed(big[1:])
	assert.Equal(t, []int{2, 3}, tr)
	assert.Equal(t, 2, cap(tr))
	tr[0] = 9
	assert.Equal(t, 2, big[1], "a copy, not the array")
	assert.Nil(t, Trimmed(big[:0]))
	assert.Nil(t, Trimmed[int](nil))
}
