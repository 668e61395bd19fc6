// Package queue holds the unbounded FIFO that hf's loops use to hand work to
// each other: Push never blocks, so memberlist callbacks stay non-blocking and
// loops that feed each other (elector -> acceptor -> elector) cannot deadlock
// on full channels.
package queue

import "sync"

// Queue is an unbounded FIFO whose Push never blocks.
// Wait returns a channel that has a value whenever the queue may be non-empty.
type Queue[T any] struct {
	mu     sync.Mutex
	items  []T
	signal chan struct{}
}

// New returns an empty queue.
func New[T any]() *Queue[T] {
	return &Queue[T]{signal: make(chan struct{}, 1)}
}

// Push appends v and wakes the consumer. Safe for concurrent use.
func (q *Queue[T]) Push(v T) {
	q.mu.Lock()
	q.items = append(q.items, v)
	q.mu.Unlock()
	select {
	case q.signal <- struct{}{}:
	default:
	}
}

// Wait is readable when items may be waiting.
func (q *Queue[T]) Wait() <-chan struct{} { return q.signal }

// Drain takes every queued item.
func (q *Queue[T]) Drain() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := q.items
	q.items = nil
	return out
}
