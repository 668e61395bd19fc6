package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestMemoryTrimmer(t *testing.T) {
	tr := memoryTrimmer{}
	var cools, trims []int
	allocs, free := uint64(0), uint64(0)
	for i := 1; i <= 40; i++ {
		switch {
		case i <= 5 || i == 30:
			allocs += quietAlloc // a burst: never cool nor trim while it lasts
			free += trimAtLeast
		case i == 20:
			free += trimAtLeast // idle garbage collected
		default:
			allocs += quietAlloc / 4 // idle work
		}
		cool, trim := tr.tick(allocs, free)
		if cool {
			cools = append(cools, i)
		}
		if trim {
			trims = append(trims, i)
			free = 0
		}
	}
	// Quiet from tick 6: a cool and a trim after quietTicks, then a trim
	// only once there is enough free heap again; a cool again in the next
	// quiet spell, from tick 31.
	assert.Equal(t, []int{5 + quietTicks, 30 + quietTicks}, cools)
	assert.Equal(t, []int{5 + quietTicks, 20, 30 + quietTicks}, trims)

	tr = memoryTrimmer{}
	cools = nil
	for i := range 10 {
		cool, trim := tr.tick(0, trimAtLeast-1)
		assert.False(t, trim, "not worth a collection")
		if cool {
			cools = append(cools, i+1)
		}
	}
	assert.Equal(t, []int{quietTicks}, cools, "a quiet spell cools once, however little is free")

	// A cool allocates (it copies what the node keeps, more than a busy
	// tick's worth): the trimmer does not take it for activity, and does
	// not cool again; the trim its drop asked for comes with it.
	tr = memoryTrimmer{}
	cools, trims = nil, nil
	allocs = 0
	for i := range 10 {
		allocs += quietAlloc / 4 // idle work
		_, _, trimmed := tr.step(func() (uint64, uint64) { return allocs, 0 },
			func() int64 { cools = append(cools, i+1); allocs += 4 * quietAlloc; return coolTrimAtLeast },
			func() { trims = append(trims, i+1) })
		if trimmed {
			assert.Equal(t, []int{i + 1}, trims)
		}
	}
	assert.Equal(t, []int{quietTicks}, cools, "the cool's own allocations are not activity")
	assert.Equal(t, []int{quietTicks}, trims)
	allocs, _ = heapFigures()
	assert.Positive(t, allocs)
}

// TestHeapFiguresCountGarbage: garbage made since the last collection is
// what a trim frees after a burst, before the runtime collects it.
func TestHeapFiguresCountGarbage(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	runtime.GC()
	_, before := heapFigures()
	var keep []byte
	for range 48 << 10 {
		keep = make([]byte, 1<<10) // 48 MB made and dropped, no collection
	}
	runtime.KeepAlive(keep)
	_, after := heapFigures()
	assert.GreaterOrEqual(t, after, before+trimAtLeast, "48 MB of garbage is worth a trim")
	runtime.GC()
	debug.FreeOSMemory()
	_, trimmed := heapFigures()
	assert.Less(t, trimmed, uint64(trimAtLeast), "nothing left to trim after one")
}

// A trim frees what sync.Pools hold: after one collection it is still in
// their victim caches (the JSON encoders' buffers of a burst's last list
// responses stayed so, ~6 MB of an idle node's heap).
func TestTrimEmptiesPools(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1)) // no collection but ours
	live := func() uint64 {
		s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(s)
		return s[0].Value.Uint64()
	}
	var pool sync.Pool
	fill := func() {
		for range 64 {
			pool.Put(make([]byte, 1<<20))
		}
	}
	fill()
	debug.FreeOSMemory()
	assert.Greater(t, live(), uint64(40<<20), "after one collection the pool's victims hold what it held")
	fill()
	trimNow()
	assert.Less(t, live(), uint64(16<<20), "a trim frees what the pool held")
	runtime.KeepAlive(&pool)
}

func TestRuntimeLimitLeavesRoomForMappedTables(t *testing.T) {
	assert.Equal(t, int64(896<<20), runtimeLimit(1024<<20))
	assert.Equal(t, int64(28<<20), runtimeLimit(32<<20))
}
