package cache

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Records rewritten over and over leave dead bytes that compaction drops,
// keeping every live record as it was; a slice handed out before a
// compaction still reads what it read.
func TestArenaCompacts(t *testing.T) {
	var a arena
	recs := map[string]loc{}
	want := map[string][]byte{}
	rec := func(i, v int) []byte { return bytes.Repeat([]byte(fmt.Sprintf("%d.%d;", i, v)), 60) }
	for i := range 1000 {
		b := rec(i, 0)
		recs[fmt.Sprint(i)], want[fmt.Sprint(i)] = a.put(b), b
	}
	held := a.get(recs["7"])
	heldWant := bytes.Clone(held)
	assert.False(t, a.due(false), "nothing dead yet")
	compactions := 0
	for v := 1; v <= 5; v++ {
		for i := range 1000 {
			name := fmt.Sprint(i)
			b := rec(i, v)
			old := recs[name]
			recs[name], want[name] = a.put(b), b
			a.free(old)
			if a.due(false) {
				a.compact(recs, nil)
				compactions++
				assert.Zero(t, a.dead)
			}
		}
	}
	assert.Positive(t, compactions)
	assert.LessOrEqual(t, a.dead, max(a.live, 4*arenaChunk), "dead bytes bounded by live ones")
	require.True(t, a.due(true) || a.dead == 0)
	a.compact(recs, nil)
	assert.Zero(t, a.dead)
	total := 0
	for name, l := range recs {
		assert.Equal(t, want[name], a.get(l), name)
		total += int(l.n)
	}
	assert.Equal(t, total, a.live)
	assert.LessOrEqual(t, len(a.chunks), total/arenaChunk+1, "live records packed end to end")
	assert.Equal(t, heldWant, held, "a slice from before the compactions is unchanged")

	big := bytes.Repeat([]byte("x"), 2*arenaChunk)
	l := a.put(big)
	assert.Equal(t, big, a.get(l), "a record larger than a chunk")
	got := a.get(recs["1"])
	assert.Equal(t, len(got), cap(got), "appending to a record copies it")
}
