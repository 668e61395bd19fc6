package store

import (
	"sync"
	"time"
)

// tombWatch knows when CollectTombstones can find something to collect, so
// that it scans the store only then. A scan reads and decodes every record
// (30,000 on the idle node of the benchmark: ~50 MB of garbage and a burst
// of CPU every GCInterval, for a store holding no tombstone at all). After
// a scan it keeps the earliest DeletedAt of the tombstones the scan left;
// every committed tombstone since (a local delete or one applied from a
// peer) lowers it. A collection with a cutoff at or before that time has
// nothing to find. Open's own scan of every record (recoverState) tells it
// what the store holds at the start, so the first collection needs no scan
// of its own either.
type tombWatch struct {
	// scan serialises collections' scans (CollectTombstones), so one scan's
	// bookkeeping never mixes with another's.
	scan     sync.Mutex
	mu       sync.Mutex
	known    bool      // a scan has run (and its result is oldest, any)
	any      bool      // a tombstone may be stored
	oldest   time.Time // the earliest DeletedAt of those, when any
	scanning bool
	// during is what was noted while a scan ran, which its snapshot may
	// not hold.
	duringAny    bool
	duringOldest time.Time
	scans        int // scans begun (for tests)
}

// opened takes what Open's scan found: any tombstone, the earliest deleted
// at oldest. It runs before the store takes writes.
func (w *tombWatch) opened(any bool, oldest time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.known, w.any, w.oldest = true, any, oldest
}

// noted takes a committed tombstone deleted at t.
func (w *tombWatch) noted(t time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.oldest, w.any = earliest(w.oldest, w.any, t), true
	if w.scanning {
		w.duringOldest, w.duringAny = earliest(w.duringOldest, w.duringAny, t), true
	}
}

func earliest(cur time.Time, has bool, t time.Time) time.Time {
	if !has || t.Before(cur) {
		return t
	}
	return cur
}

// due says whether a collection of what was deleted before olderThan needs
// a scan, and if so, starts one.
func (w *tombWatch) due(olderThan time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.known && (!w.any || !w.oldest.Before(olderThan)) {
		return false
	}
	w.scanning, w.duringAny, w.scans = true, false, w.scans+1
	return true
}

// scanned ends a scan: ok when it collected all it found, left (with any)
// the earliest DeletedAt of the tombstones it found and kept. A scan that
// failed or left some of what it found leaves the next collection to scan.
func (w *tombWatch) scanned(ok, any bool, left time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.scanning = false
	if !ok {
		w.known = false
		return
	}
	w.known, w.any, w.oldest = true, any, left
	if w.duringAny {
		w.oldest, w.any = earliest(w.oldest, w.any, w.duringOldest), true
	}
}
