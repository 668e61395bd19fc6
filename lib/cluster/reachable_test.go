package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

func TestReachability(t *testing.T) {
	since := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		phase       types.NodePhase
		alive       bool
		live, known int
		status      types.ConditionStatus
		reason      string
		message     string
	}{
		{"a live member", types.NodeUp, true, 3, 3, types.ConditionTrue, types.ReasonMember, "a live member as n0 sees it"},
		{"live, under a verdict not yet answered", types.NodeDown, true, 3, 3, types.ConditionTrue, types.ReasonMember, "a live member as n0 sees it"},
		{"gone, seen from a majority", types.NodeUp, false, 2, 3, types.ConditionFalse, types.ReasonUnreachable, "n0 reaches 2 of the 3 members it knows, a majority: the down verdict is due"},
		{"gone, seen from no majority", types.NodeUp, false, 1, 3, types.ConditionFalse, types.ReasonNoQuorum, "n0 reaches 1 of the 3 members it knows, no majority"},
		{"half is no majority", types.NodeDraining, false, 2, 4, types.ConditionFalse, types.ReasonNoQuorum, "no majority"},
		{"down already", types.NodeDown, false, 1, 3, types.ConditionFalse, types.ReasonUnreachable, "not a live member as n0 sees it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := reachability("n0", tc.phase, tc.alive, tc.live, tc.known, since)
			assert.Equal(t, types.ConditionReachable, c.Type)
			assert.Equal(t, tc.status, c.Status)
			assert.Equal(t, tc.reason, c.Reason)
			assert.Contains(t, c.Message, tc.message)
			if tc.alive {
				assert.True(t, c.LastTransitionTime.IsZero())
			} else {
				assert.Equal(t, since, c.LastTransitionTime, "since when n0 has not seen it")
			}
		})
	}
}

// What NodeView adds moves with membership and with Node objects coming or
// going, and no record says so: NodeViewChanged closes its channel then,
// and only then, so a watcher that reads the view again on it keeps up.
func TestNodeViewChangedFollowsMembership(t *testing.T) {
	peers := &fakePeers{live: []string{"n0", "n1", "n2"}, known: []string{"n0", "n1", "n2"}}
	st, err := store.Open(store.Config{InMemory: true, NodeID: "n0"}, testLogger())
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	drv := testdriver.New(drivers.Env{Instance: "test", DataDir: t.TempDir(), NodeName: "n0", Log: testLogger()})
	require.NoError(t, drv.Prepare(context.Background(), []byte(`{"cpus": 1, "ram_gb": 1}`)))
	n, err := New(Config{Name: "n0", ReportInterval: time.Hour}, testLogger(), st, []Instance{{Name: "test", Type: "test", Driver: drv}}, peers)
	require.NoError(t, err)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, n.Stop(ctx))
	})
	putNode := func(name string) {
		_, err := st.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: name},
			Status: types.NodeStatus{Phase: types.NodeUp}}, store.PutOptions{Create: true})
		require.NoError(t, err)
	}
	closed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	reach := func(name string) (types.ConditionStatus, string) {
		o := &types.Node{Metadata: types.ObjectMeta{Name: name}, Status: types.NodeStatus{Phase: types.NodeUp}}
		n.NodeView(o)
		c := o.Status.Conditions.Get(types.ConditionReachable)
		return c.Status, c.Reason
	}

	ch := n.NodeViewChanged()
	putNode("n1")
	require.Eventually(t, func() bool { return closed(ch) }, 5*time.Second, time.Millisecond, "a Node object came")
	putNode("n2")
	require.Eventually(t, func() bool { return n.cache.Len(types.KindNode) == 3 }, 5*time.Second, time.Millisecond)

	ch = n.NodeViewChanged()
	assert.Equal(t, ch, n.NodeViewChanged(), "one channel for every watcher until the next change")
	tmpl := template("small", 1, 1, `{}`)
	_, err = st.Put(tmpl, store.PutOptions{Create: true})
	require.NoError(t, err)
	// The condition reads a copy: testify's Never may return before its
	// last check has, and ch is set again below (a data race).
	unmoved := ch
	assert.Never(t, func() bool { return closed(unmoved) }, 100*time.Millisecond, 5*time.Millisecond, "another kind's record moves no view")

	status, _ := reach("n1")
	require.Equal(t, types.ConditionTrue, status)
	peers.mu.Lock()
	peers.live = []string{"n0"}
	peers.mu.Unlock()
	n.MembershipChanged()
	assert.True(t, closed(ch), "membership changed")
	status, reason := reach("n1")
	assert.Equal(t, [2]string{string(types.ConditionFalse), types.ReasonNoQuorum}, [2]string{string(status), reason})

	ch = n.NodeViewChanged()
	peers.mu.Lock()
	peers.live = []string{"n0", "n2"}
	peers.mu.Unlock()
	n.MembershipChanged()
	assert.True(t, closed(ch), "a member came back")
	status, reason = reach("n1")
	assert.Equal(t, [2]string{string(types.ConditionFalse), types.ReasonUnreachable}, [2]string{string(status), reason})
}

// A notice closes the channel of those waiting, once; with none waiting it
// does nothing, and the next waiter waits for the next notice.
func TestNotice(t *testing.T) {
	var c notice
	c.notify()
	ch := c.wait()
	select {
	case <-ch:
		require.FailNow(t, "a notice before the wait woke it")
	default:
	}
	c.notify()
	_, open := <-ch
	assert.False(t, open)
	c.notify() // no one waits: nothing to close twice
	assert.NotEqual(t, ch, c.wait())
}
