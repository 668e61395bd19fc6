package clustertest

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

func setMaintenance(t *testing.T, h *Host, node string, on bool) {
	t.Helper()
	_, err := store.Update(h.Store, types.KindNode, node, func(n *types.Node) error {
		n.Spec.Maintenance = on
		return nil
	})
	require.NoError(t, err)
}

// A drained node takes no new placements; its machines stay until released;
// undrained, it takes placements again.
func TestDrainStopsPlacements(t *testing.T) {
	f := Start(t, 2, Options{Driver: `{"cpus": 10, "ram_gb": 100}`})
	f.Put(0, Template("one", 1, 1))
	f.Put(0, Claim("before", "one", time.Minute))
	before := waitClaim(t, f.Hosts[0], "before", types.ClaimBound)
	drained := before.Status.Node
	setMaintenance(t, f.Hosts[0], drained, true)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, h := range f.Up() {
			n, err := store.Get[types.Node](h.Store, types.KindNode, drained)
			require.NoError(c, err)
			assert.True(c, n.Spec.Maintenance)
			assert.Equal(c, types.NodeDraining, n.Status.Phase)
		}
	}, 5*time.Second, 10*time.Millisecond)

	for i := range 6 {
		name := fmt.Sprintf("during-%d", i)
		f.Put(i%2, Claim(name, "one", time.Minute))
		c := waitClaim(t, f.Hosts[0], name, types.ClaimBound)
		assert.NotEqual(t, drained, c.Status.Node, "claim %s placed on the drained node", name)
	}
	// The machine that was there stays.
	assert.Equal(t, types.ClaimBound, f.Hosts[0].Claims()["before"].Status.Phase)

	// Undrain: with pack placement the drained node, already busier, fills again.
	setMaintenance(t, f.Hosts[1], drained, false)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		n, err := store.Get[types.Node](f.Hosts[0].Store, types.KindNode, drained)
		require.NoError(c, err)
		assert.Equal(c, types.NodeUp, n.Status.Phase)
	}, 5*time.Second, 10*time.Millisecond)
	placed := map[string]int{}
	for i := range 10 {
		name := fmt.Sprintf("after-%d", i)
		f.Put(0, Claim(name, "one", time.Minute))
		placed[waitClaim(t, f.Hosts[0], name, types.ClaimBound).Status.Node]++
	}
	assert.Positive(t, placed[drained], "undrained node takes placements again: %v", placed)
}
