package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMemoryTrimmer(t *testing.T) {
	tr := memoryTrimmer{}
	var cools, settles, trims []int
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
		cool, settle, trim := tr.tick(allocs, free)
		if cool {
			cools = append(cools, i)
		}
		if settle {
			settles = append(settles, i)
		}
		if trim {
			trims = append(trims, i)
			free = 0
		}
	}
	// Quiet from tick 6: a cool and a trim after quietTicks, a settle (a
	// trim whatever the free heap) the tick after, then a trim only once
	// there is enough free heap again; a cool and a settle again in the
	// next quiet spell, from tick 31.
	assert.Equal(t, []int{5 + quietTicks, 30 + quietTicks}, cools)
	assert.Equal(t, []int{5 + quietTicks + 1, 30 + quietTicks + 1}, settles)
	assert.Equal(t, []int{5 + quietTicks, 5 + quietTicks + 1, 20, 30 + quietTicks, 30 + quietTicks + 1}, trims)

	tr = memoryTrimmer{}
	cools, settles, trims = nil, nil, nil
	for i := range 10 {
		cool, settle, trim := tr.tick(0, trimAtLeast-1)
		if cool {
			cools = append(cools, i+1)
		}
		if settle {
			settles = append(settles, i+1)
		}
		if trim {
			trims = append(trims, i+1)
		}
	}
	assert.Equal(t, []int{quietTicks}, cools, "a quiet spell cools once, however little is free")
	assert.Equal(t, []int{quietTicks + 1}, settles, "and settles once, the tick after")
	assert.Equal(t, []int{quietTicks + 1}, trims, "the settle trims; otherwise not worth a collection")

	tr = memoryTrimmer{}
	var total uint64
	next := func(add uint64) (cool, settle bool) {
		total += add
		cool, settle, _ = tr.tick(total, 0)
		return cool, settle
	}
	next(0)
	next(0) // cools
	_, settle := next(quietAlloc)
	assert.False(t, settle, "a busy tick after the cool does not settle")
	for range quietTicks - 1 {
		next(0)
	}
	cool, settle := next(0)
	assert.True(t, cool && !settle, "a new quiet spell cools first")
	_, settle = next(0)
	assert.True(t, settle, "and then settles")

	// A cool allocates (it copies what the node keeps, more than a busy
	// tick's worth): the trimmer does not take it for activity, and does
	// not cool again; the trim its drop asked for comes with it, and the
	// mapped pages are released after each trim (a collection reads the
	// executable's stack maps).
	tr = memoryTrimmer{}
	var steps []string
	allocs = 0
	for i := range 14 {
		allocs += quietAlloc / 4 // idle work
		if i >= 10 {
			allocs += quietAlloc // busy again
		}
		tick := strconv.Itoa(i + 1)
		_, _, trimmed := tr.step(func() (uint64, uint64) { return allocs, 0 },
			func() int64 { steps = append(steps, tick+" cool"); allocs += 4 * quietAlloc; return coolTrimAtLeast },
			func() { steps = append(steps, tick+" trim") },
			func() { steps = append(steps, tick+" release") },
			func() { steps = append(steps, tick+" wake") })
		if trimmed {
			assert.Contains(t, steps, tick+" trim")
		}
	}
	c, s := strconv.Itoa(quietTicks), strconv.Itoa(quietTicks+1)
	assert.Equal(t, []string{c + " cool", c + " trim", c + " release", s + " trim", s + " release", "11 wake"}, steps,
		"the cool's own allocations are not activity; the tick after it settles; the first busy tick after a cool wakes, once")
	allocs, _ = heapFigures()
	assert.Positive(t, allocs)
}

// TestHeapFiguresCountGarbage: garbage made since the last collection is
// what a trim frees after a burst, before the runtime collects it.
func TestHeapFiguresCountGarbage(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	// Free heap a test before left (a store's buffers) would take the
	// garbage's allocations and hide them: hand it back first.
	debug.FreeOSMemory()
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

func TestReleasableMappings(t *testing.T) {
	const smaps = `00400000-01592000 r-xp 00000000 fd:01 42 /usr/bin/hf-node
Size:              17992 kB
Rss:               13952 kB
Anonymous:             0 kB
01592000-02780000 r--p 01192000 fd:01 42 /usr/bin/hf-node
Rss:               14004 kB
Anonymous:             0 kB
02780000-0283a000 rw-p 02380000 fd:01 42 /usr/bin/hf-node
Anonymous:           612 kB
0283a000-0284a000 r--p 0243a000 fd:01 42 /usr/bin/hf-node
Anonymous:             4 kB
0284a000-0285a000 r--p 00000000 fd:01 43 /usr/lib/libc.so.6
Anonymous:             0 kB
11ed34400000-11ed35800000 rw-p 00000000 00:00 0
Anonymous:          4580 kB
7ffd1000-7ffd2000 r--s 00000000 fd:01 42 /usr/bin/hf-node
Anonymous:             0 kB
7f0000000000-7f0000800000 r--s 00000000 fd:01 50 /var/lib/hf/store/000003.sst
Anonymous:             0 kB
7f0000800000-7f0001000000 rw-s 00000000 fd:01 51 /var/lib/hf/store/00004.mem
Anonymous:             0 kB
7f0001000000-7f0002000000 rw-s 00000000 fd:01 52 /var/lib/hf/store/000001.vlog
Anonymous:             0 kB
7f0002000000-7f0002100000 r--p 00000000 fd:01 53 /var/lib/hf/store/000005.sst
Anonymous:             0 kB
7f0002100000-7f0002200000 r--s 00000000 fd:01 54 /var/lib/hf/store/MANIFEST
Anonymous:             0 kB
7f0002200000-7f0002300000 r--s 00000000 fd:01 55 /var/lib/hf/store/old/000006.sst
Anonymous:             0 kB
7f0002300000-7f0002400000 r--s 00000000 fd:01 56 /var/lib/hf/store/000002.sst (deleted)
Anonymous:             0 kB
`
	segs, err := releasableMappings(strings.NewReader(smaps), "/usr/bin/hf-node", "")
	require.NoError(t, err)
	// Text and rodata; not the data segment (writable), the segment with a
	// private copy of a page (the loader wrote it), another file, an
	// anonymous mapping or a shared one; no store file without a store dir.
	require.Equal(t, []mapping{{0x400000, 0x1592000, true}, {0x1592000, 0x2780000, true}}, segs)

	segs, err = releasableMappings(strings.NewReader(smaps), "/usr/bin/hf-node", "/var/lib/hf/store")
	require.NoError(t, err)
	// And the store's shared mappings of its tables, memtable log and value
	// log; not a private mapping, another file of the store, a file in a
	// directory below it or one deleted.
	require.Equal(t, []mapping{{0x400000, 0x1592000, true}, {0x1592000, 0x2780000, true},
		{0x7f0000000000, 0x7f0000800000, false}, {0x7f0000800000, 0x7f0001000000, false}, {0x7f0001000000, 0x7f0002000000, false}}, segs)
}
