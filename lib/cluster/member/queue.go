package member

import "sync"

// queue is an unbounded FIFO whose Push never blocks, so memberlist's
// callbacks can hand work to this package's goroutines without waiting.
// Wait returns a channel that has a value whenever the queue may be non-empty.
type queue[T any] struct {
	mu     sync.Mutex
	items  []T
	signal chan struct{}
}

func newQueue[T any]() *queue[T] {
	return &queue[T]{signal: make(chan struct{}, 1)}
}

// Push appends v and wakes the consumer. Safe for concurrent use.
func (q *queue[T]) Push(v T) {
	q.mu.Lock()
	q.items = append(q.items, v)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// Wait is readable when items may be waiting.
func (q *queue[T]) Wait() <-chan struct{} { return q.signal }

// Drain takes every queued item.
func (q *queue[T]) Drain() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}
