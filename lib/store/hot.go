package store

import "sync"

// hotSize is how many records one generation of the hot set holds; the set
// holds at most twice that.
const hotSize = 1024

// hotRecords holds the records written last, as a read of badger would
// return them, so that the read-modify-writes of objects in flight (a claim
// and its machine get five writes in a second) read them from memory, not
// from badger. It is written only under the store's write lock, after the
// commit that stored the record and before the writer or any watcher hears
// of it, so a hit is never older than what badger holds at that moment.
// Two generations bound it: when the current one is full it becomes the old
// one and the old one is dropped.
type hotRecords struct {
	mu       sync.RWMutex
	cur, old map[recordKey]Record
}

// recordKey names a record: a map key that costs no allocation to make.
type recordKey struct{ kind, name string }

func hotKey(kind, name string) recordKey { return recordKey{kind, name} }

// get returns the record of kind/name if it is hot. The record shares its
// facets' data with the set and with other readers: read only.
func (h *hotRecords) get(kind, name string) (Record, bool) {
	k := hotKey(kind, name)
	h.mu.RLock()
	defer h.mu.RUnlock()
	if r, ok := h.cur[k]; ok {
		return r, true
	}
	r, ok := h.old[k]
	return r, ok
}

// put makes r, just committed, the hot record of its key.
func (h *hotRecords) put(r Record) {
	k := hotKey(r.Kind, r.Name)
	r.Data = nil // as badger returns it: assembled on demand
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur == nil || len(h.cur) >= hotSize {
		if _, ok := h.cur[k]; !ok {
			h.old, h.cur = h.cur, make(map[recordKey]Record, hotSize)
		}
	}
	delete(h.old, k)
	h.cur[k] = r
}

// drop forgets kind/name (its record was removed from badger).
func (h *hotRecords) drop(kind, name string) {
	k := hotKey(kind, name)
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.cur, k)
	delete(h.old, k)
}

// clear forgets every record: an idle store has no objects in flight, and
// the set's records, made during the burst that ended, would keep the
// burst's heap (see Store.Cool).
func (h *hotRecords) clear() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cur, h.old = nil, nil
}
