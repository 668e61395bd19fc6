package member

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Held writes come out when due, in the order held; a write held again
// is due from then, and a superseded one never comes out.
func TestHolds(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	rec := func(name string, hlc uint64) store.Record {
		return store.Record{Kind: types.KindMachine, Name: name, Version: types.Version{HLC: hlc, Node: "n1"}}
	}
	names := func(rs []store.Record) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.Name)
		}
		return out
	}
	var h holds
	_, ok := h.next()
	assert.False(t, ok, "nothing held")

	h.hold(rec("a", 1), t0.Add(10*time.Millisecond))
	h.hold(rec("b", 2), t0.Add(20*time.Millisecond))
	h.hold(rec("c", 3), t0.Add(30*time.Millisecond))
	h.hold(rec("a", 4), t0.Add(40*time.Millisecond)) // a again: due later
	b := rec("b", 5)
	assert.True(t, h.supersede(&b))
	assert.False(t, h.supersede(&b), "once")

	due, ok := h.next()
	assert.True(t, ok)
	assert.Equal(t, t0.Add(30*time.Millisecond), due, "c: a is due later now, b is gone")
	assert.Empty(t, h.take(t0.Add(29*time.Millisecond), false))
	assert.Equal(t, []string{"c"}, names(h.take(t0.Add(35*time.Millisecond), false)))
	got := h.take(t0, true)
	assert.Equal(t, []string{"a"}, names(got))
	assert.Equal(t, uint64(4), got[0].Version.HLC, "the write held last")
	_, ok = h.next()
	assert.False(t, ok)
}
