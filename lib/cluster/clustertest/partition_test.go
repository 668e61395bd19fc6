package clustertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// Acceptance 4: a partition during a claim storm, long enough for each side to
// declare the other's nodes dead and re-bind their claims, then heal: no claim
// keeps two live machines, no machine is left without its claim, and every
// driver's real holdings match the store.
func TestPartitionDuringClaimStormConverges(t *testing.T) {
	f := Start(t, 3, Options{Driver: `{"cpus": 100, "ram_gb": 1000}`, LostGrace: 2 * time.Second})
	f.Put(0, Template("one", 1, 1))
	for i := range 6 {
		f.Put(i%3, Claim(fmt.Sprintf("before-%d", i), "one", time.Minute))
	}
	for i := range 6 {
		waitClaim(t, f.Hosts[0], fmt.Sprintf("before-%d", i), types.ClaimBound)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Len(c, f.Hosts[2].Claims(), 6)
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
	// Long enough for each side to mark the other down and its machines lost.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, m := range f.Hosts[2].Machines() {
			if m.Spec.Node != "n2" {
				assert.Equal(c, types.MachineLost, m.Status.Phase, "machine %s of %s seen from n2", m.Metadata.Name, m.Spec.Node)
			}
		}
	}, 15*time.Second, 50*time.Millisecond)

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
}
