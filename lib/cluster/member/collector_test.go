package member

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/internal/testclock"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

func TestProofs(t *testing.T) {
	p := newProofs()
	// Level 1: node 3 differed, node 5 was empty on the peer.
	p.proveLevel("a", 1, []int{0}, 100, []int{3}, []int{5})
	leafIn := func(l, i int) int { from, _ := leafRange(l, i); return from }
	assert.True(t, p.covers("a", leafIn(1, 0), 100))
	assert.False(t, p.covers("a", leafIn(1, 0), 101), "a later commit")
	assert.False(t, p.covers("a", leafIn(1, 3), 1), "a node that differed")
	assert.False(t, p.covers("a", leafIn(1, 5), 1), "a node the peer lacked")
	assert.False(t, p.covers("b", leafIn(1, 0), 1), "another peer")
	// Level 2 under node 3: all equal but child 50.
	p.proveLevel("a", 2, []int{3}, 120, []int{50})
	assert.True(t, p.covers("a", leafIn(2, 49), 120))
	assert.False(t, p.covers("a", leafIn(2, 50), 1))
	// An older proof never lowers a newer one.
	p.proveLevel("a", 1, []int{0}, 10)
	assert.True(t, p.covers("a", leafIn(1, 0), 100))

	p.proveLevel("b", 1, []int{0}, 90)
	f := p.floor([]string{"a", "b"})
	assert.Equal(t, uint64(90), f[leafIn(1, 0)])
	assert.Equal(t, uint64(90), f[leafIn(1, 4)-1], "a at 120, b at 90")
	assert.Equal(t, uint64(10), f[leafIn(2, 50)], "a at 10, b at 90")
	assert.Equal(t, uint64(0), p.floor([]string{"a", "c"})[0], "c proved nothing")
	p.forget("a")
	assert.False(t, p.covers("a", leafIn(1, 0), 1))
}

// TestCollectorRemembersMembers: the returning-member case. A dead member
// keeps holding collection back after the collecting member restarts and
// no longer hears of it (memberlist tells a restarted member of the live
// ones only): the collector remembers it in the store for ForgetAfter after
// it went. After that it is forgotten, and collection goes on without it
// (a member down longer than ForgetAfter must come back on a fresh data
// dir, as one down longer than the TTL always had to).
func TestCollectorRemembersMembers(t *testing.T) {
	clk := testclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	st, tree := oneTombstone(t, clk.Now)
	clk.Add(time.Minute)

	const forget = 24 * time.Hour
	went := clk.Now()
	p := newProofs()
	p.prove("live", 0, 0, st.Seq())
	known := []MemberState{
		{Name: "self", State: StateAlive},
		{Name: "live", State: StateAlive},
		{Name: "down", State: StateDead, Since: went},
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	newCollector := func() *tombCollector {
		return &tombCollector{st: st, log: log, self: "self", proofs: p, known: func() []MemberState { return known },
			forget: forget, minAge: time.Second}
	}

	n, err := newCollector().run(tree)
	require.NoError(t, err)
	assert.Zero(t, n, "the dead member was not shown to hold it")

	// Restarted: the dead member is no longer reported.
	known = known[:2]
	n, err = newCollector().run(tree)
	require.NoError(t, err)
	assert.Zero(t, n, "remembered across the restart")

	clk.Add(forget + time.Minute)
	c := newCollector()
	n, err = c.run(tree)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "forgotten after ForgetAfter")
	_, count := tree.root()
	assert.Zero(t, count, "the tree dropped it")
	assert.Equal(t, uint64(1), tree.collected)
	assert.NotContains(t, c.remembered, "down")
}

// oneTombstone is a store (on the wall clock now, or the real one when nil)
// holding the tombstone of one claim, and its hash tree.
func oneTombstone(t *testing.T, now func() time.Time) (*store.Store, *hashTree) {
	t.Helper()
	st, err := store.Open(store.Config{InMemory: true, NodeID: "self", GCInterval: -1, Now: now}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	obj := &types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim}, Metadata: types.ObjectMeta{Name: "gone"},
		Spec: types.MachineClaimSpec{MachineTemplate: "ubuntu", User: "alice"}}
	_, err = st.Put(obj, store.PutOptions{})
	require.NoError(t, err)
	_, err = st.Delete(types.KindMachineClaim, "gone", types.Version{})
	require.NoError(t, err)
	tree := newHashTree()
	require.NoError(t, st.Scan(func(r store.Record) error { tree.apply(&r); return nil }))
	return st, tree
}

func TestCollectorAloneKeepsTheTTL(t *testing.T) {
	st, tree := oneTombstone(t, nil)
	c := &tombCollector{st: st, log: slog.New(slog.NewTextHandler(io.Discard, nil)), self: "self", proofs: newProofs(),
		known: func() []MemberState { return []MemberState{{Name: "self", State: StateAlive}} }, forget: time.Hour, minAge: time.Nanosecond}
	n, err := c.run(tree)
	require.NoError(t, err)
	assert.Zero(t, n)
}
