package member_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/member/membertest"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// versionsSeen collects the versions of kind/name that st's watch shows
// from now on.
func versionsSeen(t *testing.T, st *store.Store, kind, name string) func() []types.Version {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var (
		mu   sync.Mutex
		seen []types.Version
	)
	events := st.Watch(ctx, st.Seq())
	go func() {
		for ev := range events {
			if ev.Record.Kind == kind && ev.Record.Name == name {
				mu.Lock()
				seen = append(seen, ev.Record.Version)
				mu.Unlock()
			}
		}
	}()
	return func() []types.Version {
		mu.Lock()
		defer mu.Unlock()
		return append([]types.Version(nil), seen...)
	}
}

// A provisional write that the next write of its object replaces within
// the hold never leaves its node; one that stays reaches the peers.
func TestProvisionalWriteIsHeldBack(t *testing.T) {
	cfg := membertest.FastConfig()
	cfg.AntiEntropyInterval = time.Hour // only pushes carry the writes
	c := membertest.Start(t, 3, membertest.Options{Config: cfg})
	src := c.Nodes[0].Store
	peer := c.Nodes[1].Store
	// The joins' anti-entropy rounds, which send whatever a store holds,
	// are over once a write has reached everyone and the stores agree.
	first := put(t, src, "first", "alice")
	waitEverywhere(t, c, types.KindMachineClaim, "first", first.Version, 5*time.Second)
	c.WaitConverged(5 * time.Second)

	t.Run("replaced", func(t *testing.T) {
		seen := versionsSeen(t, peer, types.KindMachineClaim, "r")
		_, err := src.Put(claim("r", "reserved"), store.PutOptions{Provisional: true})
		require.NoError(t, err)
		final, err := src.Put(claim("r", "running"), store.PutOptions{})
		require.NoError(t, err)
		waitEverywhere(t, c, types.KindMachineClaim, "r", final.Version, 5*time.Second)
		assert.Equal(t, []types.Version{final.Version}, seen(), "only the last write reached the peer")
	})

	t.Run("kept", func(t *testing.T) {
		rec, err := src.Put(claim("k", "reserved"), store.PutOptions{Provisional: true})
		require.NoError(t, err)
		waitEverywhere(t, c, types.KindMachineClaim, "k", rec.Version, 5*time.Second)
	})
}
