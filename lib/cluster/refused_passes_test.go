package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/internal/testclock"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// A claim whose allocation fails on every node that fits (here the test
// driver's "fail", as an image no engine has) fails once that held for
// scheduler.max_refused_passes passes over a minute, with the driver's
// error, not at its bind timeout (an hour here).
func TestClaimEveryNodeRefusesFails(t *testing.T) {
	t0 := time.Now().UTC().Truncate(time.Second)
	clk := testclock.New(t0)
	tn := &testNode{t: t, name: "n1", dir: t.TempDir(), driver: `{"cpus": 4, "ram_gb": 8}`, now: clk.Now,
		config: func(c *Config) { c.MaxRefusedPasses = 3; c.ReportInterval = 50 * time.Millisecond }}
	tn.start()
	t.Cleanup(tn.stop)
	tn.put(template("broken", 1, 1, `{"fail": true}`))
	tn.put(claim("c1", "broken", time.Hour))

	// Pass after pass, with the node's reports; the clock stands still, so
	// less than a minute has gone by and the claim is still Requested
	// after more than three passes (rounds), saying why.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cl, err := store.Get[types.MachineClaim](tn.st, types.KindMachineClaim, "c1")
		require.NoError(c, err)
		assert.Equal(c, types.ClaimRequested, cl.Status.Phase)
		assert.Greater(c, cl.Status.Round, uint64(4))
		assert.Contains(c, cl.Status.Reason, "injected allocation failure")
	}, 10*time.Second, 10*time.Millisecond)

	clk.Add(2 * time.Minute)
	cl := tn.waitPhase("c1", types.ClaimFailed)
	assert.True(t, strings.HasPrefix(cl.Status.Reason, "every node that fits (n1) refused it, "), cl.Status.Reason)
	assert.Contains(t, cl.Status.Reason, "failed")
	assert.NotContains(t, cl.Status.Reason, "bind timeout")
	assert.Empty(t, tn.machines(), "no machine is left of the failed allocations")
}
