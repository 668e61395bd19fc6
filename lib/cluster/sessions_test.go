package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/cache"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// A session of a scheduled event gets its claim only in the event's window,
// as a claim under the event is only created then: before the start it
// waits, its Claimed condition saying when the event opens, and runs again
// at the start, when it gets its claim; at a CutOff event's end it ends
// (its claim released), and one of an event that is already over ends at
// once with Claimed saying so, never Active with a Terminated claim.
func TestSessionWaitsForItsEventWindow(t *testing.T) {
	tn, clk, t0 := clockedNode(t, `{"cpus": 4, "ram_gb": 8}`, nil)
	stamp := func(t time.Time) string { return t.Format(time.RFC3339) }
	tn.put(template("small", 1, 1, `{}`))
	event := func(name string, start, end time.Time) *types.ScheduledEvent {
		return &types.ScheduledEvent{TypeMeta: types.TypeMeta{Kind: types.KindScheduledEvent}, Metadata: types.ObjectMeta{Name: name},
			Spec: types.ScheduledEventSpec{StartTime: start, EndTime: end, ExpirationStrategy: types.ExpireCutOff,
				RequiredMachines: []types.RequiredMachines{{MachineTemplate: "small", Count: 1, MachineType: types.MachineTypeUser}}}}
	}
	session := func(name, event string) *types.Session {
		return &types.Session{TypeMeta: types.TypeMeta{Kind: types.KindSession},
			Metadata: types.ObjectMeta{Name: name, CreatedAt: t0},
			Spec:     types.SessionSpec{User: "alice", ScheduledEvent: event, Timeout: types.D(2 * time.Hour)}}
	}
	tn.put(event("later", t0.Add(10*time.Minute), t0.Add(time.Hour)))
	tn.put(event("ws", t0.Add(-2*time.Hour), t0.Add(-time.Hour)))
	tn.put(session("early", "later"))
	tn.put(session("late", "ws"))
	// One with a template of its own, for an event that will move its
	// start earlier.
	moved := session("moved", "soon")
	moved.Spec.MachineTemplate = "small"
	tn.put(event("soon", t0.Add(30*time.Minute), t0.Add(time.Hour)))
	tn.put(moved)
	state := func(c *assert.CollectT, name string) *types.Session {
		s, err := store.Get[types.Session](tn.st, types.KindSession, name)
		require.NoError(c, err)
		return s
	}
	claimed := func(c *assert.CollectT, s *types.Session, reason, message string) {
		if cond := s.Status.Conditions.Get(types.ConditionClaimed); assert.NotNil(c, cond, "Claimed condition") {
			assert.Equal(c, types.ConditionFalse, cond.Status)
			assert.Equal(c, reason, cond.Reason)
			assert.Equal(c, message, cond.Message)
		}
	}
	sessionClaims := func(name string) int { return len(tn.node.cache.Names(idxClaimSession, name)) }

	// Before the start: it waits, saying until when, with no claim.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s := state(c, "early")
		assert.Empty(c, s.Status.MachineClaim)
		assert.NotEqual(c, types.SessionPhaseActive, s.Status.Phase)
		claimed(c, s, scheduler.SessionEventNotOpen, "scheduled event later opens at "+stamp(t0.Add(10*time.Minute))+"; the session gets its machine then")
	}, 10*time.Second, 5*time.Millisecond)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		claimed(c, state(c, "moved"), scheduler.SessionEventNotOpen, "scheduled event soon opens at "+stamp(t0.Add(30*time.Minute))+"; the session gets its machine then")
	}, 10*time.Second, 5*time.Millisecond)
	assert.Zero(t, sessionClaims("early"), "no claim before the event opens")
	// Its reconcile asks to run again at the start, not at its timeout.
	assert.Equal(t, 10*time.Minute, tn.node.duties.reconcileSession("early"))

	// An event already over: the session ends at once, saying why.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s := state(c, "late")
		assert.Equal(c, types.SessionPhaseEnded, s.Status.Phase)
		assert.Empty(c, s.Status.MachineClaim)
		claimed(c, s, scheduler.SessionEventEnded, "scheduled event ws ended at "+stamp(t0.Add(-time.Hour)))
	}, 10*time.Second, 5*time.Millisecond)
	assert.Zero(t, sessionClaims("late"), "never a claim for an event that is over")

	// At the start the requeue comes (as the work queue's AddAfter would)
	// and the session gets its claim, which binds.
	clk.Set(t0.Add(10 * time.Minute))
	tn.node.duties.q.Add(dutySession + "early")
	var claim string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s := state(c, "early")
		assert.Equal(c, types.SessionPhaseActive, s.Status.Phase)
		assert.Nil(c, s.Status.Conditions.Get(types.ConditionClaimed), "the condition goes with the claim")
		claim = s.Status.MachineClaim
		assert.NotEmpty(c, claim)
	}, 10*time.Second, 5*time.Millisecond)
	cl := tn.waitPhase(claim, types.ClaimBound)
	assert.Equal(t, "later", cl.Spec.ScheduledEvent)
	assert.Equal(t, "small", cl.Spec.MachineTemplate)
	assert.Equal(t, "alice", cl.Spec.User)
	// An event that opens earlier than it said: its waiting sessions run
	// again when it changes, and get their claims.
	_, err := store.Update(tn.st, types.KindScheduledEvent, "soon", func(o *types.ScheduledEvent) error {
		o.Spec.StartTime = t0.Add(5 * time.Minute)
		return nil
	})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s := state(c, "moved")
		assert.NotEmpty(c, s.Status.MachineClaim)
		assert.Nil(c, s.Status.Conditions.Get(types.ConditionClaimed))
	}, 10*time.Second, 5*time.Millisecond)
	// It runs again at the event's end (before its timeout).
	assert.Equal(t, 50*time.Minute, tn.node.duties.reconcileSession("early"))

	// At the CutOff end it ends, releasing its claim, and says why.
	clk.Set(t0.Add(time.Hour))
	tn.node.duties.q.Add(dutySession + "early")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s := state(c, "early")
		assert.Equal(c, types.SessionPhaseEnded, s.Status.Phase)
		claimed(c, s, scheduler.SessionEventEnded, "scheduled event later ended at "+stamp(t0.Add(time.Hour)))
		_, err := tn.st.Get(types.KindMachineClaim, claim)
		assert.ErrorIs(c, err, store.ErrNotFound, "its claim is released")
	}, 10*time.Second, 5*time.Millisecond)
}

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

// A session waiting for its event to open is not idle: its timeout counts
// from the event's start. It ended at its timeout before the start (a
// session made more than an hour early never got its machine) and kept a
// condition saying it would get one; an idle session now says why it ended.
func TestSessionWaitingForItsEventIsNotIdle(t *testing.T) {
	tn, clk, t0 := clockedNode(t, `{"cpus": 4, "ram_gb": 8}`, nil)
	tn.put(template("small", 1, 1, `{}`))
	start := t0.Add(3 * time.Hour)
	tn.put(&types.ScheduledEvent{TypeMeta: types.TypeMeta{Kind: types.KindScheduledEvent}, Metadata: types.ObjectMeta{Name: "lab"},
		Spec: types.ScheduledEventSpec{StartTime: start, EndTime: start.Add(5 * time.Hour),
			RequiredMachines: []types.RequiredMachines{{MachineTemplate: "small", Count: 1, MachineType: types.MachineTypeUser}}}})
	tn.put(&types.Session{TypeMeta: types.TypeMeta{Kind: types.KindSession}, Metadata: types.ObjectMeta{Name: "early", CreatedAt: t0},
		Spec: types.SessionSpec{User: "alice", ScheduledEvent: "lab", Timeout: types.D(time.Hour)}})
	get := func() *types.Session {
		s, err := store.Get[types.Session](tn.st, types.KindSession, "early")
		require.NoError(t, err)
		return s
	}
	require.Eventually(t, func() bool { return get().Status.Conditions.Get(types.ConditionClaimed) != nil }, 10*time.Second, 5*time.Millisecond)

	clk.Set(t0.Add(2 * time.Hour)) // its timeout passed, the event has not opened
	assert.Equal(t, time.Hour, tn.node.duties.reconcileSession("early"), "it runs again at the start")
	s := get()
	assert.NotEqual(t, types.SessionPhaseEnded, s.Status.Phase)
	assert.Equal(t, scheduler.SessionEventNotOpen, s.Status.Conditions.Get(types.ConditionClaimed).Reason)

	clk.Set(start)
	tn.node.duties.q.Add(dutySession + "early") // as the work queue's AddAfter would
	require.Eventually(t, func() bool { return get().Status.MachineClaim != "" }, 10*time.Second, 5*time.Millisecond)
	tn.waitPhase(get().Status.MachineClaim, types.ClaimBound)

	clk.Set(start.Add(time.Hour)) // an hour after the start without a keepalive
	tn.node.duties.reconcileSession("early")
	s = get()
	assert.Equal(t, types.SessionPhaseEnded, s.Status.Phase)
	if cond := s.Status.Conditions.Get(types.ConditionClaimed); assert.NotNil(t, cond) {
		assert.Equal(t, "Idle", cond.Reason)
		assert.Equal(t, "no keepalive for 1h0m0s, so the session ended", cond.Message)
	}
}

// A session whose claim is deleted (its user may delete it) ends, saying
// so: it stayed Active with no machine for good, and keepalives succeeded.
func TestSessionEndsWithItsClaim(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(&types.Session{TypeMeta: types.TypeMeta{Kind: types.KindSession}, Metadata: types.ObjectMeta{Name: "s1"},
		Spec: types.SessionSpec{User: "alice", MachineTemplate: "small", Timeout: types.D(time.Hour)}})
	var claim string
	require.Eventually(t, func() bool {
		s, err := store.Get[types.Session](tn.st, types.KindSession, "s1")
		claim = s.Status.MachineClaim
		return err == nil && claim != ""
	}, 10*time.Second, 5*time.Millisecond)
	tn.waitPhase(claim, types.ClaimBound)
	_, err := tn.st.Delete(types.KindMachineClaim, claim, types.Version{})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s, err := store.Get[types.Session](tn.st, types.KindSession, "s1")
		require.NoError(c, err)
		assert.Equal(c, types.SessionPhaseEnded, s.Status.Phase)
		if cond := s.Status.Conditions.Get(types.ConditionClaimed); assert.NotNil(c, cond) {
			assert.Equal(c, "ClaimDeleted", cond.Reason)
		}
	}, 10*time.Second, 5*time.Millisecond)
}

// A session naming a claim this node has never seen (a replica behind, after
// the session's owner moved here) keeps it: only a claim's tombstone ends
// the session, never its absence.
func TestSessionKeepsAClaimNotSeenYet(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	tn.put(template("small", 1, 1, `{}`))
	s := &types.Session{TypeMeta: types.TypeMeta{Kind: types.KindSession}, Metadata: types.ObjectMeta{Name: "s1"},
		Spec:   types.SessionSpec{User: "alice", MachineTemplate: "small", Timeout: types.D(time.Hour)},
		Status: types.SessionStatus{Phase: types.SessionPhaseActive, MachineClaim: "s1-not-here-yet"}}
	tn.put(s)
	require.Eventually(t, func() bool {
		_, ok := cache.Typed[types.Session](tn.node.cache, types.KindSession, "s1")
		return ok
	}, 10*time.Second, 5*time.Millisecond)
	tn.node.duties.reconcileSession("s1")
	got, err := store.Get[types.Session](tn.st, types.KindSession, "s1")
	require.NoError(t, err)
	assert.Equal(t, types.SessionPhaseActive, got.Status.Phase)
	assert.Equal(t, "s1-not-here-yet", got.Status.MachineClaim)
}

// A claim or session a user made as the user was deleted (on another node,
// where the token was still good) does not outlive the user: the user duty
// deletes what a deleted user holds, made before the delete or within
// userGoneGrace of it, and so releases its machine. It leaves users that
// exist, names that were never users (an admin's claim may give any), and
// what a user made again under the name holds.
func TestDeletedUsersClaimsGo(t *testing.T) {
	tn, clk, _ := clockedNode(t, `{"cpus": 8, "ram_gb": 16}`, nil)
	tn.put(template("small", 1, 1, `{}`))
	user := func(name string) *types.User {
		return &types.User{TypeMeta: types.TypeMeta{Kind: types.KindUser}, Metadata: types.ObjectMeta{Name: name},
			Spec: types.UserSpec{Roles: []string{"user"}}}
	}
	claimOf := func(name, u string) *types.MachineClaim {
		c := claim(name, "small", time.Hour)
		c.Spec.User = u
		return c
	}
	session := func(name, u string) *types.Session {
		return &types.Session{TypeMeta: types.TypeMeta{Kind: types.KindSession}, Metadata: types.ObjectMeta{Name: name},
			Spec: types.SessionSpec{User: u, Timeout: types.D(time.Hour)}}
	}
	gone := func(kind, name string) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			_, err := tn.st.Get(kind, name)
			assert.True(c, errors.Is(err, store.ErrNotFound), "%s %s: %v", kind, name, err)
		}, 10*time.Second, 10*time.Millisecond)
	}
	there := func(kind, name string) {
		t.Helper()
		_, err := tn.st.Get(kind, name)
		require.NoError(t, err, "%s %s", kind, name)
	}

	tn.put(user("alice"))
	tn.put(user("carol"))
	tn.put(claimOf("a1", "alice"))
	tn.put(claimOf("b1", "bob")) // bob was never a user
	tn.put(claimOf("c1", "carol"))
	tn.put(session("s1", "alice"))
	// One that failed (nothing fits it) holds nothing: it stays, as
	// a plain delete of its user leaves it.
	tn.put(template("huge", 100, 1, `{}`))
	f1 := claim("f1", "huge", time.Second)
	f1.Spec.User = "alice"
	tn.put(f1)
	clk.Add(2 * time.Second)
	tn.waitPhase("f1", types.ClaimFailed)
	a1 := tn.waitPhase("a1", types.ClaimBound)
	tn.waitPhase("b1", types.ClaimBound)
	tn.waitPhase("c1", types.ClaimBound)

	_, err := tn.st.Delete(types.KindUser, "alice", types.Version{})
	require.NoError(t, err)
	gone(types.KindMachineClaim, "a1")
	gone(types.KindSession, "s1")
	gone(types.KindMachine, a1.Status.Machine)
	// Made the instant after the delete (it reaches this node later):
	// deleted as it comes.
	clk.Add(time.Second)
	tn.put(claimOf("a2", "alice"))
	gone(types.KindMachineClaim, "a2")

	// Past the grace, a claim naming alice is not one she made before she
	// went (a new alice's, whose record is on its way); nor is one of the
	// alice made again.
	clk.Add(2 * userGoneGrace)
	tn.put(claimOf("a3", "alice"))
	tn.put(user("alice"))
	tn.put(claimOf("a4", "alice"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, tn.node.cache.WaitSeq(ctx, tn.st.Seq()))
	// Run the duty now (the queue runs it too), then look.
	tn.node.duties.reconcileUser("alice")
	tn.node.duties.reconcileUser("bob")
	tn.node.duties.reconcileUser("carol")
	for _, name := range []string{"a3", "a4", "b1", "c1", "f1"} {
		there(types.KindMachineClaim, name)
	}
}
