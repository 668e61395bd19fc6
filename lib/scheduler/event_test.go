package scheduler

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// evStart is when the test events start; they provision 30 minutes before.
var evStart = time.Date(2025, 6, 2, 10, 0, 0, 0, time.UTC)

func event(name string, start time.Time, d time.Duration, exp types.ExpirationStrategy, lines ...types.RequiredMachines) types.ScheduledEvent {
	return types.ScheduledEvent{
		TypeMeta: types.TypeMeta{Kind: types.KindScheduledEvent},
		Metadata: types.ObjectMeta{Name: name},
		Spec:     types.ScheduledEventSpec{StartTime: start, EndTime: start.Add(d), ExpirationStrategy: exp, RequiredMachines: lines},
	}
}

// line is a requiredMachines line that has the event create its set.
func line(tpl string, n int, typ types.MachineType) types.RequiredMachines {
	return types.RequiredMachines{MachineTemplate: tpl, Count: n, MachineType: typ, CreateMachineSet: &types.CreateMachineSet{}}
}

func setNames(sets []types.MachineSet) []string {
	var out []string
	for _, s := range sets {
		out = append(out, s.Metadata.Name)
	}
	return out
}

func TestEventPhaseAndClaims(t *testing.T) {
	ev := event("ws", evStart, 2*time.Minute, "")
	early := ev
	early.Spec.ProvisioningStartTime = evStart.Add(-2 * time.Hour)
	tests := []struct {
		name  string
		ev    types.ScheduledEvent
		now   time.Time
		phase types.EventPhase
		ok    bool
		why   string
	}{
		{"long before", ev, evStart.Add(-31 * time.Minute), types.EventScheduled, false, "scheduled event ws opens at 2025-06-02T10:00:00Z"},
		{"default provisioning start", ev, evStart.Add(-30 * time.Minute), types.EventProvisioning, false, "scheduled event ws opens at 2025-06-02T10:00:00Z"},
		{"explicit provisioning start", early, evStart.Add(-time.Hour), types.EventProvisioning, false, "scheduled event ws opens at 2025-06-02T10:00:00Z"},
		{"just before start", ev, evStart.Add(-time.Nanosecond), types.EventProvisioning, false, "scheduled event ws opens at 2025-06-02T10:00:00Z"},
		{"at start", ev, evStart, types.EventActive, true, ""},
		{"just before end", ev, evStart.Add(2*time.Minute - time.Nanosecond), types.EventActive, true, ""},
		{"at end", ev, evStart.Add(2 * time.Minute), types.EventExpired, false, "scheduled event ws ended at 2025-06-02T10:02:00Z"},
		{"after end", ev, evStart.Add(time.Hour), types.EventExpired, false, "scheduled event ws ended at 2025-06-02T10:02:00Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.phase, EventPhaseAt(tc.now, tc.ev))
			ok, why := ClaimAllowedByEvent(tc.now, tc.ev)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.why, why)
		})
	}
}

func TestPlanEventProvisioning(t *testing.T) {
	useExisting := types.RequiredMachines{MachineTemplate: "web", Count: 1, MachineSets: []string{"shared-pool"}}
	ownAndExisting := types.RequiredMachines{MachineTemplate: "db", Count: 1, CreateMachineSet: &types.CreateMachineSet{}, MachineSets: []string{"x"}, BindStrategy: types.BindRequireMachineSets}
	ev := event("ws", evStart, time.Hour, "", line("tpl", 2, types.MachineTypeUser), line("srv", 3, types.MachineTypeShared), useExisting, ownAndExisting, line("dflt", 1, ""))

	p := PlanEvent(evStart.Add(-10*time.Minute), ev, 5, nil)
	assert.Equal(t, types.EventProvisioning, p.Phase)
	assert.False(t, p.AcceptClaims)
	assert.Equal(t, evStart, p.Next)
	require.Equal(t, []string{"ws-0", "ws-1", "ws-3", "ws-4"}, setNames(p.Create))
	assert.Equal(t, []string{"ws-0", "ws-1", "ws-3", "ws-4"}, p.CreatedMachineSets)
	for i, want := range []struct {
		tpl string
		n   int
	}{{"tpl", 10}, {"srv", 3}, {"db", 5}, {"dflt", 5}} {
		s := p.Create[i]
		assert.Equal(t, types.KindMachineSet, s.Kind)
		assert.Equal(t, want.tpl, s.Spec.MachineTemplate)
		assert.Equal(t, want.n, s.Spec.MinAvailable, s.Metadata.Name)
		assert.Equal(t, want.n, s.Spec.MaxProvisioned, s.Metadata.Name)
		assert.Equal(t, types.ProvisionAutoScale, s.Spec.ProvisioningStrategy)
		assert.Equal(t, types.AvailabilityConfiguration{Availability: types.AvailabilityScheduledEvent, Value: "ws"}, s.Spec.AvailabilityConfiguration)
		assert.Equal(t, "ws", s.Metadata.Labels[LabelScheduledEvent])
		require.NoError(t, s.Validate(), s.Metadata.Name)
	}
	assert.Equal(t, map[string]string{AnnotationBindStrategy: "RequireMachineSets"}, p.Create[2].Metadata.Annotations)
	assert.Nil(t, p.Create[0].Metadata.Annotations)

	t.Run("idempotent once created", func(t *testing.T) {
		ev2 := ev
		ev2.Status.CreatedMachineSets = p.CreatedMachineSets
		again := PlanEvent(evStart.Add(-5*time.Minute), ev2, 5, p.Create)
		assert.Empty(t, again.Create)
		assert.Empty(t, again.Update)
		assert.Empty(t, again.Delete)
		assert.Equal(t, p.CreatedMachineSets, again.CreatedMachineSets)
	})
	t.Run("created but status not written yet", func(t *testing.T) {
		again := PlanEvent(evStart.Add(-5*time.Minute), ev, 5, p.Create)
		assert.Empty(t, again.Create)
		assert.Empty(t, again.Update)
		assert.Equal(t, p.CreatedMachineSets, again.CreatedMachineSets)
	})
	t.Run("more users update the sets, keeping their other fields", func(t *testing.T) {
		have := append([]types.MachineSet(nil), p.Create...)
		have[0].Spec.MaxAge = types.D(time.Hour)
		have[0].Spec.Environment = "lab"
		again := PlanEvent(evStart.Add(-5*time.Minute), ev, 6, have)
		require.Equal(t, []string{"ws-0", "ws-3", "ws-4"}, setNames(again.Update))
		assert.Equal(t, 12, again.Update[0].Spec.MinAvailable)
		assert.Equal(t, 12, again.Update[0].Spec.MaxProvisioned)
		assert.Equal(t, "lab", again.Update[0].Spec.Environment)
		assert.Equal(t, time.Hour, again.Update[0].Spec.MaxAge.Duration)
		assert.Empty(t, again.Create)
	})
	t.Run("a name taken by another set", func(t *testing.T) {
		foreign := poolSet("ws-1", "", 1, 1)
		again := PlanEvent(evStart.Add(-5*time.Minute), ev, 5, []types.MachineSet{foreign})
		assert.Equal(t, []string{"ws-0", "ws-3", "ws-4"}, setNames(again.Create))
		assert.Empty(t, again.Update)
		assert.Equal(t, []string{"ws-0", "ws-3", "ws-4"}, again.CreatedMachineSets)
		require.Len(t, again.Warnings, 1)
		assert.Contains(t, again.Warnings[0], "machine set ws-1 already exists and was not created by scheduled event ws")
		// The event's status says so, not only its owner's log.
		assert.Equal(t, types.ConditionFalse, again.Provisioned.Status)
		assert.Equal(t, ProvisionedNameTaken, again.Provisioned.Reason)
		assert.Equal(t, again.Warnings[0], again.Provisioned.Message)
	})
	t.Run("no users counts as one", func(t *testing.T) {
		again := PlanEvent(evStart.Add(-5*time.Minute), ev, 0, nil)
		assert.Equal(t, 2, again.Create[0].Spec.MinAvailable)
	})
}

func TestPlanEventWindow(t *testing.T) {
	ev := event("ws", evStart, 2*time.Minute, "", line("tpl", 1, ""))
	t.Run("scheduled does nothing", func(t *testing.T) {
		p := PlanEvent(evStart.Add(-time.Hour), ev, 3, nil)
		assert.Equal(t, EventPlan{Phase: types.EventScheduled, Next: evStart.Add(-30 * time.Minute),
			Provisioned: types.Condition{Type: types.ConditionProvisioned, Status: types.ConditionFalse, Reason: ProvisionedScheduled,
				Message: "the event's machine sets are made from 2025-06-02T09:30:00Z"}}, p)
	})
	t.Run("active accepts claims and still creates", func(t *testing.T) {
		p := PlanEvent(evStart.Add(time.Minute), ev, 3, nil)
		assert.Equal(t, types.EventActive, p.Phase)
		assert.True(t, p.AcceptClaims)
		assert.Equal(t, evStart.Add(2*time.Minute), p.Next)
		assert.Equal(t, []string{"ws-0"}, setNames(p.Create))
		assert.Equal(t, types.Condition{Type: types.ConditionProvisioned, Status: types.ConditionTrue, Reason: ProvisionedMade,
			Message: "machine sets ws-0"}, p.Provisioned)
		assert.False(t, p.TerminateClaims)
	})
}

func TestPlanEventExpiry(t *testing.T) {
	after := evStart.Add(time.Hour)
	own := func(name string, minAvail, provisioned int) types.MachineSet {
		s := eventSets(event("ws", evStart, time.Minute, "", line("tpl", 1, "")), 1)[0]
		s.Metadata.Name = name
		s.Spec.MinAvailable = minAvail
		s.Status.Provisioned = provisioned
		return s
	}
	listed := poolSet("listed", "", 1, 1) // in status.createdMachineSets
	unlabelled := own("ws-5", 1, 1)
	unlabelled.Metadata.Labels = nil
	otherEvent := own("other-0", 1, 1)
	otherEvent.Metadata.Labels[LabelScheduledEvent] = "other"
	otherEvent.Spec.AvailabilityConfiguration.Value = "other"
	existing := []types.MachineSet{own("ws-0", 2, 3), own("ws-1", 0, 2), own("ws-2", 0, 0), listed, unlabelled, otherEvent, poolSet("public", "", 1, 1)}
	tests := []struct {
		name      string
		exp       types.ExpirationStrategy
		terminate bool
		update    []string
		delete    []string
	}{
		{"cutoff deletes the event's sets and ends its claims", types.ExpireCutOff, true, nil, []string{"listed", "ws-0", "ws-1", "ws-2"}},
		{"cutoff is the default", "", true, nil, []string{"listed", "ws-0", "ws-1", "ws-2"}},
		{"soft drains, then deletes empty sets", types.ExpireSoft, false, []string{"listed", "ws-0"}, []string{"ws-2"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ev := event("ws", evStart, time.Minute, tc.exp, line("tpl", 1, ""))
			ev.Status.CreatedMachineSets = []string{"listed", "ws-0", "ws-1", "ws-2", "ws-9"}
			p := PlanEvent(after, ev, 3, existing)
			assert.Equal(t, types.EventExpired, p.Phase)
			assert.False(t, p.AcceptClaims)
			assert.Equal(t, tc.terminate, p.TerminateClaims)
			assert.Equal(t, tc.update, setNames(p.Update))
			for _, s := range p.Update {
				assert.Zero(t, s.Spec.MinAvailable)
			}
			assert.Equal(t, tc.delete, p.Delete)
			assert.Empty(t, p.Create)
			assert.True(t, p.Next.IsZero())
			assert.Equal(t, ev.Status.CreatedMachineSets, p.CreatedMachineSets)
			assert.Equal(t, ProvisionedExpired, p.Provisioned.Reason)
			assert.Contains(t, p.Provisioned.Message, "the event ended at 2025-06-02T10:01:00Z")
			if tc.exp == types.ExpireSoft {
				assert.Contains(t, p.Provisioned.Message, "(Soft)")
			} else {
				assert.Contains(t, p.Provisioned.Message, "(CutOff)")
			}
		})
	}
	t.Run("cutoff again after the sets are gone", func(t *testing.T) {
		ev := event("ws", evStart, time.Minute, types.ExpireCutOff, line("tpl", 1, ""))
		ev.Status.CreatedMachineSets = []string{"ws-0"}
		p := PlanEvent(after, ev, 3, []types.MachineSet{poolSet("public", "", 1, 1)})
		assert.Empty(t, p.Delete)
		assert.True(t, p.TerminateClaims)
	})
}

// A deleted event's sets end as at a Soft end, whatever the event's
// strategy was (its record is gone): only those with its name and label,
// drained, then deleted once empty; no claim is ended.
func TestPlanDeletedEvent(t *testing.T) {
	own := func(name string, minAvail, provisioned int) types.MachineSet {
		s := eventSets(event("ws", evStart, time.Minute, "", line("tpl", 1, "")), 1)[0]
		s.Metadata.Name = name
		s.Spec.MinAvailable = minAvail
		s.Status.Provisioned = provisioned
		return s
	}
	unlabelled := own("ws-5", 1, 1)
	unlabelled.Metadata.Labels = nil
	otherEvent := own("other-0", 1, 1)
	otherEvent.Metadata.Labels[LabelScheduledEvent] = "other"
	existing := []types.MachineSet{own("ws-0", 2, 3), own("ws-1", 0, 2), own("ws-2", 0, 0), unlabelled, otherEvent, poolSet("public", "", 1, 1)}
	p := PlanDeletedEvent(evStart, "ws", existing)
	assert.Equal(t, []string{"ws-0"}, setNames(p.Update))
	assert.Zero(t, p.Update[0].Spec.MinAvailable)
	assert.Equal(t, []string{"ws-2"}, p.Delete)
	assert.False(t, p.TerminateClaims)
	assert.Empty(t, p.Create)
	assert.Empty(t, p.CreatedMachineSets)
	assert.True(t, p.Next.IsZero())
}

func TestEventSetName(t *testing.T) {
	long := strings.Repeat("a", 60) + "-bc"
	long2 := strings.Repeat("a", 60) + "-bd"
	tests := []struct {
		event string
		i     int
		want  string
	}{
		{"ws", 0, "ws-0"},
		{"ws", 12, "ws-12"},
		{strings.Repeat("x", 61), 0, strings.Repeat("x", 61) + "-0"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			assert.Equal(t, tc.want, EventSetName(tc.event, tc.i))
		})
	}
	t.Run("long names are cut, valid and unique", func(t *testing.T) {
		seen := map[string]bool{}
		for _, ev := range []string{long, long2, strings.Repeat("y", 63), strings.Repeat("z", 51) + "-" + strings.Repeat("q", 11)} {
			for _, i := range []int{0, 7, 123} {
				n := EventSetName(ev, i)
				assert.NoError(t, types.ValidateName("name", n), n)
				assert.NotContains(t, n, "--", "cut at a dash")
				assert.False(t, seen[n], "duplicate %s", n)
				seen[n] = true
				assert.True(t, isEventSetName(ev, n), n)
			}
		}
	})
	t.Run("isEventSetName rejects others", func(t *testing.T) {
		for _, n := range []string{"ws", "ws-", "ws-x", "ws-01", "ws--1", "other-0", "ws-0-0"} {
			assert.False(t, isEventSetName("ws", n), n)
		}
		assert.True(t, isEventSetName("ws", "ws-3"))
	})
}

func TestLineMachines(t *testing.T) {
	tests := []struct {
		name  string
		line  types.RequiredMachines
		users int
		want  int
	}{
		{"user machines per user", line("t", 2, types.MachineTypeUser), 5, 10},
		{"empty type is user", line("t", 2, ""), 5, 10},
		{"shared machines once", line("t", 2, types.MachineTypeShared), 5, 2},
		{"no users counts one", line("t", 2, ""), 0, 2},
		{"negative users counts one", line("t", 2, ""), -3, 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, LineMachines(tc.line, tc.users))
		})
	}
}

func TestEventFits(t *testing.T) {
	tpls := map[string]types.MachineTemplate{
		"small": {Spec: types.MachineTemplateSpec{Resources: types.Resources{CPU: 2, RAMGB: 4}}},
		"big":   {Spec: types.MachineTemplateSpec{Resources: types.Resources{CPU: 8, RAMGB: 16, DiskGB: 100}}},
	}
	cap16 := types.Resources{CPU: 16, RAMGB: 64}
	h := time.Hour
	ev := event("ws", evStart, 2*h, "", line("small", 1, "")) // 10:00-12:00, provisions from 9:30
	users := map[string]int{"ws": 4}                          // 8 cpu
	other := func(name string, start time.Time, d time.Duration, n int) types.ScheduledEvent {
		return event(name, start, d, "", line("small", n, types.MachineTypeShared))
	}
	tests := []struct {
		name   string
		ev     types.ScheduledEvent
		others []types.ScheduledEvent
		users  map[string]int
		cap    types.Resources
		ok     bool
		why    string
	}{
		{name: "fits alone", ev: ev, users: users, cap: cap16, ok: true},
		{name: "too big alone", ev: ev, users: map[string]int{"ws": 9}, cap: cap16,
			why: "scheduled event ws needs cpu 18.0 of 16.0 at 2025-06-02T09:30:00Z"},
		{name: "missing users count one", ev: ev, cap: types.Resources{CPU: 2}, ok: true},
		{name: "unknown template", ev: event("ws", evStart, h, "", line("huge", 1, "")), cap: cap16,
			why: "spec.requiredMachines[0]: machine template huge does not exist"},
		{name: "overlapping event does not fit", ev: ev, users: users, cap: cap16, others: []types.ScheduledEvent{other("a", evStart.Add(-h), 2*h, 5)},
			why: "scheduled event ws needs cpu 18.0 of 16.0 at 2025-06-02T09:30:00Z together with overlapping events a"},
		{name: "event starting inside the window", ev: ev, users: users, cap: cap16, others: []types.ScheduledEvent{other("b", evStart.Add(h), 2*h, 5)},
			why: "scheduled event ws needs cpu 18.0 of 16.0 at 2025-06-02T10:30:00Z together with overlapping events b"},
		{name: "provisioning lead of the other counts", ev: ev, users: users, cap: cap16, others: []types.ScheduledEvent{other("c", evStart.Add(2*h+20*time.Minute), h, 5)},
			why: "scheduled event ws needs cpu 18.0 of 16.0 at 2025-06-02T11:50:00Z together with overlapping events c"},
		{name: "ended before provisioning start", ev: ev, users: users, cap: cap16, others: []types.ScheduledEvent{other("d", evStart.Add(-2*h), 90*time.Minute, 5)}, ok: true},
		{name: "provisions at the end", ev: ev, users: users, cap: cap16, others: []types.ScheduledEvent{other("e", evStart.Add(150*time.Minute), h, 5)}, ok: true},
		{name: "two others that do not overlap each other", ev: ev, users: users, cap: cap16, ok: true, others: []types.ScheduledEvent{
			other("f", evStart.Add(-h), 80*time.Minute, 4), other("g", evStart.Add(h), h, 4)}},
		{name: "two others that overlap each other", ev: ev, users: users, cap: cap16, others: []types.ScheduledEvent{
			other("g", evStart.Add(h), h, 3), other("f", evStart.Add(-h), 3*h, 3)},
			why: "scheduled event ws needs cpu 20.0 of 16.0 at 2025-06-02T10:30:00Z together with overlapping events f, g"},
		{name: "the event's own old version is ignored", ev: ev, users: users, cap: cap16, others: []types.ScheduledEvent{other("ws", evStart, h, 8)}, ok: true},
		{name: "others' unknown templates count nothing", ev: ev, users: users, cap: cap16, ok: true, others: []types.ScheduledEvent{
			event("h", evStart, h, "", line("huge", 50, ""))}},
		{name: "unknown capacity dimension is not limited", ev: ev, users: users, cap: types.Resources{CPU: 8}, ok: true},
		{name: "ram", ev: ev, users: users, cap: types.Resources{CPU: 100, RAMGB: 10},
			why: "scheduled event ws needs ram GB 16.0 of 10.0 at 2025-06-02T09:30:00Z"},
		{name: "disk when known", ev: event("ws", evStart, h, "", line("big", 2, types.MachineTypeShared)), cap: types.Resources{CPU: 100, RAMGB: 100, DiskGB: 150},
			why: "scheduled event ws needs disk GB 200.0 of 150.0 at 2025-06-02T09:30:00Z"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := EventFits(tc.ev, tc.others, tc.users, tpls, tc.cap)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.why, why)
		})
	}
}

// EventSetSpec is what the event's reconcile would write back over a
// change to one of its sets: what the event decides, and the set's own
// value where the event leaves a field empty; a set it did not create is
// not its own.
func TestEventSetSpec(t *testing.T) {
	ev := event("ws", evStart, time.Hour, types.ExpireSoft, line("tpl", 2, types.MachineTypeUser))
	ev.Spec.ExpectedUsers = 3
	made := PlanEvent(evStart, ev, ev.Spec.ExpectedUsers, nil).Create
	require.Len(t, made, 1)
	set := made[0]

	spec, owned := EventSetSpec(evStart, ev, set)
	assert.True(t, owned)
	assert.Equal(t, set.Spec, spec, "as the event made it")

	scaled := set
	scaled.Spec.MinAvailable, scaled.Spec.Environment = 9, "lab"
	spec, owned = EventSetSpec(evStart, ev, scaled)
	assert.True(t, owned)
	assert.Equal(t, 6, spec.MinAvailable, "the event decides minAvailable: set back")
	assert.Equal(t, "lab", spec.Environment, "the event leaves the environment to the set")

	spec, _ = EventSetSpec(evStart.Add(2*time.Hour), ev, scaled)
	assert.Equal(t, 0, spec.MinAvailable, "a Soft event that ended keeps no warm machines")

	other := poolSet("pool", "", 1, 1)
	other.Spec.MinAvailable = 4
	spec, owned = EventSetSpec(evStart, ev, other)
	assert.False(t, owned)
	assert.Equal(t, other.Spec, spec)
}
