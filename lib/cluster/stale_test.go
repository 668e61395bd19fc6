package cluster

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// applyRemote stores obj as if another node had written it after everything
// this node wrote: the way a duty owner's verdict, based on an older copy of
// the record, reaches the node over replication.
func (tn *testNode) applyRemote(obj types.Object, from string) {
	tn.t.Helper()
	obj.Meta().Version = types.Version{HLC: tn.st.Clock().HLC + 1<<20, Node: from}
	data, err := json.Marshal(obj)
	require.NoError(tn.t, err)
	ok, err := tn.st.Apply(store.Record{Kind: obj.GetKind(), Name: obj.Meta().Name, Version: obj.Meta().Version, Data: data})
	require.NoError(tn.t, err)
	require.True(tn.t, ok)
}

// A node falsely thought dead has its machine marked Lost by the duty owner,
// from a copy of the record older than the allocation (no resource in it).
// The node keeps its word on its own machine (it is Running again, with its
// resource) and, once the claim is deleted, still gives the resource back.
func TestStaleLostVerdictNeitherLeaksNorForgetsTheResource(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(claim("c1", "small", time.Minute))
	c := tn.waitPhase("c1", types.ClaimBound)
	m, err := store.Get[types.Machine](tn.st, types.KindMachine, c.Status.Machine)
	require.NoError(t, err)
	require.NotNil(t, m.Status.Resource)

	stale := *m
	stale.Status.Phase = types.MachineLost
	stale.Status.Reason = "node n1 is gone for 10s"
	stale.Status.Resource, stale.Status.MachineInformation, stale.Status.ConnectEndpoints = nil, nil, nil
	tn.applyRemote(&stale, "n9")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := store.Get[types.Machine](tn.st, types.KindMachine, m.Metadata.Name)
		require.NoError(c, err)
		assert.Equal(c, types.MachineRunning, got.Status.Phase)
		assert.Equal(c, m.Status.Resource, got.Status.Resource)
		assert.Equal(c, m.Status.ConnectEndpoints, got.Status.ConnectEndpoints)
	}, 5*time.Second, 5*time.Millisecond)

	// The same verdict again, and this time the claim goes before the node
	// has put the record right.
	tn.applyRemote(&stale, "n9")
	_, err = tn.st.Delete(types.KindMachineClaim, "c1", types.Version{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return len(tn.machines()) == 0 && testdriver.Held(tn.drv) == 0
	}, 5*time.Second, 5*time.Millisecond, "driver holds %d", testdriver.Held(tn.drv))
}

// A member that wrongly thought this node dead marks its Node object Down
// from an older copy (stale capacity). The node puts its own word back at
// once, not at its next heartbeat report.
func TestStaleDownVerdictIsCorrectedAtOnce(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(claim("c1", "small", time.Minute))
	tn.waitPhase("c1", types.ClaimBound)
	var fresh *types.Node
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		fresh, err = store.Get[types.Node](tn.st, types.KindNode, "n1")
		require.NoError(c, err)
		assert.Equal(c, 1.0, fresh.Spec.Drivers[0].Capacity.Used.CPU)
	}, 5*time.Second, 5*time.Millisecond)

	stale := *fresh
	stale.Spec.Drivers = []types.NodeDriver{fresh.Spec.Drivers[0]}
	stale.Spec.Drivers[0].Capacity.Used = types.Resources{}
	stale.Status.Phase = types.NodeDown
	tn.applyRemote(&stale, "n9")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := store.Get[types.Node](tn.st, types.KindNode, "n1")
		require.NoError(c, err)
		assert.Equal(c, "n1", got.Metadata.Version.Node)
		assert.Equal(c, types.NodeUp, got.Status.Phase)
		assert.Equal(c, 1.0, got.Spec.Drivers[0].Capacity.Used.CPU)
	}, time.Second, 5*time.Millisecond)
}

// A write from another node based on an older copy of a bound claim (an API
// update of its labels that raced with the binding, say) sets it back to
// Requested on this node while this node runs its machine: the node puts the
// binding back, with the same machine, instead of leaving it in limbo.
func TestStaleClaimWriteIsRebound(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(claim("c1", "small", time.Minute))
	bound := tn.waitPhase("c1", types.ClaimBound)

	stale := *bound
	stale.Status.Phase = types.ClaimRequested
	stale.Metadata.Labels = map[string]string{"team": "edu"}
	tn.applyRemote(&stale, "n9")

	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := store.Get[types.MachineClaim](tn.st, types.KindMachineClaim, "c1")
		require.NoError(c, err)
		assert.Equal(c, types.ClaimBound, got.Status.Phase)
		assert.Equal(c, bound.Status.Machine, got.Status.Machine)
		assert.Equal(c, bound.Status.Round, got.Status.Round)
		assert.Equal(c, "edu", got.Metadata.Labels["team"], "the other write's change is kept")
	}, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, 1, testdriver.Held(tn.drv))
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
	claims := []*types.MachineClaim{{Metadata: types.ObjectMeta{Name: "c3"}, Status: types.MachineClaimStatus{Machine: "m3"}}}
	got := tn.node.machineActivity(now, claims, []*types.Machine{
		mach("m1", true, seen), mach("m2", false, seen), mach("m3", false, seen), mach("m4", false, time.Time{}),
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
