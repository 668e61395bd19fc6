// Package workqueue is the per-key work queue of hf's reconcilers, in
// controller-runtime's shape: a key added while it waits is queued once, a
// key added while it is being worked on is worked on again afterwards (never
// by two workers at once), and AddAfter asks for a key again at a time.
//
// Add and AddAfter never block, so watch handlers and memberlist callbacks can
// call them; only Get waits.
package workqueue

import (
	"container/heap"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/internal/intern"
)

// Queue is a set of keys waiting for work. The zero value is not usable; New
// makes one.
type Queue struct {
	mu     sync.Mutex
	cond   *sync.Cond
	order  []string             // FIFO of waiting keys
	queued map[string]bool      // keys in order
	busy   map[string]bool      // keys handed out by Get, not yet Done
	dirty  map[string]bool      // keys added while busy: queued again on Done
	later  delayed              // AddAfter keys, by due time
	due    map[string]time.Time // earliest due time per delayed key
	now    func() time.Time
	timer  *time.Timer
	closed bool
}

// New returns an empty queue reading time from now (time.Now when nil).
func New(now func() time.Time) *Queue {
	if now == nil {
		now = time.Now
	}
	q := &Queue{queued: map[string]bool{}, busy: map[string]bool{}, dirty: map[string]bool{}, due: map[string]time.Time{}, now: now}
	q.cond = sync.NewCond(&q.mu)
	return q
}

// Add queues key for work now.
func (q *Queue) Add(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.addLocked(key)
}

func (q *Queue) addLocked(key string) {
	switch {
	case q.closed:
	case q.busy[key]:
		q.dirty[key] = true
	case !q.queued[key]:
		q.queued[key] = true
		q.order = append(q.order, key)
		q.cond.Signal()
	}
}

// AddAfter queues key for work once d has passed (at once when d <= 0). Of
// several requests for one key the earliest wins.
func (q *Queue) AddAfter(key string, d time.Duration) {
	if d <= 0 {
		q.Add(key)
		return
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	at := q.now().Add(d)
	if cur, ok := q.due[key]; ok && !at.Before(cur) {
		return
	}
	q.due[key] = at
	heap.Push(&q.later, delayedKey{key: key, at: at})
	q.armLocked()
}

// armLocked sets the timer for the earliest delayed key.
func (q *Queue) armLocked() {
	if len(q.later) == 0 {
		return
	}
	wait := q.later[0].at.Sub(q.now())
	if q.timer == nil {
		q.timer = time.AfterFunc(wait, q.release)
		return
	}
	q.timer.Reset(wait)
}

// release queues the delayed keys that are due.
func (q *Queue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	now := q.now()
	for len(q.later) > 0 && !q.later[0].at.After(now) {
		d := heap.Pop(&q.later).(delayedKey)
		if at, ok := q.due[d.key]; ok && at.Equal(d.at) {
			delete(q.due, d.key)
			q.addLocked(d.key)
		}
	}
	q.armLocked()
}

// Get waits for a key and marks it busy; ok is false once the queue is shut
// down. Every key from Get needs a Done.
func (q *Queue) Get() (key string, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.order) == 0 && !q.closed {
		q.cond.Wait()
	}
	if q.closed {
		return "", false
	}
	key = q.order[0]
	q.order[0] = ""
	q.order = q.order[1:]
	if len(q.order) == 0 {
		q.order = nil
	}
	delete(q.queued, key)
	q.busy[key] = true
	return key, true
}

// Done ends the work on key; if it was added meanwhile it is queued again.
func (q *Queue) Done(key string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	delete(q.busy, key)
	if q.dirty[key] {
		delete(q.dirty, key)
		q.addLocked(key)
	}
}

// Len is the number of keys waiting now (not delayed, not busy).
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.order)
}

// Compact remakes the queue's maps and slices at the size of what they hold
// now: a Go map keeps the room of its fullest moment (a burst's 10,000
// keys, ~1 MB), and an idle node should not. Work on the queue goes on.
func (q *Queue) Compact() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queued, q.busy, q.dirty, q.due = intern.Shrunk(q.queued), intern.Shrunk(q.busy), intern.Shrunk(q.dirty), intern.Shrunk(q.due)
	q.order, q.later = intern.Trimmed(q.order), intern.Trimmed(q.later)
}

// ShutDown wakes every Get with ok false and drops what waits.
func (q *Queue) ShutDown() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.closed = true
	if q.timer != nil {
		q.timer.Stop()
	}
	q.order, q.later = nil, nil
	q.cond.Broadcast()
}

type delayedKey struct {
	key string
	at  time.Time
}

// delayed is a min-heap of delayed keys by due time.
type delayed []delayedKey

func (h delayed) Len() int           { return len(h) }
func (h delayed) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h delayed) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *delayed) Push(x any)        { *h = append(*h, x.(delayedKey)) }
func (h *delayed) Pop() any {
	old := *h
	n := len(old)
	x := old[n-1]
	*h = old[:n-1]
	return x
}
