package member_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/member"
	"github.com/hf-fleet/hf/lib/cluster/member/membertest"
)

func TestRestartCatchesUp(t *testing.T) {
	// A periodic interval longer than the test: catching up must come from
	// the round that follows the rejoin, not from a tick. The wait is long
	// only for a loaded machine.
	cfg := membertest.FastConfig()
	cfg.AntiEntropyInterval = time.Hour
	c := membertest.Start(t, 3, membertest.Options{Config: cfg})
	put(t, c.Nodes[2].Store, "before", "alice")
	c.WaitConverged(5 * time.Second)

	c.Stop(2)
	c.WaitMembers(5 * time.Second)
	for i := range 1000 {
		put(t, c.Nodes[i%2].Store, fmt.Sprintf("while-down-%04d", i), "bob")
	}
	want := c.WaitConverged(10 * time.Second)
	require.Equal(t, 1001, want.Records)

	c.Restart(2)
	restarted := time.Now()
	c.WaitMembers(5 * time.Second)
	require.Eventually(t, func() bool {
		d, err := member.ComputeDigest(c.Nodes[2].Store)
		return err == nil && d == want
	}, 30*time.Second, 20*time.Millisecond, "restarted member did not catch up")
	t.Logf("caught up with 1000 writes %s after restart", time.Since(restarted).Round(time.Millisecond))
	_, ok := membertest.Converged(c.Running())
	assert.True(t, ok)
}

// A member that went away comes back and catches up: killed and restarted
// with a member to join; or stopped gracefully (it left) and started again
// without an address to join, as hf-node under its service, when the others
// take it back: they rejoin members that left as they do dead ones (it
// stayed alone, and both sides reported a healthy cluster).
func TestMemberComesBackAndCatchesUp(t *testing.T) {
	for _, tc := range []struct {
		name       string
		away, back func(c *membertest.Cluster)
	}{
		{"killed, restarted joining", func(c *membertest.Cluster) { c.Kill(2) }, func(c *membertest.Cluster) { c.Restart(2) }},
		{"left, restarted alone", func(c *membertest.Cluster) { c.Stop(2) }, func(c *membertest.Cluster) { c.RestartAlone(2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := membertest.Start(t, 3, membertest.Options{})
			tc.away(c)
			c.WaitMembers(10 * time.Second)
			put(t, c.Nodes[0].Store, "while-away", "alice")
			tc.back(c)
			c.WaitMembers(10 * time.Second)
			d := c.WaitConverged(10 * time.Second)
			assert.Equal(t, 1, d.Records)
		})
	}
}

// A member started without an address to join finds the cluster through
// the addresses it knew (Config.Known), even when none of the others knows
// it (a member that comes back at another address).
func TestMemberJoinsKnownAddresses(t *testing.T) {
	c := membertest.Start(t, 2, membertest.Options{})
	c.AddAlone("127.0.0.1:1", c.Nodes[1].Addr) // the first is gone for good
	c.WaitMembers(10 * time.Second)
}

// Known addresses are not waited for: a member whose known members are all
// gone for good is not "not joined" (it would never be ready), as one told
// to --join them would be.
func TestKnownAddressesAreNotAwaited(t *testing.T) {
	c := membertest.Start(t, 1, membertest.Options{})
	alone := c.AddAlone("127.0.0.1:1")
	require.NoError(t, alone.Member.Joined())
}
