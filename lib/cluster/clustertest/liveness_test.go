package clustertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// viewOf returns the Node object of name as h has it, with h's own view
// added (what h's API answers).
func viewOf(c *assert.CollectT, h *Host, name string) (*types.Node, *types.Condition) {
	node, err := store.Get[types.Node](h.Store, types.KindNode, name)
	if !assert.NoError(c, err, "node %s on %s", name, h.Name) {
		return nil, nil
	}
	h.Node.NodeView(node)
	cond := node.Status.Conditions.Get(types.ConditionReachable)
	assert.NotNil(c, cond, "node %s as %s sees it", name, h.Name)
	return node, cond
}

// reachable checks the view of node name from h.
func reachable(c *assert.CollectT, h *Host, name string, phase types.NodePhase, status types.ConditionStatus, reason string) {
	node, cond := viewOf(c, h, name)
	if node == nil || cond == nil {
		return
	}
	assert.Equal(c, phase, node.Status.Phase, "phase of %s as %s sees it", name, h.Name)
	assert.Equal(c, status, cond.Status, "%s reachable from %s: %s", name, h.Name, cond.Message)
	assert.Equal(c, reason, cond.Reason, "%s reachable from %s: %s", name, h.Name, cond.Message)
}

// A node cut off alone passes no verdict on the others, so its store keeps
// them Up; its view says it cannot reach them and why (no majority). The
// majority passes the verdict on it and says it is unreachable too; after
// the heal everyone is Up and reachable again.
func TestCutOffNodeShowsPeersUnreachable(t *testing.T) {
	f := Start(t, 3, Options{})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, h := range f.Up() {
			for _, name := range f.UpNames() {
				reachable(c, h, name, types.NodeUp, types.ConditionTrue, types.ReasonMember)
			}
		}
	}, 10*time.Second, 10*time.Millisecond)

	f.Partition([]int{0, 1}, []int{2})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		reachable(c, f.Hosts[2], "n0", types.NodeUp, types.ConditionFalse, types.ReasonNoQuorum)
		reachable(c, f.Hosts[2], "n1", types.NodeUp, types.ConditionFalse, types.ReasonNoQuorum)
		reachable(c, f.Hosts[2], "n2", types.NodeUp, types.ConditionTrue, types.ReasonMember)
		reachable(c, f.Hosts[0], "n2", types.NodeDown, types.ConditionFalse, types.ReasonUnreachable)
		reachable(c, f.Hosts[0], "n1", types.NodeUp, types.ConditionTrue, types.ReasonMember)
	}, 15*time.Second, 10*time.Millisecond)
	stored, err := store.Get[types.Node](f.Hosts[2].Store, types.KindNode, "n0")
	require.NoError(t, err)
	assert.Empty(t, stored.Status.Conditions, "the view is never stored")
	f.Hosts[2].Node.NodeView(stored)
	cond := stored.Status.Conditions.Get(types.ConditionReachable)
	require.NotNil(t, cond)
	assert.Contains(t, cond.Message, "n2 reaches 1 of the 3 members it knows")
	assert.False(t, cond.LastTransitionTime.IsZero(), "since when n2 has not seen n0")

	f.Heal()
	f.WaitMembers(20 * time.Second)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, h := range f.Up() {
			for _, name := range f.UpNames() {
				reachable(c, h, name, types.NodeUp, types.ConditionTrue, types.ReasonMember)
			}
		}
	}, 10*time.Second, 10*time.Millisecond)
}
