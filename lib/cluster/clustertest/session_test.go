package clustertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

func session(name string, timeout time.Duration, ps types.SessionEnd) *types.Session {
	return &types.Session{
		TypeMeta: types.TypeMeta{Kind: types.KindSession},
		Metadata: types.ObjectMeta{Name: name},
		Spec:     types.SessionSpec{User: "alice", MachineTemplate: "one", Timeout: types.D(timeout), OnEnd: ps},
	}
}

func sessionState(t *testing.T, h *Host, name string) *types.Session {
	t.Helper()
	s, err := store.Get[types.Session](h.Store, types.KindSession, name)
	require.NoError(t, err)
	return s
}

// Issue 7 (sessions): a session gets a claim for its user; keepalives keep it;
// without them it ends and its claim is released (DeleteOnEnd) or kept
// (KeepOnEnd), or it pauses with its machine paused (PauseOnEnd) until a
// keepalive resumes both; deleting a session releases its claim.
func TestSessionLifecycle(t *testing.T) {
	f := Start(t, 2, Options{})
	f.Put(0, Template("one", 1, 1))
	f.Put(0, session("drop", 2*time.Second, types.EndDelete))
	f.Put(1, session("keep", 2*time.Second, types.EndKeep))
	f.Put(1, session("gone", time.Hour, ""))
	f.Put(0, session("nap", 2*time.Second, types.EndPause))

	claimOf := map[string]string{}
	for _, name := range []string{"drop", "keep", "gone", "nap"} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			s, err := store.Get[types.Session](f.Hosts[0].Store, types.KindSession, name)
			require.NoError(c, err)
			assert.Equal(c, types.SessionPhaseActive, s.Status.Phase)
			assert.NotEmpty(c, s.Status.MachineClaim)
			claimOf[name] = s.Status.MachineClaim
		}, 10*time.Second, 20*time.Millisecond)
		cl := waitClaim(t, f.Hosts[0], claimOf[name], types.ClaimBound)
		assert.Equal(t, "alice", cl.Spec.User)
	}

	// Keepalives hold "drop" open past its timeout.
	for range 3 {
		_, err := store.Update(f.Hosts[1].Store, types.KindSession, "drop", func(o *types.Session) error {
			if o.Metadata.Annotations == nil {
				o.Metadata.Annotations = map[string]string{}
			}
			o.Metadata.Annotations[types.AnnotationKeepalive] = time.Now().UTC().Format(time.RFC3339Nano)
			return nil
		})
		require.NoError(t, err)
		time.Sleep(time.Second) // the keepalive cadence under test, not a wait for state
		assert.Equal(t, types.SessionPhaseActive, sessionState(t, f.Hosts[0], "drop").Status.Phase)
	}

	// Then they stop: both short sessions end.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, name := range []string{"drop", "keep"} {
			s, err := store.Get[types.Session](f.Hosts[0].Store, types.KindSession, name)
			require.NoError(c, err)
			assert.Equal(c, types.SessionPhaseEnded, s.Status.Phase, name)
		}
		claims := f.Hosts[0].Claims()
		assert.Nil(c, claims[claimOf["drop"]], "DeleteOnEnd releases the claim")
		if assert.NotNil(c, claims[claimOf["keep"]], "KeepOnEnd keeps the claim") {
			assert.Equal(c, types.ClaimBound, claims[claimOf["keep"]].Status.Phase)
		}
	}, 15*time.Second, 50*time.Millisecond)

	// "nap" paused: its claim and machine are kept, the machine paused by
	// its node's driver.
	napClaim := waitClaim(t, f.Hosts[0], claimOf["nap"], types.ClaimBound)
	napHost := f.Host(napClaim.Status.Node)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, types.SessionPhasePaused, sessionState(t, f.Hosts[0], "nap").Status.Phase)
		m := f.Hosts[0].Machines()[napClaim.Status.Machine]
		if assert.NotNil(c, m) {
			assert.True(c, m.Status.Paused, "machine shows paused")
			assert.True(c, testdriver.Paused(napHost.Driver, m.Status.Resource.ID), "driver holds it paused")
		}
	}, 15*time.Second, 50*time.Millisecond)
	assert.Equal(t, types.ClaimBound, f.Hosts[0].Claims()[claimOf["nap"]].Status.Phase)
	// A keepalive resumes session and machine.
	_, err := store.Update(f.Hosts[1].Store, types.KindSession, "nap", func(o *types.Session) error {
		o.Metadata.Annotations = map[string]string{types.AnnotationKeepalive: time.Now().UTC().Format(time.RFC3339Nano)}
		return nil
	})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, types.SessionPhaseActive, sessionState(t, f.Hosts[0], "nap").Status.Phase)
		m := f.Hosts[0].Machines()[napClaim.Status.Machine]
		if assert.NotNil(c, m) {
			assert.False(c, m.Status.Paused, "machine runs again")
			assert.False(c, testdriver.Paused(napHost.Driver, m.Status.Resource.ID))
		}
	}, 10*time.Second, 50*time.Millisecond)

	_, err = f.Hosts[0].Store.Delete(types.KindSession, "gone", types.Version{})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Nil(c, f.Hosts[0].Claims()[claimOf["gone"]], "a deleted session's claim is released")
	}, 10*time.Second, 50*time.Millisecond)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Empty(c, f.Audit(nil))
	}, 10*time.Second, 50*time.Millisecond)
}

// Session persistenceStrategy (the proposal's): moving a session to another
// scenario of its course keeps its machine (PersistThroughCourse, the
// default) or gets a fresh one (NewPerScenario, the previous claim
// released).
func TestSessionPersistenceAcrossScenarios(t *testing.T) {
	f := Start(t, 2, Options{})
	f.Put(0, Template("one", 1, 1))
	keep := session("keep", time.Hour, "")
	keep.Spec.Course, keep.Spec.Scenario = "basics", "intro"
	fresh := session("fresh", time.Hour, "")
	fresh.Spec.Course, fresh.Spec.Scenario, fresh.Spec.PersistenceStrategy = "basics", "intro", types.NewPerScenario
	f.Put(0, keep)
	f.Put(1, fresh)

	bound := map[string]*types.MachineClaim{}
	for _, name := range []string{"keep", "fresh"} {
		var claim string
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			s := sessionState(t, f.Hosts[0], name)
			assert.Equal(c, "intro", s.Status.Scenario)
			assert.NotEmpty(c, s.Status.MachineClaim)
			claim = s.Status.MachineClaim
		}, 10*time.Second, 20*time.Millisecond)
		bound[name] = waitClaim(t, f.Hosts[0], claim, types.ClaimBound)
	}
	for _, name := range []string{"keep", "fresh"} {
		_, err := store.Update(f.Hosts[0].Store, types.KindSession, name, func(o *types.Session) error {
			o.Spec.Scenario = "next"
			return nil
		})
		require.NoError(t, err)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s := sessionState(t, f.Hosts[0], "keep")
		assert.Equal(c, "next", s.Status.Scenario)
		assert.Equal(c, bound["keep"].Metadata.Name, s.Status.MachineClaim, "same claim")
	}, 10*time.Second, 20*time.Millisecond)
	cl := waitClaim(t, f.Hosts[0], bound["keep"].Metadata.Name, types.ClaimBound)
	assert.Equal(t, bound["keep"].Status.Machine, cl.Status.Machine, "same machine")

	var next string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s := sessionState(t, f.Hosts[0], "fresh")
		assert.Equal(c, "next", s.Status.Scenario)
		assert.NotEqual(c, bound["fresh"].Metadata.Name, s.Status.MachineClaim, "a new claim")
		next = s.Status.MachineClaim
	}, 10*time.Second, 20*time.Millisecond)
	cl = waitClaim(t, f.Hosts[0], next, types.ClaimBound)
	assert.NotEqual(t, bound["fresh"].Status.Machine, cl.Status.Machine, "a fresh machine")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, gone := f.Hosts[0].Claims()[bound["fresh"].Metadata.Name]
		assert.False(c, gone, "the previous scenario's claim is released")
		_, held := f.Hosts[0].Machines()[bound["fresh"].Status.Machine]
		assert.False(c, held, "and its machine destroyed")
	}, 20*time.Second, 50*time.Millisecond)
}

// A session names no template (the proposal's sessions do not): it gets the
// one template of its event's user machines, once the event is there; and
// until it can have a claim its Claimed condition says why.
func TestSessionTemplateFromItsEvent(t *testing.T) {
	f := Start(t, 2, Options{Driver: `{"cpus": 100, "ram_gb": 1000}`})
	f.Put(0, Template("one", 1, 1))
	f.Put(0, Template("two", 1, 1))
	lab := session("lab", time.Hour, "")
	lab.Spec.MachineTemplate, lab.Spec.ScheduledEvent = "", "lab"
	bare := session("bare", time.Hour, "")
	bare.Spec.MachineTemplate = ""
	both := session("both", time.Hour, "")
	both.Spec.MachineTemplate, both.Spec.ScheduledEvent = "", "mixed"
	f.Put(1, lab)
	f.Put(1, bare)
	f.Put(1, both)
	waiting := func(name, why string) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			s, err := store.Get[types.Session](f.Hosts[0].Store, types.KindSession, name)
			require.NoError(c, err)
			assert.Empty(c, s.Status.MachineClaim)
			if cond := s.Status.Conditions.Get(types.ConditionClaimed); assert.NotNil(c, cond) {
				assert.Equal(c, types.ConditionFalse, cond.Status)
				assert.Contains(c, cond.Message, why)
			}
		}, 10*time.Second, 20*time.Millisecond)
	}
	waiting("lab", "scheduled event lab does not exist")
	waiting("bare", "names neither a machineTemplate nor a scheduledEvent")

	now := time.Now()
	f.Put(0, scheduledEvent("lab", now, now, now.Add(time.Hour), types.ExpireSoft))
	mixed := scheduledEvent("mixed", now, now, now.Add(time.Hour), types.ExpireSoft)
	mixed.Spec.RequiredMachines = append(mixed.Spec.RequiredMachines, types.RequiredMachines{MachineTemplate: "two", Count: 1})
	f.Put(0, mixed)
	var claim string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s, err := store.Get[types.Session](f.Hosts[0].Store, types.KindSession, "lab")
		require.NoError(c, err)
		require.NotEmpty(c, s.Status.MachineClaim)
		assert.Nil(c, s.Status.Conditions.Get(types.ConditionClaimed), "the condition goes once the session has its claim")
		claim = s.Status.MachineClaim
	}, 15*time.Second, 20*time.Millisecond)
	cl := waitClaim(t, f.Hosts[0], claim, types.ClaimBound)
	assert.Equal(t, "one", cl.Spec.MachineTemplate, "the event's template")
	assert.Equal(t, "lab", cl.Spec.ScheduledEvent)
	assert.Equal(t, "alice", cl.Spec.User)
	waiting("both", "requires user machines of templates one, two")
}
