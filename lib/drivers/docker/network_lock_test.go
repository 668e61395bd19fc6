//go:build unix

package docker

import (
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
}
