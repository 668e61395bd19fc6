package workqueue

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAddDedupsAndKeepsOrder(t *testing.T) {
	q := New(nil)
	q.Add("a")
	q.Add("b")
	q.Add("a")
	assert.Equal(t, 2, q.Len())
	k, ok := q.Get()
	require.True(t, ok)
	assert.Equal(t, "a", k)
	k, _ = q.Get()
	assert.Equal(t, "b", k)
	q.Done("a")
	q.Done("b")
	assert.Equal(t, 0, q.Len())
}

// A key added while it is worked on is worked on again after Done, and never
// by two workers at once.
func TestBusyKeyIsRequeuedAfterDone(t *testing.T) {
	q := New(nil)
	q.Add("a")
	k, _ := q.Get()
	q.Add("a")
	assert.Equal(t, 0, q.Len(), "not handed out twice while busy")
	q.Done(k)
	assert.Equal(t, 1, q.Len())
	k, _ = q.Get()
	assert.Equal(t, "a", k)
	q.Done(k)
}

func TestAddAfter(t *testing.T) {
	q := New(nil)
	start := time.Now()
	q.AddAfter("late", 50*time.Millisecond)
	q.AddAfter("late", time.Hour) // the earlier request wins
	q.AddAfter("now", 0)
	k, _ := q.Get()
	assert.Equal(t, "now", k)
	q.Done(k)
	k, _ = q.Get()
	assert.Equal(t, "late", k)
	assert.GreaterOrEqual(t, time.Since(start), 50*time.Millisecond)
	q.Done(k)
}

func TestShutDownWakesGet(t *testing.T) {
	q := New(nil)
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			_, ok := q.Get()
			assert.False(t, ok)
		})
	}
	time.Sleep(10 * time.Millisecond)
	q.ShutDown()
	wg.Wait()
	q.Add("x") // no effect after shut down
	_, ok := q.Get()
	assert.False(t, ok)
}
