package member_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/internal/metricstest"
	"github.com/hf-fleet/hf/lib/cluster/member/membertest"
	"github.com/hf-fleet/hf/lib/types"
)

// fanoutOptions: 8 members, fan-out 2, anti-entropy out of the way, so what
// arrives came along the tree.
func fanoutOptions() membertest.Options {
	cfg := membertest.FastConfig()
	cfg.Fanout = 2
	cfg.AntiEntropyInterval = time.Hour
	return membertest.Options{Config: cfg, InMemory: true, Settle: 30 * time.Second}
}

// TestFanoutRelays: with fan-out 2 a write reaches all 8 members by relays,
// and its writer sends it twice, not seven times.
func TestFanoutRelays(t *testing.T) {
	c := membertest.Start(t, 8, fanoutOptions())
	for i := range 10 {
		rec := put(t, c.Nodes[3].Store, fmt.Sprintf("c%d", i), "alice")
		waitEverywhere(t, c, types.KindMachineClaim, rec.Name, rec.Version, 5*time.Second)
	}
	var pushed, relayed float64
	for _, n := range c.Nodes {
		v := metricstest.Values(t, n.Member.Collector())
		pushed += v["hf_replication_records_pushed_total"]
		relayed += v["hf_replication_records_relayed_total"]
		assert.LessOrEqual(t, v["hf_replication_records_pushed_total"], 20.0, "%s sent each write at most twice", n.Name)
	}
	w := metricstest.Values(t, c.Nodes[3].Member.Collector())
	assert.Equal(t, 20.0, w["hf_replication_records_pushed_total"], "the writer sent each write to 2 children")
	assert.Equal(t, 70.0, pushed, "a tree over 8 members has 7 edges per write")
	assert.Equal(t, 50.0, relayed)
	// Only the 3 members with children in the writer's tree remember
	// which versions they relayed; the 4 leaves had nothing to relay.
	kept := 0
	for _, n := range c.Nodes {
		kept += n.Member.RelayedKept()
	}
	assert.Equal(t, 30, kept)
}

// TestFanoutBypass: when the writer cannot reach one of its children, it
// sends to that child's children instead, so only the unreachable member
// waits for anti-entropy. (n1 itself may get the write too: once the cut
// makes the others declare it dead, it rejoins and pulls.)
func TestFanoutBypass(t *testing.T) {
	c := membertest.Start(t, 8, fanoutOptions())
	// n0's children are n1 and n2; n1's are n3 and n4.
	c.Net.Cut("n0", "n1")
	t.Cleanup(c.Net.Heal) // before the members stop, so they leave cleanly
	rec := put(t, c.Nodes[0].Store, "c1", "alice")
	require.Eventually(t, func() bool {
		for _, n := range c.Nodes {
			if n.Name != "n1" && !hasVersion(n.Store, types.KindMachineClaim, "c1", rec.Version) {
				return false
			}
		}
		return true
	}, 5*time.Second, 5*time.Millisecond, "every member but n1 got the write")
}
