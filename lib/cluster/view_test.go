package cluster

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// fakePeers is a membership whose answers the test sets.
type fakePeers struct {
	mu          sync.Mutex
	live, known []string
	answers     map[string]bool
	pings       int
}

func (p *fakePeers) Self() string { return "n0" }
func (p *fakePeers) Members() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.live)
}
func (p *fakePeers) Known() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.known)
}
func (p *fakePeers) Ping(_ context.Context, name string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pings++
	if name == "n0" || p.answers[name] {
		return nil
	}
	return errors.New("no answer")
}
func (p *fakePeers) Send(context.Context, Message) error { return errors.New("not in this test") }

// newTestView returns a view over peers and a store holding Node objects
// for nodes; reprobed receives a value each time a probe has answered.
func newTestView(t *testing.T, peers *fakePeers, nodes ...string) (*view, chan struct{}) {
	t.Helper()
	v, reprobed, _ := newTestViewStore(t, peers, nodes...)
	return v, reprobed
}

// newTestViewStore is newTestView that also returns the view's store.
func newTestViewStore(t *testing.T, peers *fakePeers, nodes ...string) (*view, chan struct{}, *store.Store) {
	t.Helper()
	st, err := store.Open(store.Config{InMemory: true, NodeID: "n0"}, testLogger())
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	for _, name := range nodes {
		_, err := st.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: name}}, store.PutOptions{Create: true})
		require.NoError(t, err)
	}
	c := newCache(st, testLogger())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); c.Wait() })
	require.NoError(t, c.Start(ctx))
	v := &view{self: "n0", peers: peers, cache: c, now: time.Now, nodeDeleted: nodeDeletedIn(st)}
	reprobed := make(chan struct{}, 16)
	v.start(ctx, func() { reprobed <- struct{}{} })
	return v, reprobed, st
}

// TestQuorumCountsMembersWithoutNodeObjects: a node that joined lately may
// not have the others' Node objects yet; the members memberlist has seen
// count as known all the same, so alone it has no majority.
func TestQuorumCountsMembersWithoutNodeObjects(t *testing.T) {
	peers := &fakePeers{live: []string{"n0"}, known: []string{"n0", "n1", "n2"}}
	v, _ := newTestView(t, peers, "n0")
	assert.False(t, v.quorum())
	peers.known = []string{"n0"}
	assert.True(t, v.quorum(), "alone in a cluster of one")
}

// TestQuorumForgetsADeletedNode: a node stopped for good and deleted
// (hf-cli node delete) no longer counts towards the majority, although
// memberlist goes on listing it as left or dead for a day: the one node
// left of two passes the verdicts on its machines. It kept them Bound to
// the deleted node for 24 h.
func TestQuorumForgetsADeletedNode(t *testing.T) {
	peers := &fakePeers{live: []string{"n0"}, known: []string{"n0", "n1"}}
	v, _, st := newTestViewStore(t, peers, "n0", "n1")
	assert.False(t, v.quorum(), "alone of two")

	rec, err := st.Get(types.KindNode, "n1")
	require.NoError(t, err)
	_, err = st.Delete(types.KindNode, "n1", rec.Version)
	require.NoError(t, err)
	require.Eventually(t, func() bool { _, ok := v.cache.Get(types.KindNode, "n1"); return !ok }, 5*time.Second, time.Millisecond)
	v.nodesChanged()
	assert.True(t, v.quorum(), "n1 is deleted: alone of one")

	// Back with its data dir, it is a member again.
	peers.mu.Lock()
	peers.live = []string{"n0", "n1"}
	peers.mu.Unlock()
	v.membersChanged()
	assert.True(t, v.quorum())
	peers.mu.Lock()
	peers.live = []string{"n0"}
	peers.known = []string{"n0", "n1", "n2"}
	peers.mu.Unlock()
	v.membersChanged()
	assert.False(t, v.quorum(), "n2 has no Node object here yet: it counts")
}

// TestQuorumProbesTheLiveMembers: while a known member is absent, the live
// ones count only once they have answered a probe started after the last
// membership change; a member on the far side of a partition that
// memberlist has not declared dead yet does not make a majority.
func TestQuorumProbesTheLiveMembers(t *testing.T) {
	peers := &fakePeers{live: []string{"n0", "n1"}, known: []string{"n0", "n1", "n2"}}
	v, reprobed := newTestView(t, peers, "n0", "n1", "n2")

	assert.False(t, v.quorum(), "no probe has answered yet")
	waitReprobe(t, reprobed)
	assert.False(t, v.quorum(), "n1 did not answer")

	peers.mu.Lock()
	peers.answers = map[string]bool{"n1": true}
	peers.mu.Unlock()
	assert.False(t, v.quorum(), "the answer stands for reachFresh")
	v.membersChanged()
	assert.False(t, v.quorum(), "a membership change makes the answer stale")
	waitReprobe(t, reprobed)
	assert.True(t, v.quorum(), "n0 and n1 answered: 2 of 3")
	peers.mu.Lock()
	pings := peers.pings
	peers.mu.Unlock()
	assert.True(t, v.quorum())
	peers.mu.Lock()
	assert.Equal(t, pings, peers.pings, "a fresh answer is not probed again")
	peers.mu.Unlock()

	// With everyone live there is no verdict to pass and nothing to probe.
	peers.mu.Lock()
	peers.live = []string{"n0", "n1", "n2"}
	peers.mu.Unlock()
	v.membersChanged()
	assert.True(t, v.quorum())
}

func waitReprobe(t *testing.T, ch chan struct{}) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatal("no probe answered")
	}
}

// TestAbsenceCountsFromAMajorityRegained: a node cut off alone sees the far
// members absent from the start; when it heals and reaches a majority with
// one of them while the other is not back yet, the time it spent cut off
// does not count towards that one's grace (the fault harness found a
// minority node passing the lost verdict on a healthy majority node the
// moment the partition healed).
func TestAbsenceCountsFromAMajorityRegained(t *testing.T) {
	peers := &fakePeers{live: []string{"n0"}, known: []string{"n0", "n1", "n2"}}
	v, reprobed := newTestView(t, peers, "n0", "n1", "n2")
	cutOff := time.Now()
	assert.False(t, v.quorum(), "alone of three")
	assert.Equal(t, cutOff, v.since(cutOff), "no majority regained yet")

	// n1 is back, n2 not yet.
	peers.mu.Lock()
	peers.live = []string{"n0", "n1"}
	peers.answers = map[string]bool{"n1": true}
	peers.mu.Unlock()
	v.membersChanged()
	assert.False(t, v.quorum(), "the live ones have not answered yet")
	waitReprobe(t, reprobed)
	assert.True(t, v.quorum())
	healed := time.Now()
	got := v.since(cutOff)
	assert.True(t, got.After(cutOff), "n2's absence counts from the majority regained, not from the cut")
	assert.False(t, got.After(healed))
	later := time.Now().Add(time.Hour)
	assert.Equal(t, later, v.since(later), "a member gone after the majority came back counts from its own absence")

	// A majority kept does not move the mark.
	v.membersChanged()
	assert.False(t, v.quorum(), "probing again")
	waitReprobe(t, reprobed)
	assert.True(t, v.quorum())
	assert.Equal(t, got, v.since(cutOff))
}
