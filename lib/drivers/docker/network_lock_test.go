//go:build unix

package docker

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The nodes of one host take turns to create an engine's network: a second
// lock of the same engine and network waits for the first, another network's
// does not.
func TestLockNetworkTakesTurns(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir()) // the lock files go there
	engine, name := "unix:///test/"+t.Name(), "net"
	unlock := lockNetwork(t.Context(), engine, name)

	other := make(chan struct{})
	go func() {
		lockNetwork(t.Context(), engine, "another")()
		close(other)
	}()
	select {
	case <-other:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "a lock of another network waited")
	}

	second := make(chan struct{})
	go func() {
		lockNetwork(t.Context(), engine, name)()
		close(second)
	}()
	assert.Never(t, func() bool {
		select {
		case <-second:
			return true
		default:
			return false
		}
	}, 200*time.Millisecond, 10*time.Millisecond, "the second lock did not wait for the first")
	unlock()
	select {
	case <-second:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the second lock was not taken once the first was released")
	}
	left, err := filepath.Glob(filepath.Join(os.TempDir(), "hf-docker-network-*"))
	require.NoError(t, err)
	assert.Empty(t, left, "lock files left behind")
}

// Holders that remove the file as they let go never let two in at once.
func TestLockNetworkExcludes(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				unlock := lockNetwork(t.Context(), "unix:///test/excludes", "net")
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(100 * time.Microsecond)
				inside.Add(-1)
				unlock()
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int32(1), most.Load(), "holders at once")
}
