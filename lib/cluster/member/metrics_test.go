package member_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/internal/metricstest"
	"github.com/hf-fleet/hf/lib/cluster/member"
	"github.com/hf-fleet/hf/lib/cluster/member/membertest"
)

// TestMetrics: pushes count on the writer and applies on the others; a member
// that was down catches up through anti-entropy, which its counters show.
func TestMetrics(t *testing.T) {
	c := membertest.Start(t, 3, membertest.Options{})
	for i := range 10 {
		put(t, c.Nodes[0].Store, fmt.Sprintf("c%d", i), "alice")
	}
	c.WaitConverged(5 * time.Second)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		w := metricstest.Values(t, c.Nodes[0].Member.Collector())
		assert.Equal(ct, 20.0, w["hf_replication_records_pushed_total"], "10 records to 2 peers")
		assert.Len(ct, c.Nodes[0].Member.Members(), 3)
		for _, n := range c.Nodes[1:] {
			r := metricstest.Values(t, n.Member.Collector())
			assert.GreaterOrEqual(ct, r["hf_replication_records_applied_total"], 10.0, n.Name)
			assert.GreaterOrEqual(ct, r["hf_replication_records_received_total"], r["hf_replication_records_applied_total"], n.Name)
		}
	}, 5*time.Second, 20*time.Millisecond)

	c.Stop(2)
	c.WaitMembers(5 * time.Second)
	for i := range 50 {
		put(t, c.Nodes[0].Store, fmt.Sprintf("d%d", i), "bob")
	}
	want := c.WaitConverged(5 * time.Second)
	c.Restart(2)
	c.WaitMembers(5 * time.Second)
	require.Eventually(t, func() bool {
		d, err := member.ComputeDigest(c.Nodes[2].Store)
		return err == nil && d == want
	}, 10*time.Second, 20*time.Millisecond)
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var sent, repairedRounds float64
		for _, n := range c.Nodes {
			v := metricstest.Values(t, n.Member.Collector())
			sent += v["hf_anti_entropy_records_total,direction=sent"]
			repairedRounds += v["hf_anti_entropy_rounds_total,result=repaired"]
		}
		assert.GreaterOrEqual(ct, sent, 50.0, "the 50 missed writes were sent by anti-entropy")
		assert.GreaterOrEqual(ct, repairedRounds, 1.0)
	}, 5*time.Second, 20*time.Millisecond)
}
