package workqueue

import (
	"fmt"
	"runtime"
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

// Compact hands back the room a burst's keys took in the queue's maps, and
// the queue goes on as it was: waiting, busy, dirty and delayed keys alike.
func TestCompactShrinksAndKeepsWork(t *testing.T) {
	q := New(nil)
	defer q.ShutDown()
	heapNow := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	for i := range 20_000 {
		q.Add(fmt.Sprintf("burst-%05d", i))
	}
	for range 20_000 {
		k, _ := q.Get()
		q.Done(k)
	}
	q.Add("waiting")
	q.Add("busy")
	k, _ := q.Get()
	require.Equal(t, "waiting", k)
	q.Add("waiting") // dirty: worked on again after Done
	q.AddAfter("later", 50*time.Millisecond)
	before := heapNow()
	q.Compact()
	after := heapNow()
	t.Logf("heap %d kB before Compact, %d kB after", before>>10, after>>10)
	assert.Greater(t, before, after+512<<10, "the burst's room is handed back")

	q.Done("waiting")
	var got []string
	for range 3 {
		k, ok := q.Get()
		require.True(t, ok)
		got = append(got, k)
		q.Done(k)
	}
	assert.Equal(t, []string{"busy", "waiting", "later"}, got)
}
