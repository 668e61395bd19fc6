package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// A session never takes over a claim it did not make. A user could name a
// session and scenario whose claim name was another user's claim: the
// session adopted that claim and, at its timeout, deleted it (or paused its
// machine with onEnd Pause).
func TestSessionTakesNoOtherClaim(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	tn.put(template("small", 1, 1, `{}`))
	created := time.Now().UTC() // its keepalive timeout counts from here
	s := &types.Session{
		TypeMeta: types.TypeMeta{Kind: types.KindSession},
		Metadata: types.ObjectMeta{Name: "claim", CreatedAt: created},
		Spec: types.SessionSpec{User: "eve", MachineTemplate: "small", Timeout: types.D(time.Second),
			Scenario: "s1", PersistenceStrategy: types.NewPerScenario},
	}
	victim := claim(sessionClaimName(s, "s1"), "small", time.Minute)
	victim.Spec.User = "bob"
	tn.put(victim)
	tn.waitPhase(victim.Metadata.Name, types.ClaimBound)

	tn.put(s)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := store.Get[types.Session](tn.st, types.KindSession, "claim")
		require.NoError(c, err)
		assert.Empty(c, got.Status.MachineClaim)
		cond := got.Status.Conditions.Get(types.ConditionClaimed)
		if assert.NotNil(c, cond) {
			assert.Equal(c, "ClaimNameTaken", cond.Reason)
		}
	}, 5*time.Second, 5*time.Millisecond)
	// Past the session's timeout bob's claim is still his and bound.
	require.Eventually(t, func() bool {
		got, err := store.Get[types.Session](tn.st, types.KindSession, "claim")
		return err == nil && got.Status.Phase == types.SessionPhaseEnded
	}, 5*time.Second, 5*time.Millisecond)
	got := tn.claim(victim.Metadata.Name)
	assert.Equal(t, types.ClaimBound, got.Status.Phase)
	assert.Equal(t, "bob", got.Spec.User)
}

// The name of a session's claim cannot be told from the session's name and
// scenario alone: the same names made at another time give another claim.
func TestSessionClaimNameUnpredictable(t *testing.T) {
	a := &types.Session{Metadata: types.ObjectMeta{Name: "lab", CreatedAt: time.Date(2020, 1, 2, 3, 4, 5, 6, time.UTC)}}
	b := &types.Session{Metadata: types.ObjectMeta{Name: "lab", CreatedAt: a.Metadata.CreatedAt.Add(time.Nanosecond)}}
	assert.Equal(t, sessionClaimName(a, "x"), sessionClaimName(a, "x"), "a repeated start finds its claim")
	assert.NotEqual(t, sessionClaimName(a, "x"), sessionClaimName(b, "x"))
	assert.NotEqual(t, sessionClaimName(a, "x"), sessionClaimName(a, "y"))
}
