package clustertest

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster"
)

// handleEcho has every host answer key's asks with its name and the body.
func handleEcho(f *Fleet, key string) {
	for _, h := range f.Up() {
		name := h.Name
		h.Node.HandleAsks(key, func(_ context.Context, body []byte) []byte { return append([]byte(name+":"), body...) })
	}
}

func ask(h *Host, key, body string) (string, error) {
	out, err := h.Node.Ask(context.Background(), key, []byte(body))
	return string(out), err
}

// An ask is decided by the owner of its key, whichever node it is made on;
// a node that no longer reaches a majority of the nodes it knows decides
// nothing (the other side of a partition might decide the same at once).
func TestAskDecidedByTheKeysOwner(t *testing.T) {
	f := Start(t, 2, Options{Node: func(_ int, cfg *cluster.Config) { cfg.OwnerSettle = time.Millisecond }})
	const key = "users"
	handleEcho(f, key)
	owner := ownerOf(key, f.UpNames())
	for _, h := range f.Hosts {
		// The owner may have owned the key for less than OwnerSettle when
		// the fleet is up (1 ms: a loaded machine gets there): asked again.
		var got string
		var err error
		require.Eventually(t, func() bool {
			got, err = ask(h, key, "from "+h.Name)
			return !errors.Is(err, cluster.ErrNotDecided) || !strings.Contains(err.Error(), "became the owner")
		}, 10*time.Second, 10*time.Millisecond, "asked on %s: %v", h.Name, err)
		require.NoError(t, err, "asked on %s", h.Name)
		assert.Equal(t, owner+":from "+h.Name, got, "asked on %s", h.Name)
	}

	i := slices.IndexFunc(f.Hosts, func(h *Host) bool { return h.Name == owner })
	f.Kill(1 - i)
	require.Eventually(t, func() bool {
		_, err := ask(f.Hosts[i], key, "alone")
		return errors.Is(err, cluster.ErrNotDecided) && strings.Contains(err.Error(), "does not reach a majority")
	}, 15*time.Second, 50*time.Millisecond, "the owner alone of two still decides")
}

// A node that has just become the owner of a key decides nothing until it
// has owned it for OwnerSettle: what the last owner wrote must reach it
// first. The node asking hears why.
func TestAskWaitsForANewOwnerToSettle(t *testing.T) {
	f := Start(t, 2, Options{Node: func(_ int, cfg *cluster.Config) { cfg.OwnerSettle = time.Hour }})
	const key = "users"
	handleEcho(f, key)
	for _, h := range f.Hosts {
		_, err := ask(h, key, "early")
		require.ErrorIs(t, err, cluster.ErrNotDecided, "asked on %s", h.Name)
		assert.ErrorContains(t, err, "became the owner of users")
	}
}
