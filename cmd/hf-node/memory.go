package main

import (
	"context"
	"log/slog"
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
)

// memoryTrimmer decides when to trim: tick it with the bytes allocated so
// far and the free heap, and it says whether to trim now.
type memoryTrimmer struct {
	allocs uint64
	quiet  int // quiet ticks in a row
}

func (t *memoryTrimmer) tick(allocs, free uint64) bool {
	busy := allocs-t.allocs >= quietAlloc
	t.allocs = allocs
	if busy {
		t.quiet = 0
		return false
	}
	t.quiet++
	return t.quiet >= quietTicks && free >= trimAtLeast
}

// trimMemoryWhenIdle runs the trimmer until ctx ends; cool, before each
// trim, drops what is kept only for speed.
func trimMemoryWhenIdle(ctx context.Context, log *slog.Logger, cool func()) {
	tick := time.NewTicker(trimTick)
	defer tick.Stop()
	allocs, _ := heapFigures()
	t := memoryTrimmer{allocs: allocs}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		allocs, free := heapFigures()
		if !t.tick(allocs, free) {
			continue
		}
		start := time.Now()
		cool()
		debug.FreeOSMemory()
		log.Debug("idle: returned free memory to the OS", "free_mb", free>>20, "took", time.Since(start))
	}
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
