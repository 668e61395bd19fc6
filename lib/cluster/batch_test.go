package cluster

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/wire"
	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// batchNode is a node that is not started, with a template and n Requested
// claims: the tests drive its reconcilers' functions themselves.
func batchNode(t *testing.T, n int) (*Node, *store.Store, []string) {
	t.Helper()
	st, err := store.Open(store.Config{InMemory: true, NodeID: "n0"}, testLogger())
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	drv := testdriver.New(drivers.Env{Instance: "test", NodeName: "n0"})
	require.NoError(t, drv.Prepare(t.Context(), []byte(`{"cpus": 1000, "ram_gb": 1000}`)))
	node, err := New(Config{Name: "n0"}, testLogger(), st, []Instance{{Name: "test", Type: "test", Driver: drv}}, nil)
	require.NoError(t, err)
	node.ctx = t.Context() // (Start would set it)
	_, err = st.Put(template("small", 1, 1, `{}`), store.PutOptions{Create: true})
	require.NoError(t, err)
	var claims []string
	for i := range n {
		c := claim(fmt.Sprintf("c%02d", i), "small", time.Minute)
		_, err := st.Put(c, store.PutOptions{Create: true})
		require.NoError(t, err)
		claims = append(claims, c.Metadata.Name)
	}
	return node, st, claims
}

// The offers of one inbox batch are reserved side by side: each claim gets
// one reservation (a repeated offer finds it and is accepted again), stored
// before its accept goes out and no longer busy after, and the batch's
// reservations share commits instead of taking one each.
func TestOffersOfABatchShareCommits(t *testing.T) {
	node, st, claims := batchNode(t, 32)
	a := node.acc
	var batch []Message
	for _, c := range claims {
		batch = append(batch, Message{Type: wire.MsgOffer, From: "n0", To: "n0", Claim: c, Node: "n0", Driver: "test", Round: 1})
	}
	batch = append(batch, batch[0]) // repeated
	commits := st.Commits()
	a.handleInbox(batch)
	used := st.Commits() - commits

	answers := node.el.answers.Drain()
	require.Len(t, answers, len(batch))
	for _, m := range answers {
		assert.Equal(t, wire.MsgAccept, m.Type, "claim %s: %s", m.Claim, m.Reason)
	}
	for _, c := range claims {
		held := a.ofClaim(c)
		require.Len(t, held, 1, "claim %s: one reservation", c)
		assert.False(t, held[0].Busy, "claim %s: stored, so no longer busy", c)
		m, err := store.Get[types.Machine](st, types.KindMachine, held[0].Machine)
		require.NoError(t, err, "claim %s: its reservation is stored", c)
		assert.Equal(t, c, m.Spec.Claim)
		assert.Equal(t, types.MachinePending, m.Status.Phase)
	}
	capa, count := a.capacityOf(node.instances["test"])
	assert.Equal(t, len(claims), count)
	assert.InDelta(t, float64(len(claims)), capa.Reserved.CPU, 1e-9, "each claim's size reserved once")
	assert.Less(t, used, uint64(len(claims)), "the batch's %d reservations share commits", len(claims))
	t.Logf("%d reservations in %d commits", len(claims), used)
}

// The acceptances one handle records are written together at its end; a
// write the elector makes after one (a failure) flushes it first, so a
// claim's election facets land in the order the elector decided them.
func TestAcceptancesAreWrittenTogetherInOrder(t *testing.T) {
	node, st, claims := batchNode(t, 32)
	el := node.el
	var actions []scheduler.Action
	for _, c := range claims {
		actions = append(actions, scheduler.RecordAccepted{Claim: c, Node: "n0", Driver: "test", Round: 1})
	}
	commits := st.Commits()
	el.execute(actions)
	el.flushAccepted()
	used := st.Commits() - commits
	for _, c := range claims {
		got, err := store.Get[types.MachineClaim](st, types.KindMachineClaim, c)
		require.NoError(t, err)
		require.NotNil(t, got.Status.Election, "claim %s", c)
		assert.Equal(t, types.ClaimElection{Round: 1, Node: "n0", Driver: "test", At: got.Status.Election.At}, *got.Status.Election)
	}
	assert.Less(t, used, uint64(len(claims)), "%d acceptances share commits", len(claims))
	t.Logf("%d acceptances in %d commits", len(claims), used)

	// Accepted at round 2, then failed, in one handle: the failure is last.
	el.execute([]scheduler.Action{
		scheduler.RecordAccepted{Claim: claims[0], Node: "n0", Driver: "test", Round: 2},
		scheduler.Fail{Claim: claims[0], Reason: "no node can take it"},
	})
	el.flushAccepted()
	got, err := store.Get[types.MachineClaim](st, types.KindMachineClaim, claims[0])
	require.NoError(t, err)
	assert.Equal(t, types.ClaimFailed, got.Status.Phase)
	assert.Equal(t, uint64(2), got.Status.Election.Round, "failed at the round accepted just before")
	assert.Contains(t, got.Status.Reason, "no node can take it")
}

// byKey keeps each key's items in order and runs the keys side by side.
func TestByKeyKeepsEachKeysOrder(t *testing.T) {
	type item struct {
		key string
		i   int
	}
	var items []item
	want := map[string][]int{}
	for i := range 300 {
		k := fmt.Sprintf("k%d", i%7)
		items = append(items, item{k, i})
		want[k] = append(want[k], i)
	}
	var mu sync.Mutex
	seen := map[string][]int{}
	running, most := 0, 0
	byKey(func(f func()) { go f() }, items, func(it item) string { return it.key }, func(it item) {
		mu.Lock()
		seen[it.key] = append(seen[it.key], it.i)
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		running--
		mu.Unlock()
	})
	assert.Equal(t, want, seen, "every item once, each key's in order")
	assert.Greater(t, most, 1, "keys side by side")
}
