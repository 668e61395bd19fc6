package queue

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestQueueKeepsOrderAndNeverBlocks(t *testing.T) {
	q := New[int]()
	for i := range 10_000 { // far past any channel buffer: Push must not block
		q.Push(i)
	}
	<-q.Wait()
	got := q.Drain()
	assert.Len(t, got, 10_000)
	for i, v := range got {
		if v != i {
			t.Fatalf("item %d is %d", i, v)
		}
	}
	assert.Empty(t, q.Drain())
}

func TestQueueConcurrentPushers(t *testing.T) {
	q := New[int]()
	var wg sync.WaitGroup
	for p := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				q.Push(p*1000 + i)
			}
		}()
	}
	total := 0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case <-q.Wait():
			total += len(q.Drain())
			continue
		case <-done:
		}
		break
	}
	total += len(q.Drain())
	assert.Equal(t, 8000, total)
}
