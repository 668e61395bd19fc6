package clustertest

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/member"
	"github.com/hf-fleet/hf/lib/cluster/member/membertest"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Audit checks the fleet's invariants from every running host's own records
// and its driver's real holdings, and returns every violation found:
//   - every Bound claim names exactly one live machine, Running on its node;
//   - no live machine exists without a claim that names it (warm pool
//     machines of a set excepted);
//   - every driver holds exactly the resources of its node's live machines;
//   - no node holds more than its capacity.
func (f *Fleet) Audit(capacity func(node string) int) []string {
	var bad []string
	up := f.Up()
	if len(up) == 0 {
		return nil
	}
	view := up[0] // after convergence every host sees the same; audit one view
	claims, machines := view.Claims(), view.Machines()
	live := map[string][]string{} // claim -> live machines
	perNode := map[string]int{}
	for name, m := range machines {
		if !m.Live() {
			continue
		}
		perNode[m.Spec.Node]++
		if m.Spec.Claim == "" && m.Spec.MachineSet != "" {
			continue // a warm pool machine waits unclaimed
		}
		live[m.Spec.Claim] = append(live[m.Spec.Claim], name)
		c, ok := claims[m.Spec.Claim]
		if !ok || c.Status.Machine != name || c.Status.Phase == types.ClaimFailed {
			bad = append(bad, fmt.Sprintf("machine %s on %s is live but its claim %s does not name it", name, m.Spec.Node, m.Spec.Claim))
		}
	}
	for name, c := range claims {
		if c.Status.Phase != types.ClaimBound {
			continue
		}
		ms := live[name]
		if len(ms) != 1 {
			sort.Strings(ms)
			bad = append(bad, fmt.Sprintf("bound claim %s has %d live machines %v", name, len(ms), ms))
			continue
		}
		if m := machines[ms[0]]; m.Spec.Node != c.Status.Node || m.Status.Phase != types.MachineRunning {
			bad = append(bad, fmt.Sprintf("claim %s: machine %s is %s on %s, claim says %s", name, ms[0], m.Status.Phase, m.Spec.Node, c.Status.Node))
		}
	}
	for _, h := range up {
		held := h.Held()
		want := map[string]bool{}
		for _, m := range machines {
			if m.Spec.Node == h.Name && m.Live() && m.Status.Resource != nil {
				want[m.Status.Resource.ID] = true
			}
		}
		for id := range held {
			if !want[id] {
				bad = append(bad, fmt.Sprintf("driver of %s holds %s that no live machine names", h.Name, id))
			}
		}
		for id := range want {
			if !held[id] {
				bad = append(bad, fmt.Sprintf("machine resource %s of %s is not held by its driver", id, h.Name))
			}
		}
		if capacity != nil && perNode[h.Name] > capacity(h.Name) {
			bad = append(bad, fmt.Sprintf("node %s has %d machines, capacity %d", h.Name, perNode[h.Name], capacity(h.Name)))
		}
	}
	sort.Strings(bad)
	return bad
}

// Count returns how many claims are in each phase as host h sees them.
func (h *Host) Count() map[types.ClaimPhase]int {
	out := map[types.ClaimPhase]int{}
	for _, c := range h.Claims() {
		out[c.Status.Phase]++
	}
	return out
}

// Converged reports whether every running host's store has the same digest.
func Converged(f *Fleet) (member.Digest, bool) {
	var stores []*store.Store
	for _, h := range f.Up() {
		stores = append(stores, h.Store)
	}
	return membertest.SameDigest(stores...)
}

// Dump logs every claim that is not Bound and every machine, as host 0 sees
// them, and each node's capacity: for failing tests.
func (f *Fleet) Dump(t testing.TB) {
	h := f.Up()[0]
	for name, c := range h.Claims() {
		if c.Status.Phase != types.ClaimBound {
			t.Logf("claim %s: %s node=%q machine=%q round=%d reason=%q", name, c.Status.Phase, c.Status.Node, c.Status.Machine, c.Status.Round, c.Status.Reason)
		}
	}
	per := map[string]map[types.MachinePhase]int{}
	for _, m := range h.Machines() {
		if per[m.Spec.Node] == nil {
			per[m.Spec.Node] = map[types.MachinePhase]int{}
		}
		per[m.Spec.Node][m.Status.Phase]++
	}
	t.Logf("machines per node: %v", per)
	for _, v := range f.Audit(nil) {
		t.Logf("audit: %s", v)
	}
	nodes, _ := store.List[types.Node](h.Store, types.KindNode)
	for _, n := range nodes {
		for _, d := range n.Spec.Drivers {
			t.Logf("node %s driver %s: used %.0f reserved %.0f free %.0f", n.Metadata.Name, d.Name, d.Capacity.Used.CPU, d.Capacity.Reserved.CPU, d.Capacity.Free.CPU)
		}
	}
}

// ownerOf is the rendezvous owner of a duty key among members.
func ownerOf(key string, members []string) string { return scheduler.Owner(key, members) }

// WaitEverywhere waits until every running host's store has kind/name.
func (f *Fleet) WaitEverywhere(kind, name string) {
	f.T.Helper()
	require.Eventually(f.T, func() bool {
		for _, h := range f.Up() {
			if _, err := h.Store.Get(kind, name); err != nil {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "%s/%s did not reach every host", kind, name)
}

// Peak calls measure on each host running now, every interval, until the
// function it returns is called; that returns the largest value seen for each
// key of measure's answers. For "never above" checks while the fleet works;
// the hosts must not be restarted meanwhile.
func (f *Fleet) Peak(every time.Duration, measure func(h *Host) map[string]int) func() map[string]int {
	hosts := f.Up()
	stop, result := make(chan struct{}), make(chan map[string]int, 1)
	go func() {
		most := map[string]int{}
		for {
			for _, h := range hosts {
				for k, v := range measure(h) {
					most[k] = max(most[k], v)
				}
			}
			select {
			case <-stop:
				result <- most
				return
			case <-time.After(every):
			}
		}
	}()
	return func() map[string]int {
		close(stop)
		return <-result
	}
}
