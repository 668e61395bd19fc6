package member_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/member"
	"github.com/hf-fleet/hf/lib/cluster/member/membertest"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// earlyConfig collects a tombstone as soon as every member holds it (the
// stores' TTL stays 24 h and their GC loop is off: any collection here is
// the early one).
func earlyConfig() member.Config {
	cfg := membertest.FastConfig()
	cfg.TombstoneMinAge = time.Nanosecond
	return cfg
}

// tombs counts the tombstones st holds.
func tombs(st *store.Store) int {
	n := 0
	_ = st.Scan(func(r store.Record) error {
		if r.Deleted {
			n++
		}
		return nil
	})
	return n
}

// del deletes claim name on st.
func del(t testing.TB, st *store.Store, name string) store.Record {
	t.Helper()
	rec, err := st.Delete(types.KindMachineClaim, name, types.Version{})
	require.NoError(t, err)
	return rec
}

// TestTombstonesCollectedOnceEveryMemberHasThem: a delete's tombstone is
// collected on all three members long before the TTL once rounds have shown
// each of them that the others hold it, and the trees follow the stores.
func TestTombstonesCollectedOnceEveryMemberHasThem(t *testing.T) {
	c := membertest.Start(t, 3, membertest.Options{Config: earlyConfig()})
	put(t, c.Nodes[0].Store, "keep", "alice")
	put(t, c.Nodes[1].Store, "gone", "bob")
	c.WaitConverged(5 * time.Second)
	tomb := del(t, c.Nodes[2].Store, "gone")
	waitEverywhere(t, c, tomb.Kind, tomb.Name, tomb.Version, 5*time.Second)

	require.Eventually(t, func() bool {
		for _, n := range c.Running() {
			if tombs(n.Store) != 0 {
				return false
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "tombstones not collected")
	for _, n := range c.Running() {
		assert.Equal(t, uint64(1), n.Store.Collected(), n.Name)
		_, err := n.Store.Get(types.KindMachineClaim, "keep")
		assert.NoError(t, err, n.Name)
	}
	// The trees dropped it too: they agree with their stores, without a
	// rebuild.
	require.Eventually(t, func() bool {
		for _, n := range c.Running() {
			d, err := member.ComputeDigest(n.Store)
			if err != nil || d.Records != 1 || n.Member.TreeDigest() != d {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "trees do not follow the stores")
}

// TestDownMemberHoldsCollectionBack: while a member is down (dead, not yet
// forgotten) nobody collects what it has not been shown to hold, however
// many rounds the others run; it comes back with the deleted object still
// live in its store, the delete wins, and then everyone collects.
func TestDownMemberHoldsCollectionBack(t *testing.T) {
	c := membertest.Start(t, 3, membertest.Options{Config: earlyConfig()})
	put(t, c.Nodes[0].Store, "gone", "alice")
	c.WaitConverged(5 * time.Second)
	c.Kill(2)
	tomb := del(t, c.Nodes[0].Store, "gone")
	waitEverywhere(t, c, tomb.Kind, tomb.Name, tomb.Version, 5*time.Second)

	// Rounds between the two live members prove everything to each other,
	// collections run, and the tombstone stays.
	ctx := context.Background()
	for range 5 {
		for _, pair := range [][2]int{{0, 1}, {1, 0}} {
			a, b := c.Nodes[pair[0]], c.Nodes[pair[1]]
			a.Member.RunRound(ctx, b.Name, true)
			_, _, err := a.Member.CollectNow(ctx)
			require.NoError(t, err)
		}
	}
	for _, n := range c.Running() {
		assert.Equal(t, 1, tombs(n.Store), "%s collected with a member down", n.Name)
	}
	stale, err := c.Nodes[2].Store.Get(types.KindMachineClaim, "gone")
	require.NoError(t, err, "the down member still holds the object live")
	require.True(t, stale.Version.HLC < tomb.Version.HLC)

	c.Restart(2)
	c.WaitMembers(15 * time.Second)
	require.Eventually(t, func() bool {
		for _, n := range c.Running() {
			if tombs(n.Store) != 0 {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "tombstones not collected after the member came back")
	for _, n := range c.Running() {
		_, err := n.Store.Get(types.KindMachineClaim, "gone")
		assert.ErrorIs(t, err, store.ErrNotFound, "%s: the deleted object came back", n.Name)
	}
}

// TestCollectedTombstoneIsNotSentBack: one member collects first, while the
// others still hold the tombstone; rounds in every direction never give it
// back (the others were shown it held it: it can only lack it because it
// collected it), the others collect in turn, and then rounds find every
// pair in sync with no tombstone anywhere. Rounds and collections are run
// by hand, so the order is the test's.
func TestCollectedTombstoneIsNotSentBack(t *testing.T) {
	cfg := earlyConfig()
	cfg.AntiEntropyInterval = time.Hour
	c := membertest.Start(t, 3, membertest.Options{Config: cfg})
	ctx := context.Background()
	for i := range 20 {
		put(t, c.Nodes[i%3].Store, fmt.Sprintf("claim-%02d", i), "alice")
	}
	c.WaitConverged(5 * time.Second)
	for i := range 10 {
		rec := del(t, c.Nodes[i%3].Store, fmt.Sprintf("claim-%02d", i))
		waitEverywhere(t, c, rec.Kind, rec.Name, rec.Version, 5*time.Second)
	}
	n0, n1, n2 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	waitTrees(t, c)

	// n0 learns that n1 and n2 hold its tombstones, and collects; n1 and
	// n2 do not collect yet (their periodic check is an hour away).
	n0.Member.RunRound(ctx, n1.Name, true)
	n0.Member.RunRound(ctx, n2.Name, true)
	got, _, err := n0.Member.CollectNow(ctx)
	require.NoError(t, err)
	require.Equal(t, 10, got)
	waitTrees(t, c)
	require.Equal(t, 10, tombs(n1.Store))
	require.Equal(t, 10, tombs(n2.Store))

	for range 3 {
		for _, r := range [][2]*membertest.Node{{n1, n0}, {n0, n1}, {n2, n0}, {n0, n2}} {
			r[0].Member.RunRound(ctx, r[1].Name, true)
			waitTrees(t, c)
			assert.Zero(t, tombs(n0.Store), "%s -> %s gave the collected tombstones back", r[0].Name, r[1].Name)
		}
	}
	// n1 and n2 show each other what they hold and collect too.
	n1.Member.RunRound(ctx, n2.Name, true)
	for _, n := range []*membertest.Node{n1, n2} {
		got, _, err := n.Member.CollectNow(ctx)
		require.NoError(t, err)
		assert.Equal(t, 10, got, n.Name)
	}
	waitTrees(t, c)
	for range 3 {
		for _, a := range c.Nodes {
			for _, b := range c.Nodes {
				if a != b {
					a.Member.RunRound(ctx, b.Name, true)
				}
			}
		}
		waitTrees(t, c)
		for _, n := range c.Nodes {
			assert.Zero(t, tombs(n.Store), n.Name)
		}
	}
	d, ok := membertest.Converged(c.Running())
	assert.True(t, ok)
	assert.Equal(t, 10, d.Records)
}

// waitTrees waits until every member's hash tree holds what its store does
// (the records a round sent have been applied and filed).
func waitTrees(t *testing.T, c *membertest.Cluster) {
	t.Helper()
	var last []member.Digest
	stable := 0
	require.Eventually(t, func() bool {
		var now []member.Digest
		for _, n := range c.Running() {
			d, err := member.ComputeDigest(n.Store)
			if err != nil || n.Member.TreeDigest() != d {
				stable = 0
				return false
			}
			now = append(now, d)
		}
		// Records of a round may still be on their way: the same digests
		// twice, 50 ms apart.
		if fmt.Sprint(now) == fmt.Sprint(last) {
			stable++
		} else {
			stable, last = 0, now
		}
		return stable >= 5
	}, 10*time.Second, 10*time.Millisecond, "the trees follow the stores")
}
