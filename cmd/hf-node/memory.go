package main

import (
	"context"
	"log/slog"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// Returning memory after a burst. The Go runtime keeps the heap it grew to
// for a burst of work (up to twice the live heap with GOGC's default) and
// gives it back to the OS slowly; an idle node should not hold it. Once the
// node has allocated less than quietAlloc per tick for quietTicks ticks and
// the runtime holds at least trimAtLeast of heap a collection would free
// (free spans, and the garbage the last collection has not seen: after a
// burst that is most of it, and the runtime's own collection may be two
// minutes away), it collects and returns what is free (debug.FreeOSMemory).
// A trim costs one full collection and the madvise of the free pages
// (~0.1-0.4 s of CPU for a node holding 20,000 objects), so it waits for
// that much free heap: after a trim, idle garbage first has to fill the heap
// to its goal and be collected, which takes minutes on an idle node.
const (
	trimTick   = 10 * time.Second
	quietTicks = 2
	// quietAlloc is what an idle node allocates in a tick at most (its
	// heartbeat report, health passes, gossip): a few MB for 10,000 machines.
	quietAlloc = 32 << 20
	// trimAtLeast is how much free heap makes a trim worth its collection.
	trimAtLeast = 32 << 20
	// coolTrimAtLeast is how much a cool must drop to be worth a trim on
	// its own (the runtime does not hand back memory below its heap goal,
	// twice the live heap, by itself).
	coolTrimAtLeast = 8 << 20
)

// memoryTrimmer decides when to cool, settle and trim: tick it with the
// bytes allocated so far and the free heap, and it says whether to cool now
// (once a quiet spell, as it begins: the node drops and squeezes what it
// keeps for speed, whatever the free heap; a node loaded at its start, with
// no burst's garbage to trim, holds its records unsqueezed otherwise),
// whether to settle (the tick after the cool, still quiet: see step) and
// whether to trim.
type memoryTrimmer struct {
	allocs uint64
	quiet  int // quiet ticks in a row: the cool is said at quietTicks, the settle at the one after
}

// cooled says whether this quiet spell has cooled.
func (t *memoryTrimmer) cooled() bool { return t.quiet >= quietTicks }

func (t *memoryTrimmer) tick(allocs, free uint64) (cool, settle, trim bool) {
	busy := allocs-t.allocs >= quietAlloc
	t.allocs = allocs
	if busy {
		t.quiet = 0
		return false, false, false
	}
	t.quiet++
	cool, settle = t.quiet == quietTicks, t.quiet == quietTicks+1
	return cool, settle, t.cooled() && (settle || free >= trimAtLeast)
}

// step is one tick of the trimmer: it reads figures (bytes allocated so
// far, free heap), cools, trims and releases the mapped pages as tick
// says, and then reads the allocations again, so that what a cool
// allocates (it copies what the node keeps: tens of MB for 30,000 objects)
// is not taken for the node's activity; counted, it would end the quiet
// spell, and the next one would cool again, over and over. It returns the
// free heap it saw, what the cool dropped, and whether it trimmed. The
// first busy tick after a cool calls wake.
//
// The tick after the cool settles: it trims whatever the free heap, and
// releases the mapped pages again. What the cool replaced is garbage only
// once nothing else holds it, and parts of the node let go on their own
// time (the elector compacts its maps on its worker; a health pass held
// its last batch of the ledger's old entries until the next pass, 10 s
// later): on an idle node holding 10,000 claims such leftovers, each the
// last object of a burst-time page, kept 8-9 MB of pages (the heap's spans
// 54 -> 45 MB for 1 MB of objects) until the runtime's own collection two
// minutes later, handed back only over the minutes after. The pages are
// released after the trim, since a collection reads the stack maps and
// type data of the executable.
func (t *memoryTrimmer) step(figures func() (allocs, free uint64), cool func() int64, trim, release, wake func()) (free uint64, dropped int64, trimmed bool) {
	allocs, free := figures()
	cooled := t.cooled()
	doCool, doSettle, doTrim := t.tick(allocs, free)
	if cooled && !t.cooled() {
		wake()
	}
	if doCool {
		dropped = cool()
		doTrim = doTrim || dropped >= coolTrimAtLeast
	}
	if doTrim {
		trim()
	}
	if doCool || doSettle {
		release()
	}
	if doCool || doTrim {
		t.allocs, _ = figures()
	}
	return free, dropped, doTrim
}

// trimMemoryWhenIdle runs the trimmer until ctx ends; cool, once a quiet
// spell, drops what is kept only for speed and says how many bytes it
// dropped: enough of them make a trim on their own. With each cool and
// settle the node also unmaps the pages of its executable and of the
// store's files in storeDir it is not using (releaseMappedPages), and once
// busy again has its executable read ahead as before (wakeMappedPages).
func trimMemoryWhenIdle(ctx context.Context, log *slog.Logger, storeDir string, cool func() int64) {
	tick := time.NewTicker(trimTick)
	defer tick.Stop()
	allocs, _ := heapFigures()
	t := memoryTrimmer{allocs: allocs}
	release := func() {
		if n, err := releaseMappedPages(storeDir); err != nil {
			log.Debug("idle: unmapping the executable's pages", "err", err)
		} else {
			log.Debug("idle: unmapped the executable's read-only pages and the store's files", "mb", n>>20)
		}
	}
	wake := func() {
		if err := wakeMappedPages(); err != nil {
			log.Debug("busy: reading the executable ahead again", "err", err)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		start := time.Now()
		if free, dropped, trimmed := t.step(heapFigures, cool, trimNow, release, wake); trimmed {
			log.Debug("idle: returned free memory to the OS", "free_mb", free>>20, "dropped_mb", dropped>>20, "took", time.Since(start))
		}
	}
}

// trimNow collects twice and returns the free heap to the OS: the first
// collection moves what sync.Pools hold (the JSON encoders' buffers of the
// burst's last list responses, gzip writers: ~6 MB after a load) to their
// victim caches, the second (FreeOSMemory's) frees them with the rest.
func trimNow() {
	runtime.GC()
	debug.FreeOSMemory()
}

// heapFigures reads the bytes allocated since the start and the heap memory
// a trim can give back: the free spans not yet returned to the OS, and the
// objects the last collection did not find live (garbage made since; the
// unused space inside spans that still hold live objects it cannot).
func heapFigures() (allocs, free uint64) {
	s := []metrics.Sample{
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/live:bytes"},
	}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() == metrics.KindUint64 {
			return s[i].Value.Uint64()
		}
		return 0
	}
	free = v(1)
	if objects, live := v(2), v(3); objects > live {
		free += objects - live
	}
	return v(0), free
}

// runtimeLimit is the Go runtime's soft limit for a node's memory budget:
// seven eighths of it. The rest is for what the runtime does not count and
// RSS does: the store's tables and value log, which badger maps into memory
// (70 MB for a million small objects), and the threads' own stacks.
func runtimeLimit(budget int64) int64 { return budget - budget/8 }
