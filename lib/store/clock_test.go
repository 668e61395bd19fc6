package store

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHLCNow(t *testing.T) {
	clk := newFakeClock()
	start := clk.Now()
	wall := HLCFromTime(start)
	steps := []struct {
		name string
		move time.Duration
		want uint64
	}{
		{"first tick is wall time", 0, wall},
		{"same millisecond counts up", 0, wall + 1},
		{"still same millisecond", 500 * time.Microsecond, wall + 2},
		{"wall moves on", time.Second, wall + 1000<<16},
		{"wall goes back an hour", -time.Hour, wall + 1000<<16 + 1},
		{"still behind", time.Minute, wall + 1000<<16 + 2},
		{"wall catches up", 2 * time.Hour, HLCFromTime(start.Add(time.Hour + time.Minute + time.Second + 500*time.Microsecond))},
	}
	c := NewHLC(clk.Now, 0)
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			clk.Add(st.move)
			assert.Equal(t, st.want, c.Now())
			assert.Equal(t, st.want, c.Last())
		})
	}
}

func TestHLCUpdate(t *testing.T) {
	clk := newFakeClock()
	c := NewHLC(clk.Now, 0)
	first := c.Now()
	remote := first + 10<<16 + 5
	c.Update(remote)
	assert.Equal(t, remote, c.Last())
	assert.Equal(t, remote+1, c.Now(), "next tick orders after the remote value")
	c.Update(first) // older: no effect
	assert.Equal(t, remote+1, c.Last())
}

func TestHLCSeededFromLast(t *testing.T) {
	clk := newFakeClock()
	seed := HLCFromTime(clk.Now().Add(time.Hour))
	c := NewHLC(clk.Now, seed)
	assert.Equal(t, seed+1, c.Now())
}

func TestHLCTimeRoundTrip(t *testing.T) {
	tm := time.Date(2026, 3, 1, 12, 0, 0, 123_000_000, time.UTC)
	assert.True(t, HLCTime(HLCFromTime(tm)+42).Equal(tm))
	assert.Equal(t, uint64(0), HLCFromTime(time.Unix(-10, 0)))
}

func TestHLCConcurrentUnique(t *testing.T) {
	c := NewHLC(newFakeClock().Now, 0) // a frozen wall clock: only the counter moves
	const workers, each = 4, 500
	var mu sync.Mutex
	seen := map[uint64]bool{}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			local := make([]uint64, 0, each)
			prev := uint64(0)
			for range each {
				v := c.Now()
				assert.Greater(t, v, prev)
				prev = v
				local = append(local, v)
			}
			mu.Lock()
			for _, v := range local {
				seen[v] = true
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	require.Len(t, seen, workers*each)
}

func TestStoreVersionsMonotonicWhenWallGoesBack(t *testing.T) {
	s, clk := newMemStore(t)
	var prev Record
	for i, move := range []time.Duration{0, time.Second, -time.Hour, -time.Hour, time.Millisecond, 3 * time.Hour} {
		clk.Add(move)
		rec, err := s.Put(claim("c"), PutOptions{})
		require.NoError(t, err)
		if i > 0 {
			assert.Equal(t, 1, rec.Version.Compare(prev.Version), "step %d", i)
		}
		prev = rec
	}
}
