package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

func TestClaimBindsAndReleases(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(claim("c1", "small", time.Minute))

	c := tn.waitPhase("c1", types.ClaimBound)
	assert.Equal(t, "n1", c.Status.Node)
	assert.Equal(t, "test", c.Status.Driver)
	require.NotEmpty(t, c.Status.Machine)
	bound := c.Status.PhaseTimes.At(string(types.ClaimBound))
	requested := c.Status.PhaseTimes.At(string(types.ClaimRequested))
	assert.False(t, bound.Before(requested), "bound %v before requested %v", bound, requested)

	m, err := store.Get[types.Machine](tn.st, types.KindMachine, c.Status.Machine)
	require.NoError(t, err)
	assert.Equal(t, types.MachineRunning, m.Status.Phase)
	assert.Equal(t, "c1", m.Spec.Claim)
	require.NotNil(t, m.Status.Resource)
	assert.Contains(t, string(m.Status.Resource.Data), "HF_CLAIM")
	assert.NotEmpty(t, m.Status.Addresses)
	assert.Equal(t, 1, testdriver.Held(tn.drv))

	// The Node object reports the machine's use.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		node, err := store.Get[types.Node](tn.st, types.KindNode, "n1")
		require.NoError(c, err)
		require.Len(c, node.Spec.Drivers, 1)
		assert.Equal(c, 1.0, node.Spec.Drivers[0].Capacity.Used.CPU)
		assert.Equal(c, 3.0, node.Spec.Drivers[0].Capacity.Free.CPU)
	}, 5*time.Second, 10*time.Millisecond)

	_, err = tn.st.Delete(types.KindMachineClaim, "c1", types.Version{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		return len(tn.machines()) == 0 && testdriver.Held(tn.drv) == 0
	}, 5*time.Second, 5*time.Millisecond)
}

func TestClaimWaitsForCapacityThenBinds(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 2, "ram_gb": 8}`)
	tn.put(template("one", 1, 1, `{}`))
	for _, name := range []string{"a", "b"} {
		tn.put(claim(name, "one", time.Minute))
		tn.waitPhase(name, types.ClaimBound)
	}
	tn.put(claim("c", "one", time.Minute))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := store.Get[types.MachineClaim](tn.st, types.KindMachineClaim, "c")
		require.NoError(c, err)
		assert.Equal(c, types.ClaimRequested, got.Status.Phase)
		assert.Contains(c, got.Status.Reason, "capacity")
	}, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, 2, testdriver.Held(tn.drv))

	_, err := tn.st.Delete(types.KindMachineClaim, "a", types.Version{})
	require.NoError(t, err)
	tn.waitPhase("c", types.ClaimBound)
	require.Eventually(t, func() bool { return testdriver.Held(tn.drv) == 2 }, 5*time.Second, 5*time.Millisecond)
}

func TestBindTimeoutFailsWithReason(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 2, "ram_gb": 8}`)
	tn.put(template("huge", 8, 1, `{}`))
	tn.put(claim("c", "huge", 300*time.Millisecond))
	c := tn.waitPhase("c", types.ClaimFailed)
	assert.Contains(t, c.Status.Reason, "capacity")
	assert.NotZero(t, c.Status.PhaseTimes.At(string(types.ClaimFailed)))
	assert.Empty(t, tn.machines())
}

// A claim whose allocation keeps failing fails at its bind timeout saying
// what failed where, and that it was tried again: it read "not bound within
// its bind timeout: waiting for capacity; last: allocation on n1 ...
// failed", on a node with room.
func TestAllocationFailureFailsAtDeadline(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 2, "ram_gb": 8}`)
	tn.put(template("broken", 1, 1, `{"fail": true}`))
	// Long enough for a few tries (backing off 100 ms, 200 ms, 400 ms).
	tn.put(claim("c", "broken", 1500*time.Millisecond))
	c := tn.waitPhase("c", types.ClaimFailed)
	assert.Contains(t, c.Status.Reason, "not bound within its bind timeout: every node that fits (n1) was tried; last: node n1 gave round ")
	assert.Contains(t, c.Status.Reason, `allocation on n1 (driver test) failed, `)
	assert.Contains(t, c.Status.Reason, ` times for this claim: allocate: template "broken" asks to fail`)
	assert.NotContains(t, c.Status.Reason, "waiting for capacity")
	require.Eventually(t, func() bool { return len(tn.machines()) == 0 }, 5*time.Second, 5*time.Millisecond)
	assert.Equal(t, 0, testdriver.Held(tn.drv))
}

// A deleted claim's count of failed allocations goes with it: it was kept
// for good, one map entry per claim that ever failed on the node.
func TestDeletedClaimForgetsItsFailures(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 2, "ram_gb": 8}`)
	tn.put(template("broken", 1, 1, `{"fail": true}`))
	tn.put(claim("c", "broken", time.Minute))
	acc := tn.node.acc
	failures := func() int {
		acc.mu.Lock()
		defer acc.mu.Unlock()
		return acc.failures["c"]
	}
	require.Eventually(t, func() bool { return failures() > 0 }, 10*time.Second, 5*time.Millisecond, "an allocation failed")
	_, err := tn.st.Delete(types.KindMachineClaim, "c", types.Version{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		acc.mu.Lock()
		defer acc.mu.Unlock()
		_, ok := acc.failures["c"]
		return !ok
	}, 10*time.Second, 5*time.Millisecond, "the count outlived its claim")
	require.Eventually(t, func() bool { return len(tn.machines()) == 0 }, 10*time.Second, 5*time.Millisecond)
}

// A claim whose allocations keep failing says why while it is offered again:
// an acceptance of a later round keeps why the round before was given back.
// Its reason was empty between the give-back and its failure at the bind
// timeout, so `hf-cli claim create --wait` showed only "Requested".
func TestAllocationFailureShowsWhyWhileRetried(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 2, "ram_gb": 8}`)
	tn.put(template("broken", 1, 1, `{"fail": true}`))
	tn.put(claim("c", "broken", time.Minute))
	var seen *types.MachineClaim
	require.Eventually(t, func() bool {
		c := tn.claim("c")
		if c.Status.Round > 1 && c.Status.Election != nil && c.Status.Election.Round == c.Status.Round && c.Status.Node != "" {
			seen = c
			return true
		}
		return false
	}, 20*time.Second, time.Millisecond, "a later round accepted")
	assert.Equal(t, types.ClaimRequested, seen.Status.Phase)
	assert.Contains(t, seen.Status.Reason, fmt.Sprintf("node n1 gave round %d back", seen.Status.Round-1))
	assert.Contains(t, seen.Status.Reason, "fail")
}

func TestMissingTemplateWaitsThenBinds(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 2, "ram_gb": 8}`)
	tn.put(claim("c", "later", time.Minute))
	require.Never(t, func() bool { return tn.claim("c").Status.Phase != types.ClaimRequested }, 100*time.Millisecond, 10*time.Millisecond)
	// It says why it waits (it said "no driver serves template later: it
	// names nothing").
	require.Eventually(t, func() bool {
		return tn.claim("c").Status.Reason == "machine template later does not exist: the claim waits for it to be created, until its bind timeout"
	}, 5*time.Second, 5*time.Millisecond, "reason: %q", tn.claim("c").Status.Reason)
	tn.put(template("later", 1, 1, `{}`))
	tn.waitPhase("c", types.ClaimBound)
}

// A claim for an environment that does not exist (here, yet) waits, saying
// so, rather than binding without the environment's caps and node selector;
// it binds once the environment is created.
func TestMissingEnvironmentWaitsThenBinds(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 2, "ram_gb": 8}`)
	tn.put(template("small", 1, 1, `{}`))
	c := claim("c", "small", time.Minute)
	c.Spec.Environment = "lab"
	tn.put(c)
	require.Eventually(t, func() bool {
		return tn.claim("c").Status.Reason == "environment lab does not exist: the claim waits for it to be created, until its bind timeout"
	}, 5*time.Second, 5*time.Millisecond, "reason: %q", tn.claim("c").Status.Reason)
	assert.Equal(t, types.ClaimRequested, tn.claim("c").Status.Phase, "it did not bind without its environment")
	assert.Empty(t, tn.machines())
	// One that is never created fails the claim at its bind timeout, saying why.
	gone := claim("gone", "small", 300*time.Millisecond)
	gone.Spec.Environment = "nowhere"
	tn.put(gone)
	assert.Contains(t, tn.waitPhase("gone", types.ClaimFailed).Status.Reason, "environment nowhere does not exist")

	tn.put(&types.Environment{TypeMeta: types.TypeMeta{Kind: types.KindEnvironment}, Metadata: types.ObjectMeta{Name: "lab"},
		Spec: types.EnvironmentSpec{Provider: "test"}})
	tn.waitPhase("c", types.ClaimBound)
}

func TestRestartKeepsMachinesAndReconcilesLostOnes(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(claim("keep", "small", time.Minute))
	tn.put(claim("lose", "small", time.Minute))
	keep := tn.waitPhase("keep", types.ClaimBound)
	lose := tn.waitPhase("lose", types.ClaimBound)
	tn.stop()

	// While the node is down its driver loses one machine and gains one that
	// no machine record knows.
	drv := testdriver.New(driversEnv(tn))
	require.NoError(t, drv.Prepare(context.Background(), []byte(tn.driver)))
	st, err := store.Open(store.Config{Dir: tn.dir + "/store", NodeID: "n1"}, testLogger())
	require.NoError(t, err)
	lm, err := store.Get[types.Machine](st, types.KindMachine, lose.Status.Machine)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, drv.Deallocate(context.Background(), lm.Status.Resource))
	_, err = drv.Allocate(context.Background(), *template("small", 1, 1, `{}`), nil)
	require.NoError(t, err)
	require.Equal(t, 2, testdriver.Held(drv))

	tn.start()
	// The kept machine is adopted as it was.
	assert.Equal(t, keep.Status.Machine, tn.claim("keep").Status.Machine)
	assert.Equal(t, types.ClaimBound, tn.claim("keep").Status.Phase)
	// The lost one is reported in its claim's binding, its record dropped,
	// and the claim is bound again to a new machine.
	_, err = store.Get[types.Machine](tn.st, types.KindMachine, lose.Status.Machine)
	assert.ErrorIs(t, err, store.ErrNotFound)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := store.Get[types.MachineClaim](tn.st, types.KindMachineClaim, "lose")
		require.NoError(c, err)
		assert.Equal(c, types.ClaimBound, got.Status.Phase)
		assert.NotEqual(c, lose.Status.Machine, got.Status.Machine)
	}, 5*time.Second, 5*time.Millisecond)
	// The unknown resource was released: the driver holds exactly the two claims' machines.
	assert.Eventually(t, func() bool { return testdriver.Held(tn.drv) == 2 }, 5*time.Second, 5*time.Millisecond)
}

// A node started again without a driver instance it had (its config
// changed) cannot ask that driver about its machines, let alone release
// them: they are lost, and the reason says that the driver is gone from
// the node and their resources were left as they were, not that the
// driver lost them.
func TestRestartWithoutItsDriverSaysSo(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	fragile := template("fragile", 1, 1, `{}`)
	fragile.Spec.OnNodeLoss = types.LostFail
	tn.put(fragile)
	tn.put(claim("c", "fragile", time.Minute))
	first := tn.waitPhase("c", types.ClaimBound)
	m, err := store.Get[types.Machine](tn.st, types.KindMachine, first.Status.Machine)
	require.NoError(t, err)
	require.NotNil(t, m.Status.Resource)
	tn.stop()

	tn.instance = "other"
	tn.start()
	reason := tn.waitPhase("c", types.ClaimFailed).Status.Reason
	assert.Contains(t, reason, "node n1 no longer has driver test")
	assert.Contains(t, reason, "resource "+m.Status.Resource.ID+" was left as it was")
	assert.NotContains(t, reason, "no longer holds it")
	// Nothing could release the old instance's machine.
	old := testdriver.New(drivers.Env{Instance: "test", DataDir: filepath.Join(tn.dir, "test"), NodeName: "n1", Log: testLogger()})
	require.NoError(t, old.Prepare(context.Background(), []byte(tn.driver)))
	held, err := old.List(context.Background())
	require.NoError(t, err)
	require.Len(t, held, 1)
	assert.Equal(t, m.Status.Resource.ID, held[0].ID)
}

// A machine whose record is deleted (DELETE /api/v1/machines/NAME, or the
// sweep of a lost machine while its node was cut off) is released by its
// node: a claimed one's claim is bound again to another machine, and a
// warm one is made again by its set. The node kept the resource, and the
// claim stayed Bound to a machine without a record.
func TestDeletedMachineRecordIsReleased(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(&types.MachineSet{TypeMeta: types.TypeMeta{Kind: types.KindMachineSet}, Metadata: types.ObjectMeta{Name: "pool"},
		Spec: types.MachineSetSpec{AvailabilityConfiguration: types.AvailabilityConfiguration{Availability: types.AvailabilityPool},
			ProvisioningStrategy: types.ProvisionAutoScale, MinAvailable: 1, MaxProvisioned: 1, MachineTemplate: "small"}})
	var warm *types.Machine
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, m := range tn.machines() {
			if m.Spec.MachineSet == "pool" && m.Status.Phase == types.MachineRunning {
				warm = m
			}
		}
		assert.NotNil(c, warm)
	}, 5*time.Second, 5*time.Millisecond)
	tn.put(template("other", 1, 1, `{}`))
	tn.put(claim("c", "other", time.Minute))
	first := tn.waitPhase("c", types.ClaimBound)
	m, err := store.Get[types.Machine](tn.st, types.KindMachine, first.Status.Machine)
	require.NoError(t, err)
	require.Equal(t, 2, testdriver.Held(tn.drv))

	for _, gone := range []*types.Machine{m, warm} {
		_, err := tn.st.Delete(types.KindMachine, gone.Metadata.Name, types.Version{})
		require.NoError(t, err)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := store.Get[types.MachineClaim](tn.st, types.KindMachineClaim, "c")
		require.NoError(c, err)
		assert.Equal(c, types.ClaimBound, got.Status.Phase)
		assert.NotEqual(c, first.Status.Machine, got.Status.Machine, "bound again")
		held, err := tn.drv.List(context.Background())
		require.NoError(c, err)
		ids := map[string]bool{}
		for _, r := range held {
			ids[r.ID] = true
		}
		assert.Len(c, held, 2, "the claim's new machine and the set's new warm one")
		assert.False(c, ids[m.Status.Resource.ID], "the claim's first machine is released")
		assert.False(c, ids[warm.Status.Resource.ID], "the deleted warm machine is released")
	}, 10*time.Second, 10*time.Millisecond)
}

// A claim bound longer than its bind timeout whose machine goes from its
// node behind the claim's back (its record deleted, say) is bound again as
// when a machine dies: its binding is Lost and its bind timeout counts from
// the hand-back. It was given back as an unbound round and failed at once,
// "not bound within its bind timeout".
func TestBoundClaimWhoseMachineIsGoneIsBoundAgain(t *testing.T) {
	tn, clk, _ := clockedNode(t, `{"cpus": 4, "ram_gb": 8}`, nil)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(claim("c", "small", time.Minute))
	first := tn.waitPhase("c", types.ClaimBound)
	clk.Add(time.Hour)

	_, err := tn.st.Delete(types.KindMachine, first.Status.Machine, types.Version{})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := store.Get[types.MachineClaim](tn.st, types.KindMachineClaim, "c")
		require.NoError(c, err)
		require.NotEqual(c, types.ClaimFailed, got.Status.Phase, got.Status.Reason)
		assert.Equal(c, types.ClaimBound, got.Status.Phase)
		assert.NotEqual(c, first.Status.Machine, got.Status.Machine, "bound again")
		if assert.NotNil(c, got.Status.Election) {
			assert.Equal(c, 1, got.Status.Election.Rebinds)
		}
	}, 10*time.Second, 10*time.Millisecond)
}

func TestDeadMachineIsReportedAndRebound(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(claim("c", "small", time.Minute))
	first := tn.waitPhase("c", types.ClaimBound)
	m, err := store.Get[types.Machine](tn.st, types.KindMachine, first.Status.Machine)
	require.NoError(t, err)
	// The machine dies behind the node's back.
	require.NoError(t, tn.drv.Deallocate(context.Background(), m.Status.Resource))
	tn.node.acc.checkHealth(context.Background(), tn.node.acc.appendAll(nil))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := store.Get[types.MachineClaim](tn.st, types.KindMachineClaim, "c")
		require.NoError(c, err)
		assert.Equal(c, types.ClaimBound, got.Status.Phase)
		assert.NotEqual(c, first.Status.Machine, got.Status.Machine)
	}, 5*time.Second, 5*time.Millisecond)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := store.Get[types.Machine](tn.st, types.KindMachine, first.Status.Machine)
		assert.ErrorIs(c, err, store.ErrNotFound, "the dead machine's record is gone")
	}, 5*time.Second, 5*time.Millisecond)
	assert.Eventually(t, func() bool { return testdriver.Held(tn.drv) == 1 }, 5*time.Second, 5*time.Millisecond)
}

// The health loop goes through a ledger of more machines than it copies at a
// time, and finds the dead one wherever it is.
func TestHealthLoopCoversEveryBatch(t *testing.T) {
	tn := &testNode{t: t, name: "n1", dir: t.TempDir(), driver: `{"cpus": 1000, "ram_gb": 1000}`,
		config: func(c *Config) { c.StatusInterval = 50 * time.Millisecond }}
	tn.start()
	t.Cleanup(tn.stop)
	tn.put(template("small", 1, 1, `{}`))
	n := 2*healthBatch + 10
	for i := range n {
		tn.put(claim(fmt.Sprintf("c%03d", i), "small", time.Minute))
	}
	bound := map[string]string{}
	for i := range n {
		name := fmt.Sprintf("c%03d", i)
		bound[name] = tn.waitPhase(name, types.ClaimBound).Status.Machine
	}
	for _, name := range []string{"c000", fmt.Sprintf("c%03d", n-1)} {
		m, err := store.Get[types.Machine](tn.st, types.KindMachine, bound[name])
		require.NoError(t, err)
		require.NoError(t, tn.drv.Deallocate(context.Background(), m.Status.Resource))
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, name := range []string{"c000", fmt.Sprintf("c%03d", n-1)} {
			got, err := store.Get[types.MachineClaim](tn.st, types.KindMachineClaim, name)
			require.NoError(c, err)
			assert.Equal(c, types.ClaimBound, got.Status.Phase)
			assert.NotEqual(c, bound[name], got.Status.Machine, "%s bound again", name)
		}
	}, 10*time.Second, 10*time.Millisecond)
	assert.Eventually(t, func() bool { return testdriver.Held(tn.drv) == n }, 5*time.Second, 5*time.Millisecond)
}

// A claim whose machine keeps dying (an entry that exits at once) is bound
// again at most MaxRebinds times, then fails saying why; it is not re-bound
// for ever (security issue, item 8).
func TestRebindsAreCapped(t *testing.T) {
	tn := &testNode{t: t, name: "n1", dir: t.TempDir(), driver: `{"cpus": 4, "ram_gb": 8}`, config: func(c *Config) { c.MaxRebinds = 2 }}
	tn.start()
	t.Cleanup(tn.stop)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(claim("c", "small", time.Minute))
	var machines []string
	for kill := 0; kill < 3; kill++ {
		var got *types.MachineClaim
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			var err error
			got, err = store.Get[types.MachineClaim](tn.st, types.KindMachineClaim, "c")
			require.NoError(c, err)
			require.Equal(c, types.ClaimBound, got.Status.Phase)
			assert.NotContains(c, machines, got.Status.Machine)
		}, 10*time.Second, 5*time.Millisecond)
		machines = append(machines, got.Status.Machine)
		m, err := store.Get[types.Machine](tn.st, types.KindMachine, got.Status.Machine)
		require.NoError(t, err)
		// The machine dies behind the node's back.
		require.NoError(t, tn.drv.Deallocate(context.Background(), m.Status.Resource))
		tn.node.acc.checkHealth(context.Background(), tn.node.acc.appendAll(nil))
	}
	c := tn.waitPhase("c", types.ClaimFailed)
	assert.Contains(t, c.Status.Reason, "bound again 2 times after its machine died, hf gives up (scheduler.max_rebinds)")
	assert.Contains(t, c.Status.Reason, "driver test no longer holds it", "and what happened to the machine")
	assert.Eventually(t, func() bool { return testdriver.Held(tn.drv) == 0 }, 5*time.Second, 5*time.Millisecond)
}
