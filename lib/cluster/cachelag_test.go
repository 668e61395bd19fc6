package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/wire"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// A claim the store holds and the cache does not hear of yet (an offer
// brought it, and the cache follows the store's watch) is not gone: the
// reconcile the acceptance queued allocates the reservation instead of
// releasing it, which sent the claim to a second round once the election
// came.
func TestClaimNotInTheCacheYetIsServed(t *testing.T) {
	node, st, claims := batchNode(t, 1) // not started: the cache holds nothing
	a := node.acc
	a.handleInbox([]Message{{Type: wire.MsgOffer, From: "n0", To: "n0", Claim: claims[0], Node: "n0", Driver: "test", Round: 1}})
	held := a.ofClaim(claims[0])
	require.Len(t, held, 1)
	_, cached := node.claim(claims[0])
	require.False(t, cached, "the cache lags")

	a.reconcile(claims[0])
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		m, err := store.Get[types.Machine](st, types.KindMachine, held[0].Machine)
		if assert.NoError(c, err, "the reservation is kept") {
			assert.Equal(c, types.MachineRunning, m.Status.Phase)
		}
	}, 5*time.Second, 5*time.Millisecond)

	// Gone from the store as well, it is gone.
	_, err := st.Delete(types.KindMachineClaim, claims[0], types.Version{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		if e, ok := a.get(held[0].Machine); ok && e.Busy {
			return false // the allocation's goroutine has not let go yet
		}
		a.reconcile(claims[0])
		_, err := st.Get(types.KindMachine, held[0].Machine)
		return isNotFound(err)
	}, 5*time.Second, 10*time.Millisecond, "released once the claim is deleted")
}
