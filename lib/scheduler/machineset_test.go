package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// poolT0 is the fixed "now" of the pool tests.
var poolT0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

// ago is poolT0 - d.
func ago(d time.Duration) time.Time { return poolT0.Add(-d) }

func poolSet(name string, strat types.ProvisioningStrategy, minAvail, maxProv int) types.MachineSet {
	return types.MachineSet{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineSet},
		Metadata: types.ObjectMeta{Name: name},
		Spec: types.MachineSetSpec{
			AvailabilityConfiguration: types.AvailabilityConfiguration{Availability: types.AvailabilityPool},
			ProvisioningStrategy:      strat, MinAvailable: minAvail, MaxProvisioned: maxProv, MachineTemplate: "tpl",
		},
	}
}

func mach(name, set string, phase types.MachinePhase, claim string, created time.Time) types.Machine {
	return types.Machine{
		TypeMeta: types.TypeMeta{Kind: types.KindMachine},
		Metadata: types.ObjectMeta{Name: name, CreatedAt: created, UpdatedAt: created},
		Spec:     types.MachineSpec{MachineSet: set, MachineTemplate: "tpl", Node: "n1", Driver: "test", Claim: claim},
		Status:   types.MachineStatus{Phase: phase},
	}
}

// boundClaim is a claim Bound to machine since bound (zero: no Bound time).
func boundClaim(name, machine string, bound time.Time) types.MachineClaim {
	c := types.MachineClaim{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
		Metadata: types.ObjectMeta{Name: name, CreatedAt: ago(100 * time.Hour)},
		Spec:     types.MachineClaimSpec{MachineTemplate: "tpl"},
		Status:   types.MachineClaimStatus{Phase: types.ClaimBound, Machine: machine},
	}
	if !bound.IsZero() {
		c.Status.PhaseTimes = types.MakePhaseTimes(types.PhaseTime{Phase: string(types.ClaimBound), At: bound})
	}
	return c
}

func claimIn(phase types.ClaimPhase, c types.MachineClaim) types.MachineClaim {
	c.Status.Phase = phase
	return c
}

// deletions projects a plan's deletions to "machine reason claim" strings.
func deletions(p SetPlan) []string {
	var out []string
	for _, d := range p.Delete {
		out = append(out, d.Machine+" "+string(d.Reason)+" "+d.Claim)
	}
	return out
}

func TestPoolLimitsFor(t *testing.T) {
	set := poolSet("s", "", 0, 0)
	withSpec := set
	withSpec.Spec.MaxIdle, withSpec.Spec.MaxAge = types.D(time.Minute), types.D(2*time.Minute)
	cfg := PoolLimits{MaxIdle: time.Hour * 2, MaxAssigned: time.Hour * 3, ClaimGrace: time.Second}
	tests := []struct {
		name   string
		limits PoolLimits
		set    types.MachineSet
		want   PoolLimits
	}{
		{"zero limits give defaults", PoolLimits{}, set, DefaultPoolLimits()},
		{"config fills what the set leaves", cfg, set, PoolLimits{MaxIdle: 2 * time.Hour, MaxAssigned: 3 * time.Hour, MaxAge: DefaultMaxAge, ClaimGrace: time.Second}},
		{"set spec wins", cfg, withSpec, PoolLimits{MaxIdle: time.Minute, MaxAssigned: 3 * time.Hour, MaxAge: 2 * time.Minute, ClaimGrace: time.Second}},
		{"negative config ignored", PoolLimits{MaxAge: -time.Hour}, set, DefaultPoolLimits()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.limits.For(tc.set))
		})
	}
	d := DefaultPoolLimits()
	assert.Equal(t, PoolLimits{MaxIdle: time.Hour, MaxAssigned: 8 * time.Hour, MaxAge: 24 * time.Hour, ClaimGrace: time.Minute}, d)
}

func TestPlanMachineSetScaling(t *testing.T) {
	auto := types.ProvisionAutoScale
	run, prov := types.MachineRunning, types.MachineProvisioning
	recent := ago(time.Minute)
	tests := []struct {
		name      string
		set       types.MachineSet
		machines  []types.Machine
		claims    []types.MachineClaim
		create    int
		delete    []string
		prov, avl int
	}{
		{name: "empty pool fills to min", set: poolSet("s", auto, 3, 5), create: 3},
		{name: "full pool does nothing", set: poolSet("s", auto, 3, 5),
			machines: []types.Machine{mach("a", "s", run, "", recent), mach("b", "s", run, "", recent), mach("c", "s", run, "", recent)},
			prov:     3, avl: 3},
		{name: "provisioning machines count towards min but not available", set: poolSet("s", auto, 3, 5),
			machines: []types.Machine{mach("a", "s", run, "", recent), mach("b", "s", run, "", recent), mach("c", "s", prov, "", recent), mach("d", "s", "", "", recent)},
			delete:   []string{"d Surplus "}, prov: 4, avl: 2},
		{name: "claims landing grow the set up to max", set: poolSet("s", auto, 3, 5),
			machines: []types.Machine{mach("a", "s", run, "c1", recent), mach("b", "s", run, "c2", recent), mach("c", "s", run, "c3", recent)},
			claims:   []types.MachineClaim{boundClaim("c1", "a", recent), boundClaim("c2", "b", recent), boundClaim("c3", "c", recent)},
			create:   2, prov: 3},
		{name: "at max nothing is created", set: poolSet("s", auto, 3, 5),
			machines: []types.Machine{mach("a", "s", run, "c1", recent), mach("b", "s", run, "c2", recent), mach("c", "s", run, "c3", recent),
				mach("d", "s", run, "c4", recent), mach("e", "s", run, "c5", recent)},
			claims: []types.MachineClaim{boundClaim("c1", "a", recent), boundClaim("c2", "b", recent), boundClaim("c3", "c", recent),
				boundClaim("c4", "d", recent), boundClaim("c5", "e", recent)},
			prov: 5},
		{name: "no max means no cap", set: poolSet("s", auto, 2, 0),
			machines: []types.Machine{mach("a", "s", run, "c1", recent), mach("b", "s", run, "c2", recent)},
			claims:   []types.MachineClaim{boundClaim("c1", "a", recent), boundClaim("c2", "b", recent)},
			create:   2, prov: 2},
		{name: "empty strategy is AutoScale", set: poolSet("s", "", 2, 0), create: 2},
		{name: "OnDemand creates nothing ahead", set: poolSet("s", types.ProvisionOnDemand, 3, 5)},
		{name: "OnDemand keeps unclaimed machines it has", set: poolSet("s", types.ProvisionOnDemand, 0, 5),
			machines: []types.Machine{mach("a", "s", run, "", recent), mach("b", "s", run, "", recent)}, prov: 2, avl: 2},
		{name: "terminating machines count towards max", set: poolSet("s", auto, 2, 2),
			machines: []types.Machine{mach("a", "s", types.MachineTerminating, "", recent), mach("b", "s", run, "", recent)}, prov: 2, avl: 1},
		{name: "terminated machines count for nothing", set: poolSet("s", auto, 2, 2),
			machines: []types.Machine{mach("a", "s", types.MachineTerminated, "", recent), mach("b", "s", run, "", recent)}, create: 1, prov: 1, avl: 1},
		{name: "machines of other sets are ignored", set: poolSet("s", auto, 1, 1),
			machines: []types.Machine{mach("a", "other", run, "", recent), mach("b", "", run, "", recent)}, create: 1},
		{name: "scale down to min", set: poolSet("s", auto, 1, 0),
			machines: []types.Machine{mach("old", "s", run, "", ago(20*time.Hour)), mach("new", "s", run, "", ago(time.Hour)), mach("pend", "s", types.MachinePending, "", recent)},
			delete:   []string{"pend Surplus ", "old Surplus "}, prov: 3, avl: 1},
		{name: "scale to zero", set: poolSet("s", auto, 0, 0),
			machines: []types.Machine{mach("a", "s", run, "", recent), mach("b", "s", run, "c1", recent)},
			claims:   []types.MachineClaim{boundClaim("c1", "b", recent)},
			delete:   []string{"a Surplus "}, prov: 2},
		{name: "failed machine is replaced", set: poolSet("s", auto, 1, 1),
			machines: []types.Machine{mach("a", "s", types.MachineFailed, "", recent)}, delete: []string{"a Failed "}, create: 1},
		{name: "reaped machine is replaced only within max", set: poolSet("s", auto, 2, 2),
			machines: []types.Machine{mach("a", "s", run, "", ago(25*time.Hour)), mach("b", "s", run, "", recent)},
			delete:   []string{"a Stale "}, prov: 2, avl: 1},
		{name: "reaped machine is replaced at once without max", set: poolSet("s", auto, 2, 0),
			machines: []types.Machine{mach("a", "s", run, "", ago(25*time.Hour)), mach("b", "s", run, "", recent)},
			delete:   []string{"a Stale "}, create: 1, prov: 2, avl: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanMachineSet(poolT0, tc.set, tc.machines, tc.claims, nil, PoolLimits{})
			assert.Equal(t, tc.create, p.Create, "create")
			assert.Equal(t, tc.delete, deletions(p), "delete")
			assert.Equal(t, types.MachineSetStatus{Provisioned: tc.prov, Available: tc.avl}, p.Status)
		})
	}
}

func TestPlanMachineSetReaping(t *testing.T) {
	run := types.MachineRunning
	set := poolSet("s", types.ProvisionOnDemand, 0, 0) // no scaling: reaping only
	short := set
	short.Spec.MaxAge, short.Spec.MaxIdle, short.Spec.MaxAssigned = types.D(10*time.Minute), types.D(5*time.Minute), types.D(time.Hour)
	rounded := mach("m", "s", run, "c", ago(time.Hour))
	rounded.Spec.Round = 3
	otherTpl := mach("m", "s", run, "", ago(time.Minute))
	otherTpl.Spec.MachineTemplate = "old-tpl"
	otherEnv := mach("m", "s", run, "", ago(time.Minute))
	otherEnv.Spec.Environment = "lab"
	noTimes := mach("m", "s", run, "c", time.Time{})
	noTimes.Status.PhaseTimes = types.MakePhaseTimes(types.PhaseTime{Phase: string(types.MachinePending), At: ago(9 * time.Hour)})
	lost := mach("m", "s", types.MachineLost, "c", ago(time.Hour))
	lost.Status.Reason = "node n1 died"
	tests := []struct {
		name     string
		set      types.MachineSet
		m        types.Machine
		claims   []types.MachineClaim
		activity map[string]time.Time
		want     []string
		next     time.Time
		avl      int
	}{
		{name: "failed", set: set, m: mach("m", "s", types.MachineFailed, "", ago(time.Hour)), want: []string{"m Failed "}},
		{name: "lost with a claim leaves the claim to the election", set: set, m: lost,
			claims: []types.MachineClaim{boundClaim("c", "m", ago(time.Hour))}, want: []string{"m Lost "}},
		{name: "unclaimed and fresh", set: set, m: mach("m", "s", run, "", ago(time.Hour)), next: poolT0.Add(23 * time.Hour), avl: 1},
		{name: "stale at exactly max age", set: set, m: mach("m", "s", run, "", ago(24*time.Hour)), want: []string{"m Stale "}},
		{name: "stale per set spec", set: short, m: mach("m", "s", run, "", ago(11*time.Minute)), want: []string{"m Stale "}},
		{name: "stuck provisioning goes stale too", set: set, m: mach("m", "s", types.MachineProvisioning, "", ago(30*time.Hour)), want: []string{"m Stale "}},
		{name: "unknown creation time is never stale", set: set, m: mach("m", "s", run, "", time.Time{}), avl: 1},
		{name: "outdated template", set: set, m: otherTpl, want: []string{"m Outdated "}},
		{name: "outdated environment", set: set, m: otherEnv, want: []string{"m Outdated "}},
		{name: "claim terminated", set: set, m: mach("m", "s", run, "c", ago(time.Hour)),
			claims: []types.MachineClaim{claimIn(types.ClaimTerminated, boundClaim("c", "m", ago(time.Minute)))}, want: []string{"m ClaimEnded "}},
		{name: "claim failed", set: set, m: mach("m", "s", run, "c", ago(time.Hour)),
			claims: []types.MachineClaim{claimIn(types.ClaimFailed, boundClaim("c", "m", ago(time.Minute)))}, want: []string{"m ClaimEnded "}},
		{name: "claim gone after grace", set: set, m: mach("m", "s", run, "c", ago(2*time.Minute)), want: []string{"m ClaimGone "}},
		{name: "claim unknown within grace", set: set, m: mach("m", "s", run, "c", ago(20*time.Second)), next: poolT0.Add(40 * time.Second)},
		{name: "claim requested: being bound", set: set, m: mach("m", "s", types.MachinePending, "c", ago(30*time.Hour)),
			claims: []types.MachineClaim{claimIn(types.ClaimRequested, boundClaim("c", "", time.Time{}))}},
		{name: "claim bound elsewhere", set: set, m: mach("m", "s", run, "c", ago(time.Hour)),
			claims: []types.MachineClaim{boundClaim("c", "other", ago(time.Minute))}, want: []string{"m Superseded "}},
		{name: "claim record behind the machine's round", set: set, m: rounded,
			claims: []types.MachineClaim{boundClaim("c", "other", ago(time.Minute))}, next: poolT0.Add(59 * time.Minute)},
		{name: "assigned too long ends the claim", set: set, m: mach("m", "s", run, "c", ago(10*time.Hour)),
			claims:   []types.MachineClaim{boundClaim("c", "m", ago(8*time.Hour))},
			activity: map[string]time.Time{"m": ago(time.Second)}, want: []string{"m MaxAssigned c"}},
		{name: "assigned too long per set spec", set: short, m: mach("m", "s", run, "c", ago(2*time.Hour)),
			claims:   []types.MachineClaim{boundClaim("c", "m", ago(61*time.Minute))},
			activity: map[string]time.Time{"m": ago(time.Second)}, want: []string{"m MaxAssigned c"}},
		{name: "idle since bound ends the claim", set: set, m: mach("m", "s", run, "c", ago(3*time.Hour)),
			claims: []types.MachineClaim{boundClaim("c", "m", ago(time.Hour))}, want: []string{"m Idle c"}},
		{name: "idle since last activity", set: set, m: mach("m", "s", run, "c", ago(3*time.Hour)),
			claims:   []types.MachineClaim{boundClaim("c", "m", ago(2*time.Hour))},
			activity: map[string]time.Time{"m": ago(61 * time.Minute)}, want: []string{"m Idle c"}},
		{name: "recent activity keeps it, next is the idle limit", set: set, m: mach("m", "s", run, "c", ago(3*time.Hour)),
			claims:   []types.MachineClaim{boundClaim("c", "m", ago(2*time.Hour))},
			activity: map[string]time.Time{"m": ago(10 * time.Minute)}, next: poolT0.Add(50 * time.Minute)},
		{name: "next is the assigned limit when that comes first", set: set, m: mach("m", "s", run, "c", ago(9*time.Hour)),
			claims:   []types.MachineClaim{boundClaim("c", "m", ago(7*time.Hour+50*time.Minute))},
			activity: map[string]time.Time{"m": ago(time.Minute)}, next: poolT0.Add(10 * time.Minute)},
		{name: "activity older than the bind does not count", set: set, m: mach("m", "s", run, "c", ago(3*time.Hour)),
			claims:   []types.MachineClaim{boundClaim("c", "m", ago(30*time.Minute))},
			activity: map[string]time.Time{"m": ago(2 * time.Hour)}, next: poolT0.Add(30 * time.Minute)},
		{name: "no Bound time: assigned since the later creation", set: set, m: noTimes,
			claims: []types.MachineClaim{boundClaim("c", "m", time.Time{})}, activity: map[string]time.Time{"m": poolT0},
			want: []string{"m MaxAssigned c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := PlanMachineSet(poolT0, tc.set, []types.Machine{tc.m}, tc.claims, tc.activity, PoolLimits{})
			assert.Equal(t, tc.want, deletions(p))
			assert.Equal(t, tc.next, p.Next, "next")
			assert.Equal(t, tc.avl, p.Status.Available, "available")
			assert.Zero(t, p.Create)
			for _, d := range p.Delete {
				assert.NotEmpty(t, d.Message)
			}
		})
	}
}

func TestPlanMachineSetMessages(t *testing.T) {
	lost := mach("m1", "s", types.MachineLost, "", ago(time.Hour))
	lost.Status.Reason = "node n1 died"
	p := PlanMachineSet(poolT0, poolSet("s", types.ProvisionOnDemand, 0, 0), []types.Machine{
		lost,
		mach("m2", "s", types.MachineFailed, "", ago(time.Hour)),
		mach("m3", "s", types.MachineRunning, "c3", ago(10*time.Hour)),
	}, []types.MachineClaim{boundClaim("c3", "m3", ago(9*time.Hour))}, nil, PoolLimits{})
	require.Len(t, p.Delete, 3)
	assert.Equal(t, "machine m1 was lost: node n1 died", p.Delete[0].Message)
	assert.Equal(t, "machine m2 failed: no reason given", p.Delete[1].Message)
	assert.Equal(t, "claim c3 reached its maximum lifetime of 8h0m0s", p.Delete[2].Message)
}

func TestPlanMachineSetDeterministic(t *testing.T) {
	run := types.MachineRunning
	ms := []types.Machine{
		mach("e", "s", run, "", ago(time.Hour)), mach("b", "s", types.MachineFailed, "", ago(time.Hour)),
		mach("d", "s", run, "", ago(2*time.Hour)), mach("a", "s", run, "", ago(30*time.Hour)),
		mach("c", "s", run, "", ago(time.Hour)),
	}
	set := poolSet("s", types.ProvisionAutoScale, 1, 0)
	want := PlanMachineSet(poolT0, set, ms, nil, nil, PoolLimits{})
	// Reversed input gives the same plan.
	rev := make([]types.Machine, len(ms))
	for i := range ms {
		rev[len(ms)-1-i] = ms[i]
	}
	assert.Equal(t, want, PlanMachineSet(poolT0, set, rev, nil, nil, PoolLimits{}))
	// c and e are equally old: the name breaks the tie; d is older and goes first.
	assert.Equal(t, []string{"a Stale ", "b Failed ", "d Surplus ", "c Surplus "}, deletions(want))
	assert.Equal(t, 0, want.Create)
	assert.Equal(t, 1, want.Status.Available)
}

func TestDeletePriority(t *testing.T) {
	withClaim := mach("m", "s", types.MachineRunning, "c", ago(time.Hour))
	tests := []struct {
		name   string
		m      types.Machine
		maxAge time.Duration
		want   int
	}{
		{"failed", mach("m", "s", types.MachineFailed, "", ago(time.Hour)), time.Hour, PriorityMustDelete},
		{"lost", mach("m", "s", types.MachineLost, "", ago(time.Hour)), time.Hour, PriorityMustDelete},
		{"terminated", mach("m", "s", types.MachineTerminated, "", ago(time.Hour)), time.Hour, PriorityMustDelete},
		{"terminating", mach("m", "s", types.MachineTerminating, "c", ago(time.Hour)), time.Hour, PriorityMustDelete},
		{"claimed", withClaim, time.Hour, PriorityMustNotDelete},
		{"pending", mach("m", "s", types.MachinePending, "", ago(time.Hour)), time.Hour, PriorityPending},
		{"no phase yet", mach("m", "s", "", "", ago(time.Hour)), time.Hour, PriorityPending},
		{"provisioning", mach("m", "s", types.MachineProvisioning, "", ago(time.Hour)), time.Hour, PriorityProvisioning},
		{"running brand new", mach("m", "s", types.MachineRunning, "", poolT0), time.Hour, 1},
		{"running half max age", mach("m", "s", types.MachineRunning, "", ago(30*time.Minute)), time.Hour, 25},
		{"running at max age", mach("m", "s", types.MachineRunning, "", ago(time.Hour)), time.Hour, PriorityRunningMax},
		{"running past max age", mach("m", "s", types.MachineRunning, "", ago(5*time.Hour)), time.Hour, PriorityRunningMax},
		{"running, unknown age", mach("m", "s", types.MachineRunning, "", time.Time{}), time.Hour, 1},
		{"running, created in the future (skew)", mach("m", "s", types.MachineRunning, "", poolT0.Add(time.Minute)), time.Hour, 1},
		{"no max age uses the default", mach("m", "s", types.MachineRunning, "", ago(12*time.Hour)), 0, 25},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, DeletePriority(tc.m, poolT0, tc.maxAge))
		})
	}
}

func TestDeletePriorityOrdersRunningByAge(t *testing.T) {
	prev := 0
	for age := time.Duration(0); age <= 24*time.Hour; age += time.Hour {
		p := DeletePriority(mach("m", "s", types.MachineRunning, "", ago(age)), poolT0, 24*time.Hour)
		assert.GreaterOrEqual(t, p, prev, "age %s", age)
		assert.Less(t, p, PriorityProvisioning)
		prev = p
	}
}

func TestOnDemandRoom(t *testing.T) {
	od := types.ProvisionOnDemand
	run := types.MachineRunning
	tests := []struct {
		name     string
		set      types.MachineSet
		machines []types.Machine
		want     int
	}{
		{"AutoScale has no on-demand room", poolSet("s", types.ProvisionAutoScale, 0, 5), nil, 0},
		{"empty strategy is AutoScale", poolSet("s", "", 0, 5), nil, 0},
		{"no max is unlimited", poolSet("s", od, 0, 0), []types.Machine{mach("a", "s", run, "c", poolT0)}, UnlimitedRoom},
		{"room left", poolSet("s", od, 0, 3), []types.Machine{mach("a", "s", run, "c", poolT0), mach("b", "s", types.MachineTerminating, "", poolT0)}, 1},
		{"dead machines free room", poolSet("s", od, 0, 2), []types.Machine{
			mach("a", "s", types.MachineFailed, "", poolT0), mach("b", "s", types.MachineLost, "", poolT0), mach("c", "s", types.MachineTerminated, "", poolT0)}, 2},
		{"other sets do not count", poolSet("s", od, 0, 1), []types.Machine{mach("a", "x", run, "", poolT0)}, 1},
		{"full", poolSet("s", od, 0, 1), []types.Machine{mach("a", "s", types.MachinePending, "c", poolT0)}, 0},
		{"over full is zero", poolSet("s", od, 0, 1), []types.Machine{mach("a", "s", run, "c", poolT0), mach("b", "s", run, "d", poolT0)}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, OnDemandRoom(tc.set, tc.machines))
		})
	}
}

// An AutoScale set's Filled condition says what the set waits for; its
// transition time moves only when its status does; an OnDemand set has none.
func TestWithFilled(t *testing.T) {
	set := poolSet("s", types.ProvisionAutoScale, 3, 4)
	for _, tc := range []struct {
		name           string
		st             types.MachineSetStatus
		making         int
		waiting        string
		status, reason string
		message        string
	}{
		{"ready", types.MachineSetStatus{Provisioned: 4, Available: 3}, 0, "", "True", FilledReady, "3 of 3 warm machines ready"},
		{"being made", types.MachineSetStatus{Provisioned: 3, Available: 1}, 2, "", "False", FilledProvisioning, "1 of 3 warm machines ready, 2 being made"},
		{"waiting", types.MachineSetStatus{Provisioned: 1, Available: 1}, 2, "no node can take template tpl", "False", FilledWaiting,
			"1 of 3 warm machines ready, 2 being made; waiting: no node can take template tpl"},
		{"capped", types.MachineSetStatus{Provisioned: 4, Available: 1}, 0, "", "False", FilledMaxProvisioned,
			"1 of 3 warm machines ready: maxProvisioned 4 reached (4 live machines, claimed ones included)"},
	} {
		got := WithFilled(poolT0, set, tc.st, tc.making, tc.waiting)
		c := got.Conditions.Get(types.ConditionFilled)
		require.NotNil(t, c, tc.name)
		assert.Equal(t, tc.status, string(c.Status), tc.name)
		assert.Equal(t, tc.reason, c.Reason, tc.name)
		assert.Equal(t, tc.message, c.Message, tc.name)
		assert.Equal(t, poolT0, c.LastTransitionTime, tc.name)
		assert.Equal(t, tc.st.Available, got.Available, tc.name)
	}

	set.Status = WithFilled(poolT0, set, types.MachineSetStatus{Provisioned: 3, Available: 1}, 2, "")
	later := poolT0.Add(time.Minute)
	same := WithFilled(later, set, set.Status, 2, "")
	assert.Equal(t, set.Status, same, "nothing changed: the status is the same, times and all")
	moved := WithFilled(later, set, types.MachineSetStatus{Provisioned: 3, Available: 2}, 1, "")
	c := moved.Conditions.Get(types.ConditionFilled)
	assert.Equal(t, poolT0, c.LastTransitionTime, "still False")
	assert.Equal(t, later, c.LastUpdateTime)
	full := WithFilled(later, set, types.MachineSetStatus{Provisioned: 3, Available: 3}, 0, "")
	assert.Equal(t, later, full.Conditions.Get(types.ConditionFilled).LastTransitionTime, "False -> True")

	onDemand := poolSet("s", types.ProvisionOnDemand, 0, 4)
	onDemand.Status = set.Status
	assert.Nil(t, WithFilled(poolT0, onDemand, types.MachineSetStatus{}, 0, "").Conditions, "no Filled condition")
}
