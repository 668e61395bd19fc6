package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/internal/metricstest"
	"github.com/hf-fleet/hf/lib/types"
)

func TestMetrics(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(tn.node.Collector()))
	tn.put(template("small", 1, 2, `{}`))
	tn.put(template("broken", 1, 1, `{"fail": true}`))
	tn.put(claim("c1", "small", time.Minute))
	tn.put(claim("c2", "small", time.Minute))
	tn.waitPhase("c1", types.ClaimBound)
	tn.waitPhase("c2", types.ClaimBound)
	tn.put(claim("bad", "broken", 300*time.Millisecond))
	tn.waitPhase("bad", types.ClaimFailed)
	_, err := tn.st.Delete(types.KindMachineClaim, "c2", types.Version{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return len(tn.machines()) == 1 }, 5*time.Second, 5*time.Millisecond)

	want := `
# HELP hf_claims Claims in the cluster by phase, as this node's store has them.
# TYPE hf_claims gauge
hf_claims{phase="Bound"} 1
hf_claims{phase="Failed"} 1
hf_claims{phase="Requested"} 0
hf_claims{phase="Terminated"} 0
# HELP hf_claims_bound_total Claims this node bound to one of its machines, by how: allocated (a new machine), pool (a warm machine) or shared (a Shared machine of an event).
# TYPE hf_claims_bound_total counter
hf_claims_bound_total{how="allocated"} 2
hf_claims_bound_total{how="pool"} 0
hf_claims_bound_total{how="shared"} 0
# HELP hf_machines_released_total Machines this node deallocated, by driver instance.
# TYPE hf_machines_released_total counter
hf_machines_released_total{driver="test"} 1
# HELP hf_node_machines Machines this node holds per driver instance (reserved and running).
# TYPE hf_node_machines gauge
hf_node_machines{driver="test"} 1
`
	assert.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(want),
		"hf_claims", "hf_claims_bound_total", "hf_machines_released_total", "hf_node_machines"))
	assert.Equal(t, 1, testutil.CollectAndCount(tn.node.Collector(), "hf_cluster_members"))
	assert.Equal(t, 8, testutil.CollectAndCount(tn.node.Collector(), "hf_node_cpus", "hf_node_ram_bytes"))
	got := metricstest.Values(t, tn.node.Collector())
	assert.Equal(t, 1.0, got["hf_node_cpus,driver=test,kind=used"])
	assert.Equal(t, 3.0, got["hf_node_cpus,driver=test,kind=free"])
	assert.Equal(t, 2.0*(1<<30), got["hf_node_ram_bytes,driver=test,kind=used"], "2 GiB in bytes")
	assert.Equal(t, 8.0*(1<<30), got["hf_node_ram_bytes,driver=test,kind=usable"])
	assert.Equal(t, 2.0, got["hf_claim_bind_seconds"])
	assert.GreaterOrEqual(t, got["hf_allocation_failures_total,driver=test"], 1.0)
}

// TestMetricsFromStart: a node that has done nothing yet shows every counter
// at zero, for every label value it can take, so the first event is a rate.
func TestMetricsFromStart(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	want := `
# HELP hf_allocation_failures_total Allocations that failed on this node, by driver instance.
# TYPE hf_allocation_failures_total counter
hf_allocation_failures_total{driver="test"} 0
# HELP hf_claims_bound_total Claims this node bound to one of its machines, by how: allocated (a new machine), pool (a warm machine) or shared (a Shared machine of an event).
# TYPE hf_claims_bound_total counter
hf_claims_bound_total{how="allocated"} 0
hf_claims_bound_total{how="pool"} 0
hf_claims_bound_total{how="shared"} 0
# HELP hf_machines_lost_total Machines this node marked Lost (its own that its driver lost, or those of a dead node it looked after).
# TYPE hf_machines_lost_total counter
hf_machines_lost_total 0
# HELP hf_machines_released_total Machines this node deallocated, by driver instance.
# TYPE hf_machines_released_total counter
hf_machines_released_total{driver="test"} 0
`
	assert.NoError(t, testutil.CollectAndCompare(tn.node.Collector(), strings.NewReader(want),
		"hf_allocation_failures_total", "hf_claims_bound_total", "hf_machines_lost_total", "hf_machines_released_total"))
	assert.Equal(t, 0.0, metricstest.Values(t, tn.node.Collector())["hf_claim_bind_seconds"])
}
