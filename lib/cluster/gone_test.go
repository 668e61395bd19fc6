package cluster

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// TestMarkLostCountsOnce: the gone duty reads the cache, which may not yet
// hold the lost verdict it wrote a moment ago, and marks the machine again;
// the store finds the verdict there and writes nothing, and the loss is
// neither logged nor counted twice (hf_machines_lost_total read 3 for two
// machines of a deleted node).
func TestMarkLostCountsOnce(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	m := &types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: "m1"},
		Spec: types.MachineSpec{MachineTemplate: "small", Node: "n9", Driver: "test"}}
	tn.put(m)
	stale, err := store.Get[types.Machine](tn.st, types.KindMachine, "m1")
	require.NoError(t, err)
	d := tn.node.duties
	d.markLost(stale, "node n9 is gone")
	d.markLost(stale, "node n9 is gone")
	got, err := store.Get[types.Machine](tn.st, types.KindMachine, "m1")
	require.NoError(t, err)
	require.True(t, got.LostHolds())
	assert.Equal(t, 1.0, testutil.ToFloat64(tn.node.metrics.lost))
	d.markLost(&types.Machine{Metadata: types.ObjectMeta{Name: "gone"}}, "node n9 is gone")
	assert.Equal(t, 1.0, testutil.ToFloat64(tn.node.metrics.lost), "a machine no longer there is not lost by this node")
}
