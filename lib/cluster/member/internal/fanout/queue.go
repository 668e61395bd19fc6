package fanout

// Queue is what waits to be sent to one peer, coalesced by key: a newer
// record of an object replaces the queued older one in place (a record is
// the object's whole current state, so the newer one carries everything the
// older did), and a hot object is sent once per batch, not once per write.
// The caller serialises access.
type Queue[K comparable, R any] struct {
	key  func(*R) K
	size func(*R) int

	recs  []R
	bytes int
	// pos is the index of each queued key, counted from the first record
	// ever queued; taken is how many have been taken off the front.
	pos   map[K]int
	taken int
}

// NewQueue returns an empty queue; key names a record's object, size
// estimates its encoded size.
func NewQueue[K comparable, R any](key func(*R) K, size func(*R) int) *Queue[K, R] {
	return &Queue[K, R]{key: key, size: size, pos: map[K]int{}}
}

// Len is how many records wait.
func (q *Queue[K, R]) Len() int { return len(q.recs) }

// Bytes is the waiting records' estimated size.
func (q *Queue[K, R]) Bytes() int { return q.bytes }

// Add queues r, replacing a queued record of the same object.
func (q *Queue[K, R]) Add(r R) {
	k := q.key(&r)
	if i, ok := q.pos[k]; ok {
		j := i - q.taken
		q.bytes += q.size(&r) - q.size(&q.recs[j])
		q.recs[j] = r
		return
	}
	q.pos[k] = q.taken + len(q.recs)
	q.recs = append(q.recs, r)
	q.bytes += q.size(&r)
}

// Take takes the records at the front up to maxBytes (at least one): the
// next batch. Nil when the queue is empty.
func (q *Queue[K, R]) Take(maxBytes int) []R {
	n, size := 0, 0
	for n < len(q.recs) && (n == 0 || size+q.size(&q.recs[n]) <= maxBytes) {
		size += q.size(&q.recs[n])
		n++
	}
	if n == 0 {
		return nil
	}
	batch := q.recs[:n:n]
	for i := range batch {
		delete(q.pos, q.key(&batch[i]))
	}
	q.recs = q.recs[n:]
	q.taken += n
	q.bytes -= size
	if len(q.recs) == 0 {
		q.recs = nil // let the backing array go
	}
	return batch
}

// Drain takes every waiting record and empties the queue.
func (q *Queue[K, R]) Drain() []R {
	out := q.recs
	q.Reset()
	return out
}

// Reset empties the queue.
func (q *Queue[K, R]) Reset() {
	q.recs, q.bytes, q.pos, q.taken = nil, 0, map[K]int{}, 0
}
