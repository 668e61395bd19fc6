package member_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/member"
	"github.com/hf-fleet/hf/lib/cluster/member/membertest"
	"github.com/hf-fleet/hf/lib/cluster/wire"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

func TestReplicatePutDelete(t *testing.T) {
	for _, n := range []int{3, 10} {
		t.Run(nodeName(n), func(t *testing.T) {
			c := membertest.Start(t, n, membertest.Options{})
			src := c.Nodes[1].Store
			rec := put(t, src, "c1", "alice")
			waitEverywhere(t, c, types.KindMachineClaim, "c1", rec.Version, time.Second)
			for _, node := range c.Nodes {
				got, err := store.Get[types.MachineClaim](node.Store, types.KindMachineClaim, "c1")
				require.NoError(t, err, node.Name)
				assert.Equal(t, "alice", got.Spec.User, node.Name)
			}

			del, err := src.Delete(types.KindMachineClaim, "c1", types.Version{})
			require.NoError(t, err)
			waitEverywhere(t, c, types.KindMachineClaim, "c1", del.Version, time.Second)
			for _, node := range c.Nodes {
				_, err := node.Store.Get(types.KindMachineClaim, "c1")
				assert.ErrorIs(t, err, store.ErrNotFound, node.Name)
			}
		})
	}
}

func TestReplicateConcurrentUpdates(t *testing.T) {
	c := membertest.Start(t, 3, membertest.Options{})
	a, b := c.Nodes[0].Store, c.Nodes[2].Store
	for round := range 20 {
		done := make(chan store.Record, 2)
		for _, w := range []struct {
			st   *store.Store
			user string
		}{{a, "alice"}, {b, "bob"}} {
			go func() {
				rec, err := w.st.Put(claim("shared", w.user), store.PutOptions{})
				assert.NoError(t, err)
				done <- rec
			}()
		}
		r1, r2 := <-done, <-done
		winner := r1
		if r2.Version.Compare(r1.Version) > 0 {
			winner = r2
		}
		waitEverywhere(t, c, types.KindMachineClaim, "shared", winner.Version, 2*time.Second)
		want, err := winner.JSON()
		require.NoError(t, err)
		for _, n := range c.Nodes {
			got, err := n.Store.Get(types.KindMachineClaim, "shared")
			require.NoError(t, err)
			assert.Equal(t, winner.Version, got.Version, "round %d on %s", round, n.Name)
			assert.JSONEq(t, string(want), string(got.Data), "round %d on %s", round, n.Name)
		}
	}
	c.WaitConverged(5 * time.Second)
}

func TestReplicateBurst(t *testing.T) {
	// More writes than one batch holds, so pushes are split and coalesced.
	c := membertest.Start(t, 3, membertest.Options{})
	src := c.Nodes[0].Store
	var last store.Record
	for i := range 300 {
		last = put(t, src, fmt.Sprintf("burst-%03d", i), strings.Repeat("x", 1000))
	}
	waitEverywhere(t, c, types.KindMachineClaim, last.Name, last.Version, 5*time.Second)
	d := c.WaitConverged(5 * time.Second)
	assert.Equal(t, 300, d.Records)
}

func TestSend(t *testing.T) {
	c := membertest.Start(t, 3, membertest.Options{})
	n0, n1 := c.Nodes[0], c.Nodes[1]
	ctx := context.Background()

	msg := wire.Message{Type: wire.MsgOffer, From: n0.Name, To: n1.Name, Claim: "c1", Round: 3,
		Fresh: &types.Capacity{Total: types.Resources{CPU: 4, RAMGB: 8}}}
	require.NoError(t, n0.Member.Send(ctx, msg))
	require.Eventually(t, func() bool { return len(n1.Messages()) == 1 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, msg, n1.Messages()[0])

	self := wire.Message{Type: wire.MsgAccept, From: n0.Name, To: n0.Name, Claim: "c2"}
	require.NoError(t, n0.Member.Send(ctx, self))
	require.Eventually(t, func() bool { return len(n0.Messages()) == 1 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, self, n0.Messages()[0])

	withTimeout, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err := n0.Member.Send(withTimeout, wire.Message{Type: wire.MsgOffer, From: n0.Name, To: "nobody"})
	assert.ErrorIs(t, err, member.ErrNotMember)
	require.NoError(t, n0.Member.Send(withTimeout, wire.Message{Type: wire.MsgDecline, From: n0.Name, To: n1.Name, Reason: "full"}))
	require.Eventually(t, func() bool { return len(n1.Messages()) == 2 }, 10*time.Second, 5*time.Millisecond)
}
