//go:build unix

package docker

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The nodes of one host take turns to create an engine's network: a second
// lock of the same engine and network waits for the first, another network's
// does not.
func TestLockNetworkTakesTurns(t *testing.T) {
	dir := t.TempDir()
	engine, name := "unix:///test/"+t.Name(), "net"
	unlock := lockNetwork(t.Context(), dir, engine, name)

	other := make(chan struct{})
	go func() {
		lockNetwork(t.Context(), dir, engine, "another")()
		close(other)
	}()
	select {
	case <-other:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "a lock of another network waited")
	}

	second := make(chan struct{})
	go func() {
		lockNetwork(t.Context(), dir, engine, name)()
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
	left, err := filepath.Glob(filepath.Join(dir, "*"))
	require.NoError(t, err)
	assert.Empty(t, left, "lock files left behind")
}

// Holders that remove the file as they let go never let two in at once.
func TestLockNetworkExcludes(t *testing.T) {
	dir := t.TempDir()
	var inside, most atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 25 {
				unlock := lockNetwork(t.Context(), dir, "unix:///test/excludes", "net")
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

// What another user planted at the lock's path in a shared directory (a
// link, a FIFO) is neither followed nor waited on: the node goes on without
// the lock at once, and the link's target is untouched.
func TestLockNetworkIgnoresPlantedFiles(t *testing.T) {
	dir := t.TempDir()
	engine := "unix:///test/planted"
	probe := lockNetwork(t.Context(), dir, engine, "net")
	paths, err := filepath.Glob(filepath.Join(dir, "*.lock"))
	require.NoError(t, err)
	require.Len(t, paths, 1)
	probe()

	target := filepath.Join(t.TempDir(), "target")
	require.NoError(t, os.Symlink(target, paths[0]))
	start := time.Now()
	lockNetwork(t.Context(), dir, engine, "net")()
	assert.NoFileExists(t, target, "the link was followed")

	require.NoError(t, os.Remove(paths[0]))
	require.NoError(t, syscall.Mkfifo(paths[0], 0o600))
	lockNetwork(t.Context(), dir, engine, "net")()
	assert.Less(t, time.Since(start), networkLockWait, "a planted file held the node")
	assert.FileExists(t, paths[0], "what was planted is left alone")
}
