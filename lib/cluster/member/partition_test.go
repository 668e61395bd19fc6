package member_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/member/membertest"
	"github.com/hf-fleet/hf/lib/types"
)

func TestPartitionHeals(t *testing.T) {
	c := membertest.Start(t, 4, membertest.Options{})
	left, right := []string{"n0", "n1"}, []string{"n2", "n3"}
	c.Net.Partition(left, right)
	require.Eventually(t, func() bool {
		return slices.Equal(c.Nodes[0].Member.Members(), left) &&
			slices.Equal(c.Nodes[1].Member.Members(), left) &&
			slices.Equal(c.Nodes[2].Member.Members(), right) &&
			slices.Equal(c.Nodes[3].Member.Members(), right)
	}, 15*time.Second, 20*time.Millisecond, "the halves never saw each other as dead")

	for i := range 20 {
		put(t, c.Nodes[0].Store, fmt.Sprintf("left-%d", i), "alice")
		put(t, c.Nodes[3].Store, fmt.Sprintf("right-%d", i), "bob")
	}
	// The same object on both sides; the later write must win everywhere.
	put(t, c.Nodes[1].Store, "both", "alice")
	last := put(t, c.Nodes[2].Store, "both", "bob")
	// Nothing crosses while cut.
	assert.False(t, hasVersion(c.Nodes[0].Store, types.KindMachineClaim, "both", last.Version))

	c.Net.Heal()
	c.WaitMembers(15 * time.Second)
	d := c.WaitConverged(10 * time.Second)
	assert.Equal(t, 41, d.Records)
	for _, n := range c.Nodes {
		got, err := n.Store.Get(types.KindMachineClaim, "both")
		require.NoError(t, err)
		assert.Equal(t, last.Version, got.Version, n.Name)
	}
}

func TestLossyNetworkStillReplicates(t *testing.T) {
	c := membertest.Start(t, 3, membertest.Options{})
	c.Net.SetDrop(0.2)
	for i := range 20 {
		put(t, c.Nodes[i%3].Store, fmt.Sprintf("lossy-%d", i), "alice")
	}
	d := c.WaitConverged(10 * time.Second)
	assert.Equal(t, 20, d.Records)
}
