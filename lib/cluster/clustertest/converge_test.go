package clustertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Every node sees every Node object, including those written before it joined.
func TestNodeObjectsReachEveryone(t *testing.T) {
	f := Start(t, 3, Options{})
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, h := range f.Up() {
			nodes, err := store.List[types.Node](h.Store, types.KindNode)
			require.NoError(c, err)
			assert.Len(c, nodes, 3, "node objects on %s", h.Name)
		}
		_, ok := Converged(f)
		assert.True(c, ok)
	}, 5*time.Second, 20*time.Millisecond)
}
