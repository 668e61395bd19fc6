package cluster

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/internal/intern"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// TestUsageFollowsTheLedger checks the usage and the index of machines by
// claim, kept as entries change, against the ledger itself, after each of many random puts, updates and
// removals (through the acceptor's own functions), and across compactions.
func TestUsageFollowsTheLedger(t *testing.T) {
	st, err := store.Open(store.Config{InMemory: true, NodeID: "n0"}, testLogger())
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	drv := testdriver.New(drivers.Env{Instance: "test", NodeName: "n0"})
	require.NoError(t, drv.Prepare(t.Context(), nil))
	n, err := New(Config{Name: "n0"}, testLogger(), st, []Instance{{Name: "test", Type: "test", Driver: drv}}, nil)
	require.NoError(t, err)
	a := n.acc
	rng := rand.New(rand.NewPCG(1, 2))
	instances := []string{"a", "b"}
	phases := []types.MachinePhase{types.MachinePending, types.MachineProvisioning, types.MachineRunning, types.MachineTerminating}
	for i := range 5000 {
		name := fmt.Sprintf("m%d", rng.IntN(50))
		switch rng.IntN(4) {
		case 0, 1:
			e := &entry{Machine: name, Claim: fmt.Sprintf("c%d", rng.IntN(5)), Driver: instances[rng.IntN(2)],
				Phase: phases[rng.IntN(len(phases))], Res: types.Resources{CPU: float64(rng.IntN(4)) / 2, RAMGB: float64(rng.IntN(8))},
				Resource: &types.Resource{ID: name, Info: map[string]string{"host": "n0"}, Endpoints: []types.Endpoint{{Protocol: "test", Address: name}}}}
			if cur, ok := a.get(name); ok && rng.IntN(2) == 0 {
				cur.Phase = e.Phase // a copy of a held entry, put again
				e = &cur
			}
			a.mu.Lock()
			a.putLocked(e)
			a.mu.Unlock()
		case 2:
			a.update(name, func(e *entry) {
				e.Phase = phases[rng.IntN(len(phases))]
				e.Claim = fmt.Sprintf("c%d", rng.IntN(5))
			})
		case 3:
			a.remove(name)
		}
		if i%97 == 0 {
			// Compaction copies the entries afresh: the ledger, its
			// counts and its index stay as they were.
			// (The resources' Info is kept apart: compare them whole.)
			whole := func(e *entry) entry {
				c := *e
				c.Resource, c.info = e.whole(), nil
				return c
			}
			before := map[string]entry{}
			a.mu.Lock()
			for m, e := range a.entries {
				before[m] = whole(e)
			}
			a.mu.Unlock()
			a.compact(intern.New())
			a.mu.Lock()
			require.Len(t, a.entries, len(before), "step %d", i)
			for m, e := range a.entries {
				require.Equal(t, before[m], whole(e), "step %d machine %s", i, m)
				if e.Resource != nil {
					require.True(t, e.Resource != before[m].Resource, "step %d: the resource is copied", i)
					require.Nil(t, e.Resource.Info, "step %d: its Info is kept apart", i)
				}
			}
			a.mu.Unlock()
		}
		a.mu.Lock()
		for _, d := range instances {
			var used, reserved types.Resources
			count := 0
			for _, e := range a.entries {
				if e.Driver != d {
					continue
				}
				count++
				if e.Phase == types.MachineRunning {
					used = used.Add(e.Res)
				} else {
					reserved = reserved.Add(e.Res)
				}
			}
			gu, gr, gc := a.usageLocked(d)
			if !assert.Equal(t, count, gc, "step %d driver %s count", i, d) ||
				!assert.InDelta(t, used.CPU, gu.CPU, 1e-9, "step %d used cpu", i) ||
				!assert.InDelta(t, used.RAMGB, gu.RAMGB, 1e-9, "step %d used ram", i) ||
				!assert.InDelta(t, reserved.CPU, gr.CPU, 1e-9, "step %d reserved cpu", i) ||
				!assert.InDelta(t, reserved.RAMGB, gr.RAMGB, 1e-9, "step %d reserved ram", i) {
				a.mu.Unlock()
				return
			}
		}
		// The index of machines by claim holds each entry once, under its claim.
		byClaim := map[string][]string{}
		for _, e := range a.entries {
			byClaim[e.Claim] = append(byClaim[e.Claim], e.Machine)
		}
		if !assert.Len(t, a.byClaim, len(byClaim), "step %d claims", i) {
			a.mu.Unlock()
			return
		}
		for c, ms := range byClaim {
			if !assert.ElementsMatch(t, ms, a.byClaim[c], "step %d claim %s", i, c) {
				a.mu.Unlock()
				return
			}
		}
		a.mu.Unlock()
	}
}

// Once a running machine's record reaches the cache, the ledger holds the
// record's resource, not a second copy of the driver's; releasing the
// machine still releases the driver's resource.
func TestLedgerSharesTheRecordsResource(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(claim("c1", "small", time.Minute))
	tn.waitPhase("c1", types.ClaimBound)
	var name string
	require.Eventually(t, func() bool {
		ms := tn.machines()
		if len(ms) != 1 || ms[0].Status.Resource == nil {
			return false
		}
		name = ms[0].Metadata.Name
		m, _ := tn.node.machine(name)
		e, ok := tn.node.acc.get(name)
		return ok && e.Resource == m.Status.Resource
	}, 5*time.Second, 5*time.Millisecond, "the ledger still holds its own copy of the resource")
	_, err := tn.st.Delete(types.KindMachineClaim, "c1", types.Version{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, held := tn.node.acc.get(name)
		return !held && testdriver.Held(tn.drv) == 0
	}, 5*time.Second, 5*time.Millisecond, "the driver's resource was not released")
}
