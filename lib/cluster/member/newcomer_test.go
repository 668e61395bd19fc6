package member_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/internal/metricstest"
	"github.com/hf-fleet/hf/lib/cluster/member"
	"github.com/hf-fleet/hf/lib/cluster/member/membertest"
)

// TestNewcomerAsksAMemberThatHasNotHeardOfIt: a member joins through n0 and
// at once asks n1 for a round, before n0's gossip has told n1 about it. n1
// answers once it learns of the newcomer, instead of dropping the answer
// (the newcomer then waited for its round to time out and for the periodic
// round, 30 s by default, before it held the cluster's records: e2e
// TestClusterSecrets failed so under load).
func TestNewcomerAsksAMemberThatHasNotHeardOfIt(t *testing.T) {
	cfg := membertest.FastConfig()
	// Slow gossip, so that n1 hears of a newcomer late; no periodic
	// rounds, so that only the round under test can move records.
	cfg.GossipInterval = 2 * time.Second
	cfg.ProbeInterval = 2 * time.Second
	cfg.ProbeTimeout = time.Second
	cfg.AntiEntropyInterval = time.Hour
	c := membertest.Start(t, 2, membertest.Options{Config: cfg})
	for i := range 20 {
		put(t, c.Nodes[1].Store, fmt.Sprintf("c%02d", i), "alice")
	}
	want := c.WaitConverged(5 * time.Second)

	unheard := 0
	for attempt := 0; attempt < 5 && unheard < 2; attempt++ {
		n := c.Add()
		if slices.Contains(c.Nodes[1].Member.Members(), n.Name) {
			continue // n1 heard of it already: not the case under test
		}
		unheard++
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n.Member.RunRound(ctx, "n1", false)
		cancel()
		v := metricstest.Values(t, n.Member.Collector())
		assert.Zero(t, v["hf_anti_entropy_rounds_total,result=failed"], "%s: its round with n1 failed", n.Name)
		require.Eventually(t, func() bool {
			d, err := member.ComputeDigest(n.Store)
			return err == nil && d == want
		}, 5*time.Second, 20*time.Millisecond, "%s did not receive the cluster's records", n.Name)
	}
	require.Positive(t, unheard, "n1 heard of every newcomer before it asked: the case was never tested")
}

// TestFailedRepairRoundRunsAgain: a push that fails asks for a round with
// the peer; when that round fails too (the link is still down), it is asked
// for again a moment later, not left to the periodic round (an hour here).
func TestFailedRepairRoundRunsAgain(t *testing.T) {
	cfg := membertest.FastConfig()
	cfg.AntiEntropyInterval = time.Hour
	c := membertest.Start(t, 2, membertest.Options{Config: cfg})
	c.Net.Cut("n0", "n1")
	rec := put(t, c.Nodes[0].Store, "during-cut", "alice")
	// The push fails and so does the round it asks for.
	require.Eventually(t, func() bool {
		v := metricstest.Values(t, c.Nodes[0].Member.Collector())
		return v["hf_anti_entropy_rounds_total,result=failed"] >= 1
	}, 5*time.Second, 10*time.Millisecond, "no round failed while the link was cut")
	c.Net.Heal()
	require.Eventually(t, func() bool { return hasVersion(c.Nodes[1].Store, rec.Kind, rec.Name, rec.Version) },
		10*time.Second, 20*time.Millisecond, "the write did not reach n1 after the heal")
	assert.ElementsMatch(t, []string{"n0", "n1"}, c.Nodes[1].Member.Members(), "the cut was too short to lose a member")
}
