package clustertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// Acceptance 4: a partition during a claim storm, long enough for the
// majority side to declare the other node dead and re-bind its claims, then
// heal: the node cut off alone passes no verdict on the majority's machines,
// no claim bound on the majority side before the partition loses its machine,
// no claim keeps two live machines, no machine is left without its claim, and
// every driver's real holdings match the store.
func TestPartitionDuringClaimStormConverges(t *testing.T) {
	f := Start(t, 3, Options{Driver: `{"cpus": 100, "ram_gb": 1000}`, LostGrace: 2 * time.Second})
	f.Put(0, Template("one", 1, 1))
	for i := range 6 {
		f.Put(i%3, Claim(fmt.Sprintf("before-%d", i), "one", time.Minute))
	}
	before := map[string]string{} // claim -> machine, for those on the majority side
	for i := range 6 {
		name := fmt.Sprintf("before-%d", i)
		c := waitClaim(t, f.Hosts[0], name, types.ClaimBound)
		if c.Status.Node != "n2" {
			before[name] = c.Status.Machine
		}
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Len(c, f.Hosts[2].Claims(), 6)
	}, 5*time.Second, 10*time.Millisecond)

	// n2 has every Node object (anti-entropy may take a second to bring
	// the ones written before it joined), so it reports n0 as Up below.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, ok := nodeOf(f.Hosts[2], "n0")
		assert.True(c, ok)
	}, 5*time.Second, 10*time.Millisecond)
	f.Partition([]int{0, 1}, []int{2})
	for i := range 10 {
		f.Put(i%2, Claim(fmt.Sprintf("a-%d", i), "one", time.Minute))
		f.Put(2, Claim(fmt.Sprintf("b-%d", i), "one", time.Minute))
	}
	// The same claim created on both sides: each side binds it.
	f.Put(0, Claim("both", "one", time.Minute))
	f.Put(2, Claim("both", "one", time.Minute))
	waitClaim(t, f.Hosts[0], "both", types.ClaimBound)
	waitClaim(t, f.Hosts[2], "both", types.ClaimBound)
	// The majority marks n2's machines lost after the grace ...
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, m := range f.Hosts[0].Machines() {
			if m.Spec.Node == "n2" && m.Live() {
				assert.Fail(c, "not lost yet", "machine %s of n2 seen from n0: %s", m.Metadata.Name, m.Status.Phase)
			}
		}
	}, 15*time.Second, 50*time.Millisecond)
	// ... and n2, alone, has passed no verdict on theirs.
	for _, m := range f.Hosts[2].Machines() {
		if m.Spec.Node != "n2" {
			assert.NotEqual(t, types.MachineLost, m.Status.Phase, "machine %s of %s seen from n2", m.Metadata.Name, m.Spec.Node)
		}
	}
	node, ok := nodeOf(f.Hosts[2], "n0")
	require.True(t, ok)
	assert.NotEqual(t, types.NodeDown, node.Status.Phase, "n2 does not mark n0 down: %+v", node.Status.Down)

	f.Heal()
	f.WaitMembers(20 * time.Second)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, h := range f.Up() {
			counts := h.Count()
			assert.Equal(c, 6+20+1, counts[types.ClaimBound], "bound as seen from %s: %v", h.Name, counts)
		}
		assert.Empty(c, f.Audit(nil))
		_, ok := Converged(f)
		assert.True(c, ok, "stores converged")
	}, 30*time.Second, 100*time.Millisecond)
	for name, machine := range before {
		c := waitClaim(t, f.Hosts[2], name, types.ClaimBound)
		assert.Equal(t, machine, c.Status.Machine, "claim %s bound on the majority side kept its machine", name)
	}
}
