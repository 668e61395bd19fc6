package cluster

import (
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// applyRemote stores the facet of obj as if another node had written it
// after everything this node wrote: the way another node's word (a verdict,
// an update from an older copy) reaches this node over replication.
func (tn *testNode) applyRemote(obj types.Object, facet, from string) {
	tn.t.Helper()
	v := types.Version{HLC: tn.st.Clock().HLC + 1<<20, Node: from}
	for _, f := range obj.Facets() {
		if f.Name != facet {
			continue
		}
		data, err := json.Marshal(f.Value)
		require.NoError(tn.t, err)
		ok, err := tn.st.Apply(store.Record{Kind: obj.GetKind(), Name: obj.Meta().Name, Version: v,
			Facets: []store.FacetRecord{{Name: facet, Epoch: f.Epoch, Version: v, Data: data}}})
		require.NoError(tn.t, err)
		require.True(tn.t, ok)
		return
	}
	tn.t.Fatalf("%s has no facet %s", obj.GetKind(), facet)
}

// lostVerdict stores a lost verdict on m as n9, a majority's member that
// could not see this node, would pass it.
func (tn *testNode) lostVerdict(m *types.Machine) {
	tn.t.Helper()
	verdict := *m
	verdict.Status.Lost = &types.MachineVerdict{Reason: "node n1 is gone for 30s", By: "n9", Owner: m.Metadata.Facets.Get(types.FacetOwner), Was: m.Status.Phase}
	tn.applyRemote(&verdict, types.FacetLost, "n9")
}

// A lost verdict on a machine of this node (passed by a majority that could
// not see this node) re-binds its claim elsewhere in a later round; the
// machine the verdict was about is released, and nothing leaks.
func TestLostVerdictRebindsAndLeaksNothing(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(claim("c1", "small", time.Minute))
	c := tn.waitPhase("c1", types.ClaimBound)
	m, err := store.Get[types.Machine](tn.st, types.KindMachine, c.Status.Machine)
	require.NoError(t, err)

	tn.lostVerdict(m)

	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got, err := store.Get[types.MachineClaim](tn.st, types.KindMachineClaim, "c1")
		require.NoError(ct, err)
		assert.Equal(ct, types.ClaimBound, got.Status.Phase)
		assert.NotEqual(ct, m.Metadata.Name, got.Status.Machine)
		assert.Greater(ct, got.Status.Round, c.Status.Round)
		assert.Len(ct, tn.machines(), 1)
		assert.Equal(ct, 1, testdriver.Held(tn.drv))
	}, 5*time.Second, 5*time.Millisecond)

	_, err = tn.st.Delete(types.KindMachineClaim, "c1", types.Version{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return len(tn.machines()) == 0 && testdriver.Held(tn.drv) == 0
	}, 5*time.Second, 5*time.Millisecond, "driver holds %d", testdriver.Held(tn.drv))
}

// A claim bound for longer than its bind timeout whose machine is then lost
// is bound again: the timeout counts from the hand-back, not from the
// claim's creation (it failed "not bound within its bind timeout" at once,
// so onNodeLoss Rebind did nothing for a claim older than 5 minutes).
func TestLostLongBoundClaimRebinds(t *testing.T) {
	var skew atomic.Int64 // how far the node's clock is ahead of the wall's
	tn := &testNode{t: t, name: "n1", dir: t.TempDir(), driver: `{"cpus": 4, "ram_gb": 8}`,
		config: func(c *Config) { c.Now = func() time.Time { return time.Now().Add(time.Duration(skew.Load())) } }}
	tn.start()
	t.Cleanup(tn.stop)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(claim("c1", "small", time.Minute))
	c := tn.waitPhase("c1", types.ClaimBound)
	m, err := store.Get[types.Machine](tn.st, types.KindMachine, c.Status.Machine)
	require.NoError(t, err)

	skew.Store(int64(time.Hour)) // the claim has been bound for an hour
	tn.lostVerdict(m)

	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got, err := store.Get[types.MachineClaim](tn.st, types.KindMachineClaim, "c1")
		require.NoError(ct, err)
		require.NotEqual(ct, types.ClaimFailed, got.Status.Phase, got.Status.Reason)
		assert.Equal(ct, types.ClaimBound, got.Status.Phase)
		assert.NotEqual(ct, m.Metadata.Name, got.Status.Machine)
		if assert.NotNil(ct, got.Status.Election) {
			assert.Equal(ct, 1, got.Status.Election.Rebinds)
			assert.False(ct, got.Status.Election.RebindAt.Before(c.Metadata.CreatedAt.Add(time.Hour)), "handed back at the node's time")
		}
	}, 5*time.Second, 5*time.Millisecond)
}

// An update of a bound claim's labels written elsewhere from a copy older
// than the binding changes the spec facet only: the binding stays.
func TestSpecWriteFromAnOlderCopyKeepsTheBinding(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	tn.put(template("small", 1, 1, `{}`))
	stale := claim("c1", "small", time.Minute)
	tn.put(stale)
	bound := tn.waitPhase("c1", types.ClaimBound)

	stale.Metadata.Labels = map[string]string{"team": "edu"}
	stale.Metadata.CreatedAt = bound.Metadata.CreatedAt
	tn.applyRemote(stale, types.FacetSpec, "n9")

	got := tn.claim("c1")
	assert.Equal(t, types.ClaimBound, got.Status.Phase)
	assert.Equal(t, bound.Status.Machine, got.Status.Machine)
	assert.Equal(t, bound.Status.Round, got.Status.Round)
	assert.Equal(t, "edu", got.Metadata.Labels["team"], "the other write's change is kept")
	assert.Never(t, func() bool { return testdriver.Held(tn.drv) != 1 }, 200*time.Millisecond, 10*time.Millisecond)
}

// Idle reaping sees a paused machine as in use, the later of a driver's
// report and a session keepalive otherwise.
func TestMachineActivity(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	seen := now.Add(-time.Hour)
	mach := func(name string, paused bool, last time.Time) *types.Machine {
		return &types.Machine{Metadata: types.ObjectMeta{Name: name}, Status: types.MachineStatus{Paused: paused, LastActivity: last}}
	}
	s := &types.Session{TypeMeta: types.TypeMeta{Kind: types.KindSession},
		// Created before its keepalive, on the test's clock (left zero, the
		// store would stamp the day the test runs).
		Metadata: types.ObjectMeta{Name: "s1", CreatedAt: now.Add(-2 * time.Hour),
			Annotations: map[string]string{types.AnnotationKeepalive: now.Add(-time.Minute).Format(time.RFC3339Nano)}},
		Spec: types.SessionSpec{User: "alice"}, Status: types.SessionStatus{MachineClaim: "c3"}}
	tn.put(s)
	require.Eventually(t, func() bool { return tn.node.cache.Count(idxSessionClaim, "c3") == 1 }, 5*time.Second, 5*time.Millisecond)
	claimed := mach("m3", false, seen)
	claimed.Spec.Claim = "c3"
	got := tn.node.duties.activity(now, []*types.Machine{
		mach("m1", true, seen), mach("m2", false, seen), claimed, mach("m4", false, time.Time{}),
	})
	assert.Equal(t, map[string]time.Time{"m1": now, "m2": seen, "m3": now.Add(-time.Minute)}, got)
}

// A claim that requires machine sets waits when there is none at all (it used
// to be elected directly), says why, and fails at its bind timeout.
func TestRequiredSetsWithoutAnySetWait(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	tn.put(template("small", 1, 1, `{}`))
	c := claim("c1", "small", 1500*time.Millisecond)
	c.Spec.BindStrategy = types.BindRequireMachineSets
	c.Spec.MachineSets = []string{"pool"}
	tn.put(c)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		got := tn.claim("c1")
		assert.Equal(ct, types.ClaimRequested, got.Status.Phase)
		assert.Contains(ct, got.Status.Reason, "machine set pool does not exist")
	}, 5*time.Second, 10*time.Millisecond)
	got := tn.waitPhase("c1", types.ClaimFailed)
	assert.Contains(t, got.Status.Reason, "bind timeout")
	assert.Contains(t, got.Status.Reason, "machine set pool does not exist")
	assert.Empty(t, tn.machines())
	assert.Equal(t, 0, testdriver.Held(tn.drv))
}
