package member_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/member/membertest"
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
