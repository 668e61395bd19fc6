package clustertest

import (
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

func waitClaim(t *testing.T, h *Host, name string, want types.ClaimPhase) *types.MachineClaim {
	t.Helper()
	var got *types.MachineClaim
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		got, err = store.Get[types.MachineClaim](h.Store, types.KindMachineClaim, name)
		if !assert.NoError(c, err) {
			return
		}
		assert.Equal(c, want, got.Status.Phase, "claim %s on %s: %q", name, h.Name, got.Status.Reason)
	}, 15*time.Second, 10*time.Millisecond, "claim %s on %s: %s", name, h.Name, describeClaim(h, name))
	return got
}

// describeClaim shows a claim's facets as h has them, for failure messages.
func describeClaim(h *Host, name string) string {
	c, err := store.Get[types.MachineClaim](h.Store, types.KindMachineClaim, name)
	if err != nil {
		return err.Error()
	}
	b, _ := json.Marshal(c.Status)
	out := string(b) + " facets " + fmt.Sprint(c.Metadata.Facets)
	_ = h.Store.Scan(func(r store.Record) error {
		if r.Kind == types.KindMachineClaim && r.Name == name {
			for _, f := range r.Facets {
				out += fmt.Sprintf("\n  %s epoch %d %s %s", f.Name, f.Epoch, f.Version, f.Data)
			}
		}
		return nil
	})
	return out
}

// Acceptance 1: 3 nodes fitting 2 each bind 6; the 7th waits until one is
// released; with a bind timeout it fails saying no node has capacity.
func TestSixFitSeventhWaits(t *testing.T) {
	f := Start(t, 3, Options{Driver: `{"cpus": 2, "ram_gb": 8}`})
	f.Put(0, Template("one", 1, 1))
	for i := range 6 {
		f.Put(i%3, Claim(fmt.Sprintf("c%d", i), "one", time.Minute))
	}
	per := map[string]int{}
	for i := range 6 {
		c := waitClaim(t, f.Hosts[0], fmt.Sprintf("c%d", i), types.ClaimBound)
		per[c.Status.Node]++
	}
	assert.Equal(t, map[string]int{"n0": 2, "n1": 2, "n2": 2}, per)

	f.Put(1, Claim("c6", "one", time.Minute))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := f.Hosts[1].Claims()["c6"]
		if assert.NotNil(c, got) {
			assert.Equal(c, types.ClaimRequested, got.Status.Phase)
			assert.Contains(c, got.Status.Reason, "capacity")
		}
	}, 10*time.Second, 10*time.Millisecond)

	_, err := f.Hosts[2].Store.Delete(types.KindMachineClaim, "c3", types.Version{})
	require.NoError(t, err)
	waitClaim(t, f.Hosts[0], "c6", types.ClaimBound)

	f.Put(2, Claim("c7", "one", 500*time.Millisecond))
	c := waitClaim(t, f.Hosts[0], "c7", types.ClaimFailed)
	assert.Contains(t, c.Status.Reason, "no node can take template one")
	assert.Contains(t, c.Status.Reason, "no capacity")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Empty(c, f.Audit(func(string) int { return 2 }))
	}, 10*time.Second, 50*time.Millisecond)
}

// Acceptance 2: concurrent claims through different nodes of a 5-node
// cluster: each ends with exactly one machine, no node above capacity,
// nothing that fits left Requested.
func TestClaimStormNeverOvercommits(t *testing.T) {
	const nodes, perNode, claims = 5, 50, 300
	f := Start(t, nodes, Options{Driver: fmt.Sprintf(`{"cpus": %d, "ram_gb": 1000}`, perNode)})
	f.Put(0, Template("one", 1, 1))
	f.WaitEverywhere(types.KindMachineTemplate, "one")
	// "Never above its capacity": sampled all through the storm, from each
	// node's own records (its live machines) and its driver's holdings.
	peak := f.Peak(25*time.Millisecond, func(h *Host) map[string]int {
		own := 0
		for _, m := range h.Machines() {
			if m.Spec.Node == h.Name && m.Live() {
				own++
			}
		}
		return map[string]int{h.Name + " records": own, h.Name + " driver": len(h.Held())}
	})
	var wg sync.WaitGroup
	for i := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f.Put(i%nodes, Claim(fmt.Sprintf("s%03d", i), "one", 5*time.Minute))
		}()
	}
	wg.Wait()
	want := min(claims, nodes*perNode)
	if !assert.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, h := range f.Up() {
			assert.Equal(c, want, h.Count()[types.ClaimBound], "bound as seen from %s", h.Name)
		}
	}, 3*time.Minute, 100*time.Millisecond) {
		peak()
		f.Dump(t)
		t.FailNow()
	}
	most := peak()
	for what, n := range most {
		assert.LessOrEqual(t, n, perNode, "most machines ever seen in %s", what)
	}
	assert.Len(t, most, 2*nodes)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Empty(c, f.Audit(func(string) int { return perNode }))
	}, 10*time.Second, 50*time.Millisecond)
	// What did not fit waits for capacity (it is neither lost nor failed).
	for name, c := range f.Hosts[0].Claims() {
		if c.Status.Phase != types.ClaimBound {
			assert.Equal(t, types.ClaimRequested, c.Status.Phase, "claim %s", name)
		}
	}
}

// Acceptance 5: the worked overbook example end to end: a 16-CPU host, 14-CPU
// tenants, cpu_overbook 12: two fit when the template allows overbooking, the
// third does not; without overbooking only one fits.
func TestOverbookWorkedExample(t *testing.T) {
	f := Start(t, 1, Options{Driver: `{"cpus": 16, "ram_gb": 64, "cpu_overbook": 12}`})
	over := Template("tenant", 14, 1)
	over.Spec.AllowOverbook = true
	f.Put(0, over)
	f.Put(0, Template("strict", 14, 1))
	for _, name := range []string{"t1", "t2"} {
		f.Put(0, Claim(name, "tenant", time.Minute))
		waitClaim(t, f.Hosts[0], name, types.ClaimBound)
	}
	f.Put(0, Claim("t3", "tenant", 400*time.Millisecond))
	c := waitClaim(t, f.Hosts[0], "t3", types.ClaimFailed)
	assert.Contains(t, c.Status.Reason, "capacity")

	for _, name := range []string{"t1", "t2"} {
		_, err := f.Hosts[0].Store.Delete(types.KindMachineClaim, name, types.Version{})
		require.NoError(t, err)
	}
	f.Put(0, Claim("s1", "strict", time.Minute))
	waitClaim(t, f.Hosts[0], "s1", types.ClaimBound)
	f.Put(0, Claim("s2", "strict", 400*time.Millisecond))
	c = waitClaim(t, f.Hosts[0], "s2", types.ClaimFailed)
	assert.Contains(t, c.Status.Reason, "capacity")
}

// Node loss: a killed node's machines are marked Lost after the grace and their
// claims bound elsewhere (Rebind) or failed (Fail).
func TestNodeLossRebindsOrFails(t *testing.T) {
	f := Start(t, 3, Options{Driver: `{"cpus": 4, "ram_gb": 8}`, LostGrace: 2 * time.Second, Node: func(_ int, c *cluster.Config) {
		c.Placement = types.PlacementPack
	}})
	f.Put(0, Template("rebind", 1, 1))
	fail := Template("fragile", 1, 1)
	fail.Spec.OnNodeLoss = types.LostFail
	f.Put(0, fail)
	for i := range 6 {
		tmpl := "rebind"
		if i%2 == 1 {
			tmpl = "fragile"
		}
		f.Put(0, Claim(fmt.Sprintf("c%d", i), tmpl, time.Minute))
	}
	victims := map[string]string{} // claim -> template, on the node we kill
	var victim int
	bound := map[string]*types.MachineClaim{}
	for i := range 6 {
		name := fmt.Sprintf("c%d", i)
		bound[name] = waitClaim(t, f.Hosts[0], name, types.ClaimBound)
	}
	// Kill a node that holds machines (not n0, whose view we audit).
	for i := 1; i < 3 && victim == 0; i++ {
		for name, c := range bound {
			if c.Status.Node == f.Hosts[i].Name {
				victim = i
				victims[name] = c.Spec.MachineTemplate
			}
		}
	}
	require.NotZero(t, victim, "no machine on n1 or n2: %v", bound)
	f.Kill(victim)
	dead := f.Hosts[victim].Name
	for name, tmpl := range victims {
		if tmpl == "rebind" {
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				got := f.Hosts[0].Claims()[name]
				if assert.NotNil(c, got) {
					assert.Equal(c, types.ClaimBound, got.Status.Phase, got.Status.Reason)
					assert.NotEqual(c, dead, got.Status.Node)
				}
			}, 15*time.Second, 10*time.Millisecond)
		} else {
			c := waitClaim(t, f.Hosts[0], name, types.ClaimFailed)
			assert.Contains(t, c.Status.Reason, "lost")
		}
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		node, err := store.Get[types.Node](f.Hosts[0].Store, types.KindNode, dead)
		require.NoError(c, err)
		assert.Equal(c, types.NodeDown, node.Status.Phase)
	}, 10*time.Second, 50*time.Millisecond)
}

// Unbound claims of a node that dies are elected again on the survivors.
func TestDeadNodeUnboundClaimsRebind(t *testing.T) {
	f := Start(t, 3, Options{DriverFor: func(i int) string {
		if i == 2 {
			// n2 is the only one with room, and it is slow to allocate.
			return `{"cpus": 8, "ram_gb": 8, "delay": "30s"}`
		}
		return `{"cpus": 1, "ram_gb": 8}`
	}})
	f.Put(0, Template("big", 4, 1))
	f.Put(0, Claim("c", "big", time.Minute))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := f.Hosts[0].Claims()["c"]
		if assert.NotNil(c, got) {
			assert.Equal(c, "n2", got.Status.Node)
		}
	}, 10*time.Second, 10*time.Millisecond)
	f.Kill(2)
	// Nobody else fits: the claim is handed back to election and waits.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := f.Hosts[0].Claims()["c"]
		if assert.NotNil(c, got) {
			assert.Equal(c, types.ClaimRequested, got.Status.Phase)
			assert.Empty(c, got.Status.Node)
		}
	}, 10*time.Second, 10*time.Millisecond)
}

// A Down node deleted before its machines are lost (hf-cli node delete, as
// soon as it reads Down) still has them marked Lost after the grace and
// their claims bound elsewhere: the verdict follows the machines, not the
// Node object. Its claims stayed Bound to a machine nobody held.
func TestDeletedDownNodeMachinesAreLost(t *testing.T) {
	f := Start(t, 3, Options{Driver: `{"cpus": 4, "ram_gb": 8}`, LostGrace: 3 * time.Second, Node: func(_ int, c *cluster.Config) {
		c.Placement = types.PlacementPack
	}})
	f.Put(0, Template("one", 1, 1))
	for i := range 6 {
		f.Put(0, Claim(fmt.Sprintf("c%d", i), "one", time.Minute))
	}
	bound := map[string]*types.MachineClaim{}
	for i := range 6 {
		name := fmt.Sprintf("c%d", i)
		bound[name] = waitClaim(t, f.Hosts[0], name, types.ClaimBound)
	}
	victim := 0
	for i := 1; i < 3 && victim == 0; i++ {
		for _, c := range bound {
			if c.Status.Node == f.Hosts[i].Name {
				victim = i
			}
		}
	}
	require.NotZero(t, victim, "no machine on n1 or n2: %v", bound)
	dead := f.Hosts[victim].Name
	f.Kill(victim)
	// Deleted as soon as it reads Down, as the API allows.
	var node *types.Node
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		node, err = store.Get[types.Node](f.Hosts[0].Store, types.KindNode, dead)
		require.NoError(c, err)
		assert.Equal(c, types.NodeDown, node.Status.Phase)
	}, 10*time.Second, 10*time.Millisecond)
	_, err := f.Hosts[0].Store.Delete(types.KindNode, dead, node.Metadata.Version)
	require.NoError(t, err)
	for name, c := range bound {
		if c.Status.Node != dead {
			continue
		}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got := f.Hosts[0].Claims()[name]
			if assert.NotNil(c, got) {
				assert.Equal(c, types.ClaimBound, got.Status.Phase, got.Status.Reason)
				assert.NotEqual(c, dead, got.Status.Node)
			}
		}, 20*time.Second, 10*time.Millisecond, "claim %s of deleted node %s", name, dead)
	}
}

// The last node of two, its peer stopped for good and deleted (hf-cli
// node delete), passes the lost verdict on the deleted node's machines and
// binds their claims itself. Memberlist lists the peer as gone for a day,
// and until then it counted as known: one live member of two is no
// majority, so the claims stayed Bound to the deleted node's machines.
func TestLastNodePassesVerdictOnDeletedPeer(t *testing.T) {
	f := Start(t, 2, Options{Driver: `{"cpus": 4, "ram_gb": 8}`, LostGrace: 2 * time.Second, Node: func(_ int, c *cluster.Config) {
		c.Placement = types.PlacementSpread
	}})
	f.Put(0, Template("one", 1, 1))
	var onPeer string
	for i := 0; i < 8 && onPeer == ""; i++ {
		name := fmt.Sprintf("c%d", i)
		f.Put(0, Claim(name, "one", time.Minute))
		if waitClaim(t, f.Hosts[0], name, types.ClaimBound).Status.Node == f.Hosts[1].Name {
			onPeer = name
		}
	}
	require.NotEmpty(t, onPeer, "no claim bound on %s", f.Hosts[1].Name)
	dead := f.Hosts[1].Name
	f.Kill(1)
	node, err := store.Get[types.Node](f.Hosts[0].Store, types.KindNode, dead)
	require.NoError(t, err)
	_, err = f.Hosts[0].Store.Delete(types.KindNode, dead, node.Metadata.Version)
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := f.Hosts[0].Claims()[onPeer]
		if assert.NotNil(c, got) {
			assert.Equal(c, types.ClaimBound, got.Status.Phase, got.Status.Reason)
			assert.Equal(c, f.Hosts[0].Name, got.Status.Node)
		}
	}, 20*time.Second, 10*time.Millisecond, "claim %s of deleted node %s", onPeer, dead)
}

// Allocations fail on two nodes of three (an image missing from their
// engines, say): the claim is given back by each and bound on the third,
// which has the most room and so comes last under pack. It used to take
// turns between the two failing nodes until its bind timeout: the elector
// forgot the nodes it had tried whenever one accepted the claim.
func TestAllocationFailuresMoveOnToANodeNotTried(t *testing.T) {
	f := Start(t, 3, Options{DriverFor: func(i int) string {
		if i == 2 {
			return `{"cpus": 8, "ram_gb": 8}`
		}
		return `{"cpus": 4, "ram_gb": 8, "failure_rate": 1}`
	}})
	f.Put(0, Template("one", 1, 1))
	f.Put(0, Claim("c1", "one", time.Minute))
	c := waitClaim(t, f.Hosts[0], "c1", types.ClaimBound)
	assert.Equal(t, "n2", c.Status.Node)
	assert.Equal(t, uint64(3), c.Status.Round, "n0 and n1 once each, then n2")
}
