package store

import (
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
)

// Records decoded apart share one copy of their kind and their writers' names.
func TestDecodedRecordsShareRecurringStrings(t *testing.T) {
	s, _ := newMemStore(t)
	putClaim(t, s, "a")
	putClaim(t, s, "b")
	recs, err := s.List("MachineClaim")
	assert.NoError(t, err)
	a, b := recs[0], recs[1]
	same := func(x, y string) bool { return unsafe.StringData(x) == unsafe.StringData(y) }
	assert.True(t, same(a.Kind, b.Kind), "kind")
	assert.True(t, same(a.Version.Node, b.Version.Node), "writer")
	assert.True(t, same(a.Facets[0].Name, b.Facets[0].Name), "facet name")
	assert.False(t, same(a.Name, b.Name))
	assert.Equal(t, "a", a.Name)
}
