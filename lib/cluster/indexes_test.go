package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// LiveClaimsOf counts a user's Requested and Bound claims from the indexes
// (by name: TestPinnedAndNames shows those read no object), as the claims
// themselves say.
func TestLiveClaimsOf(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(template("huge", 100, 1, `{}`))
	mine := func(name, tmpl, user string, timeout time.Duration) {
		c := claim(name, tmpl, timeout)
		c.Spec.User = user
		tn.put(c)
	}
	mine("a1", "small", "alice", time.Minute)
	mine("a2", "small", "alice", time.Minute)
	mine("a3", "huge", "alice", 300*time.Millisecond) // fails at its bind timeout
	mine("b1", "small", "bob", time.Minute)
	tn.waitPhase("a1", types.ClaimBound)
	tn.waitPhase("a3", types.ClaimFailed)
	mine("a4", "huge", "alice", time.Minute) // stays Requested
	ctx := context.Background()
	live, err := tn.node.LiveClaimsOf(ctx, "alice")
	require.NoError(t, err)
	require.Equal(t, 3, live, "a1, a2 bound, a4 requested; a3 failed")
	live, err = tn.node.LiveClaimsOf(ctx, "bob")
	require.NoError(t, err)
	require.Equal(t, 1, live)
	live, err = tn.node.LiveClaimsOf(ctx, "carol")
	require.NoError(t, err)
	require.Zero(t, live)
	claims, err := tn.node.ClaimsOf(ctx, "alice")
	require.NoError(t, err)
	phases := map[types.ClaimPhase]int{}
	for _, c := range claims {
		phases[c.Status.Phase]++
	}
	require.Equal(t, map[types.ClaimPhase]int{types.ClaimBound: 2, types.ClaimFailed: 1, types.ClaimRequested: 1}, phases)
}
