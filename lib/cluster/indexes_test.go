package cluster

import (
	"context"
	"fmt"
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

// A set's reconcile reads the claim of each of its claimed machines: those
// claims stay decoded (pinned, as the set's machines are), or each reconcile
// of a pool of more claimed machines than the cache keeps decoded would
// decode them all, and after a trim so would every reconcile of any pool.
func TestSetReconcileReadsPinnedClaims(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 16, "ram_gb": 16}`)
	tn.put(template("one", 1, 1, `{}`))
	tn.put(&types.MachineSet{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineSet},
		Metadata: types.ObjectMeta{Name: "pool"},
		Spec: types.MachineSetSpec{
			AvailabilityConfiguration: types.AvailabilityConfiguration{Availability: types.AvailabilityPool},
			ProvisioningStrategy:      types.ProvisionAutoScale,
			MinAvailable:              4, MaxProvisioned: 4, MachineTemplate: "one",
		},
	})
	require.Eventually(t, func() bool {
		n := 0
		for _, m := range tn.machines() {
			if m.Spec.MachineSet == "pool" && m.Spec.Claim == "" && m.Status.Phase == types.MachineRunning {
				n++
			}
		}
		return n == 4
	}, 20*time.Second, 10*time.Millisecond)
	const claims = 4
	for i := range claims {
		tn.put(claim(fmt.Sprintf("u%d", i), "one", time.Minute))
	}
	for i := range claims {
		c := tn.waitPhase(fmt.Sprintf("u%d", i), types.ClaimBound)
		m, ok := tn.node.machine(c.Status.Machine)
		require.True(t, ok)
		require.Equal(t, "pool", m.Spec.MachineSet, "claim %s bound to a pool machine", c.Metadata.Name)
	}
	// The claims' last writes may still be coming (and the reconcilers
	// reading them): a reconcile in a quiet moment decodes nothing. Before
	// the claims were pinned, every reconcile after a trim decoded all four.
	var got []uint64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		tn.node.Cool()
		before := tn.node.cache.Decodes()
		tn.node.duties.reconcileSet("pool")
		if got = append(got, tn.node.cache.Decodes()-before); got[len(got)-1] == 0 {
			return
		}
		require.True(t, time.Now().Before(deadline), "decodes of each reconcile of the set after a trim: %v", got)
	}
}

// SessionsOf returns a user's sessions from the session index, as the
// sessions say, including one written just before.
func TestSessionsOf(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	session := func(name, user string) *types.Session {
		return &types.Session{TypeMeta: types.TypeMeta{Kind: types.KindSession},
			Metadata: types.ObjectMeta{Name: name}, Spec: types.SessionSpec{User: user}}
	}
	tn.put(session("a1", "alice"))
	tn.put(session("b1", "bob"))
	tn.put(session("a2", "alice"))
	names := func(user string) []string {
		got, err := tn.node.SessionsOf(context.Background(), user)
		require.NoError(t, err)
		var out []string
		for _, s := range got {
			out = append(out, s.Metadata.Name)
		}
		return out
	}
	require.ElementsMatch(t, []string{"a1", "a2"}, names("alice"))
	require.ElementsMatch(t, []string{"b1"}, names("bob"))
	require.Empty(t, names("carol"))
}
