package clustertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster"
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

// waitNodesUp waits until every running host has every running host's
// Node object, Up.
func waitNodesUp(t *testing.T, f *Fleet) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, h := range f.Up() {
			for _, name := range f.UpNames() {
				node, ok := nodeOf(h, name)
				if assert.True(c, ok, "node %s on %s", name, h.Name) {
					assert.Equal(c, types.NodeUp, node.Status.Phase, "node %s on %s", name, h.Name)
				}
			}
		}
	}, 10*time.Second, 10*time.Millisecond)
}

// follower reads a host's view of every node again only when
// NodeViewChanged says it moved, as an API event stream does: what it
// holds is what a stream shows that no record change reaches (the far side
// of a partition writes none that get through).
type follower struct {
	h     *Host
	ch    <-chan struct{}
	views map[string]types.Condition
}

func follow(c require.TestingT, h *Host) *follower {
	f := &follower{h: h}
	f.read(c)
	return f
}

// read takes the next notice's channel, then the views: a change in
// between closes the channel it holds.
func (f *follower) read(c require.TestingT) {
	f.ch = f.h.Node.NodeViewChanged()
	f.views = map[string]types.Condition{}
	err := f.h.Store.Each(types.KindNode, func(rec store.Record) error {
		obj, err := store.Decode(rec)
		if err != nil {
			return err
		}
		n := obj.(*types.Node)
		f.h.Node.NodeView(n)
		f.views[n.Metadata.Name] = *n.Status.Conditions.Get(types.ConditionReachable)
		return nil
	})
	require.NoError(c, err)
}

// reach is the follower's view of name, read again if a notice came.
func (f *follower) reach(c require.TestingT, name string) (types.ConditionStatus, string) {
	select {
	case <-f.ch:
		f.read(c)
	default:
	}
	v := f.views[name]
	return v.Status, v.Reason
}

// A node cut off alone passes no verdict on the others, so its store keeps
// them Up; its view says it cannot reach them and why (no majority). The
// majority passes the verdict on it and says it is unreachable too; after
// the heal everyone is Up and reachable again. Each change of a view is
// notified (NodeViewChanged): a follower that reads the views only then
// sees every one of them.
func TestCutOffNodeShowsPeersUnreachable(t *testing.T) {
	f := Start(t, 3, Options{})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, h := range f.Up() {
			for _, name := range f.UpNames() {
				reachable(c, h, name, types.NodeUp, types.ConditionTrue, types.ReasonMember)
			}
		}
	}, 10*time.Second, 10*time.Millisecond)
	followers := []*follower{follow(t, f.Hosts[0]), follow(t, f.Hosts[1]), follow(t, f.Hosts[2])}
	notified := func(c *assert.CollectT, i int, name string, status types.ConditionStatus, reason string) {
		st, r := followers[i].reach(c, name)
		assert.Equal(c, [2]string{string(status), reason}, [2]string{string(st), r}, "%s as n%d was told of it", name, i)
	}

	f.Partition([]int{0, 1}, []int{2})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		reachable(c, f.Hosts[2], "n0", types.NodeUp, types.ConditionFalse, types.ReasonNoQuorum)
		reachable(c, f.Hosts[2], "n1", types.NodeUp, types.ConditionFalse, types.ReasonNoQuorum)
		reachable(c, f.Hosts[2], "n2", types.NodeUp, types.ConditionTrue, types.ReasonMember)
		reachable(c, f.Hosts[0], "n2", types.NodeDown, types.ConditionFalse, types.ReasonUnreachable)
		reachable(c, f.Hosts[0], "n1", types.NodeUp, types.ConditionTrue, types.ReasonMember)
		notified(c, 2, "n0", types.ConditionFalse, types.ReasonNoQuorum)
		notified(c, 2, "n1", types.ConditionFalse, types.ReasonNoQuorum)
		notified(c, 2, "n2", types.ConditionTrue, types.ReasonMember)
		notified(c, 0, "n2", types.ConditionFalse, types.ReasonUnreachable)
		notified(c, 1, "n2", types.ConditionFalse, types.ReasonUnreachable)
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
		for i, h := range f.Up() {
			for _, name := range f.UpNames() {
				reachable(c, h, name, types.NodeUp, types.ConditionTrue, types.ReasonMember)
				notified(c, i, name, types.ConditionTrue, types.ReasonMember)
			}
		}
	}, 10*time.Second, 10*time.Millisecond)
}

// A down verdict on a node that runs (its report crossed the verdict as it
// came back: the owner of node/n2 got the report before membership said
// n2 was back) is answered by n2 at once: everyone reads it Up again well
// before its next heartbeat (an hour here).
func TestDownVerdictOnALiveNodeIsAnswered(t *testing.T) {
	f := Start(t, 3, Options{Node: func(_ int, c *cluster.Config) { c.ReportInterval = time.Hour }})
	waitNodesUp(t, f)
	_, err := store.UpdateFacet(f.Hosts[0].Store, types.KindNode, "n2", types.FacetLiveness, func(o *types.Node) error {
		o.Status.Down = &types.NodeVerdict{Reason: "gone for 1s", At: time.Now(), By: "n0",
			Report: o.Metadata.Facets.Get(types.FacetReport), Was: o.Status.Phase}
		return nil
	})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, h := range f.Up() {
			node, ok := nodeOf(h, "n2")
			if assert.True(c, ok) {
				assert.Equal(c, types.NodeUp, node.Status.Phase, "n2 as %s sees it", h.Name)
				assert.NotNil(c, node.Status.Down, "the verdict reached %s", h.Name)
			}
		}
	}, 5*time.Second, 10*time.Millisecond)
}

// A node that comes back after the others passed the down verdict on it
// (killed and restarted, or cut off and healed) reads Up everywhere as soon
// as its report replicates, not at its next heartbeat (an hour here). Its
// report at start and on a membership change (its rejoin) end the verdict;
// so does its answer to the verdict: the healed partition reads Down for
// the hour only when neither is there. The verdict that crosses the report
// is TestDownVerdictOnALiveNodeIsAnswered's.
func TestRejoinedNodeReadsUpAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name       string
		away, back func(f *Fleet)
	}{
		{"killed, restarted", func(f *Fleet) { f.Kill(2) }, func(f *Fleet) { f.Restart(2) }},
		{"cut off, healed", func(f *Fleet) { f.Partition([]int{0, 1}, []int{2}) }, func(f *Fleet) { f.Heal() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := Start(t, 3, Options{Node: func(_ int, c *cluster.Config) { c.ReportInterval = time.Hour }})
			waitNodesUp(t, f)
			tc.away(f)
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				node, ok := nodeOf(f.Hosts[0], "n2")
				if assert.True(c, ok) {
					assert.Equal(c, types.NodeDown, node.Status.Phase)
				}
			}, 15*time.Second, 10*time.Millisecond, "the majority passes the verdict")
			tc.back(f)
			back := time.Now()
			f.WaitMembers(20 * time.Second)
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				for _, h := range f.Up() {
					node, ok := nodeOf(h, "n2")
					if assert.True(c, ok) {
						assert.Equal(c, types.NodeUp, node.Status.Phase, "n2 as %s sees it", h.Name)
					}
				}
			}, 10*time.Second, 10*time.Millisecond)
			t.Logf("n2 read Up everywhere %s after it came back", time.Since(back).Round(time.Millisecond))
		})
	}
}
