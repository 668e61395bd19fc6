package store

import (
	"sync"
	"time"
)

// tombWatch knows when CollectTombstones can find something to collect, so
// that it scans the store only then. A scan reads and decodes every record
// (30,000 on the idle node of the benchmark: ~50 MB of garbage and a burst
// of CPU every GCInterval, for a store holding no tombstone at all). It
// keeps the earliest DeletedAt a stored tombstone can have: Open's own scan
// of every record (recoverState) sets it, every committed tombstone (a
// local delete or one applied from a peer) lowers it, and a collection's
// scan sets it to what the scan left. A collection with a cutoff at or
// before it has nothing to find.
type tombWatch struct {
	// scan serialises collections' scans (CollectTombstones): between begin
	// and end, only the scan's own bookkeeping and noted change the watch.
	scan   sync.Mutex
	mu     sync.Mutex
	any    bool      // a tombstone may be stored
	oldest time.Time // the earliest DeletedAt it can have, when any (zero: any time)
	scans  int       // scans begun (for tests)
}

// opened takes what Open's scan found: any tombstone, the earliest deleted
// at oldest. It runs before the store takes writes.
func (w *tombWatch) opened(any bool, oldest time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.any, w.oldest = any, oldest
}

// noted takes a committed tombstone deleted at t.
func (w *tombWatch) noted(t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.oldest, w.any = earliest(w.oldest, w.any, t), true
}

func earliest(cur time.Time, has bool, t time.Time) time.Time {
	if !has || t.Before(cur) {
		return t
	}
	return cur
}

// begin says whether a collection of what was deleted before olderThan
// needs a scan, and if so, starts one: from then on the watch holds only
// what is noted during the scan, which the scan's snapshot may not hold.
// The caller holds scan.
func (w *tombWatch) begin(olderThan time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.any || !w.oldest.Before(olderThan) {
		return false
	}
	w.any, w.oldest, w.scans = false, time.Time{}, w.scans+1
	return true
}

// end ends a scan: ok when it collected all it found, left (with any) the
// earliest DeletedAt of the tombstones it found and kept. A scan that
// failed, or left some of what it found, makes the next collection scan
// again. The caller holds scan.
func (w *tombWatch) end(ok, any bool, left time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case !ok:
		w.any, w.oldest = true, time.Time{}
	case any:
		w.oldest, w.any = earliest(w.oldest, w.any, left), true
	}
}
