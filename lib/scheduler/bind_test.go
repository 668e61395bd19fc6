package scheduler

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func reservedSet(name string, typ types.AvailabilityType, value string, strat types.ProvisioningStrategy, maxProv int) types.MachineSet {
	s := poolSet(name, strat, 0, maxProv)
	s.Spec.AvailabilityConfiguration = types.AvailabilityConfiguration{Availability: typ, Value: value}
	return s
}

func claimFor(name string, strat types.BindStrategy, sets ...string) types.MachineClaim {
	return types.MachineClaim{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
		Metadata: types.ObjectMeta{Name: name},
		Spec:     types.MachineClaimSpec{MachineTemplate: "tpl", BindStrategy: strat, MachineSets: sets},
	}
}

// withCode is c as the API leaves a claim that presented the secret of
// access code object code.
func withCode(c types.MachineClaim, code string) types.MachineClaim {
	c.Spec.AccessCode = "secret-of-" + code
	c.Metadata.Labels = map[string]string{types.LabelAccessCode: code}
	return c
}

func withEvent(c types.MachineClaim, ev string) types.MachineClaim {
	c.Spec.ScheduledEvent = ev
	return c
}

func ready(name, set string) types.Machine {
	return mach(name, set, types.MachineRunning, "", ago(time.Hour))
}

func TestSetServes(t *testing.T) {
	inEnv := poolSet("s", "", 0, 0)
	inEnv.Spec.Environment = "lab"
	otherTpl := poolSet("s", "", 0, 0)
	otherTpl.Spec.MachineTemplate = "big"
	envClaim := claimFor("c", "")
	envClaim.Spec.Environment = "lab"
	envClaim2 := envClaim
	envClaim2.Spec.Environment = "cloud"
	tests := []struct {
		name  string
		claim types.MachineClaim
		set   types.MachineSet
		ok    bool
		why   string
	}{
		{"pool serves anyone", claimFor("c", ""), poolSet("s", "", 0, 0), true, ""},
		{"other template", claimFor("c", ""), otherTpl, false, "machine set s is for template big, not tpl"},
		{"same environment", envClaim, inEnv, true, ""},
		{"set in any environment", envClaim, poolSet("s", "", 0, 0), true, ""},
		{"claim in any environment", claimFor("c", ""), inEnv, true, ""},
		{"other environment", envClaim2, inEnv, false, "machine set s is in environment lab, not cloud"},
		{"access code held", withCode(claimFor("c", ""), "k1"), reservedSet("s", types.AvailabilityAccessCode, "k1", "", 0), true, ""},
		{"access code missing", claimFor("c", ""), reservedSet("s", types.AvailabilityAccessCode, "k1", "", 0), false, "machine set s is reserved for an access code (present one that grants it in spec.accessCode)"},
		{"other access code", withCode(claimFor("c", ""), "k2"), reservedSet("s", types.AvailabilityAccessCode, "k1", "", 0), false, "machine set s is reserved for an access code (present one that grants it in spec.accessCode)"},
		{"event matches", withEvent(claimFor("c", ""), "ev"), reservedSet("s", types.AvailabilityScheduledEvent, "ev", "", 0), true, ""},
		{"not under the event", claimFor("c", ""), reservedSet("s", types.AvailabilityScheduledEvent, "ev", "", 0), false, "machine set s is reserved for a scheduled event (claim under that event in spec.scheduledEvent)"},
		{"unknown availability", claimFor("c", ""), reservedSet("s", "Secret", "x", "", 0), false, `machine set s has unknown availability "Secret"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := SetServes(tc.claim, tc.set)
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.why, why)
		})
	}
}

// A claim's status, which its user reads, says a set is reserved and how to
// get in, never which access code or scheduled event it is reserved for.
func TestSetServesNamesNoCodeOrEvent(t *testing.T) {
	for _, tc := range []struct {
		name  string
		claim types.MachineClaim
		set   types.MachineSet
		hint  string
	}{
		{"no code", claimFor("c", ""), reservedSet("pool", types.AvailabilityAccessCode, "admcode", "", 0), "spec.accessCode"},
		{"another code", withCode(claimFor("c", ""), "mycode"), reservedSet("pool", types.AvailabilityAccessCode, "admcode", "", 0), "spec.accessCode"},
		{"no event", claimFor("c", ""), reservedSet("pool", types.AvailabilityScheduledEvent, "wsevent", "", 0), "spec.scheduledEvent"},
		{"another event", withEvent(claimFor("c", ""), "myevent"), reservedSet("pool", types.AvailabilityScheduledEvent, "wsevent", "", 0), "spec.scheduledEvent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := SetServes(tc.claim, tc.set)
			require.False(t, ok)
			assert.NotContains(t, why, tc.set.Spec.AvailabilityConfiguration.Value)
			assert.Contains(t, why, "machine set pool is reserved")
			assert.Contains(t, why, tc.hint, "says how to get in")
			tc.claim.Spec.BindStrategy, tc.claim.Spec.MachineSets = types.BindRequireMachineSets, []string{"pool"}
			_, _, _, reason := ChooseMachine(tc.claim, []types.MachineSet{tc.set}, []types.Machine{ready("p1", "pool")}, poolT0, PoolLimits{})
			assert.NotContains(t, reason, tc.set.Spec.AvailabilityConfiguration.Value)
		})
	}
}

func TestChooseMachine(t *testing.T) {
	anyB, prefer, req := types.BindAny, types.BindPreferMachineSets, types.BindRequireMachineSets
	pa, pb, pc := poolSet("a", "", 0, 0), poolSet("b", "", 0, 0), poolSet("c", "", 0, 0)
	evSet := reservedSet("e", types.AvailabilityScheduledEvent, "ev", "", 0)
	codeSet := reservedSet("k", types.AvailabilityAccessCode, "code1", "", 0)
	bigSet := poolSet("big", "", 0, 0)
	bigSet.Spec.MachineTemplate = "big"
	outdated := ready("a2", "a")
	outdated.Spec.MachineTemplate = "old"
	elsewhere := ready("a3", "a")
	elsewhere.Spec.Environment = "cloud"
	staleLab := mach("a1", "a", types.MachineRunning, "", ago(25*time.Hour))
	staleLab.Spec.Environment = "lab"
	envClaim := claimFor("c1", anyB)
	envClaim.Spec.Environment = "lab"
	tests := []struct {
		name     string
		claim    types.MachineClaim
		sets     []types.MachineSet
		machines []types.Machine
		machine  string // "" when none
		reason   string
	}{
		{name: "ready pool machine", claim: claimFor("c1", ""), sets: []types.MachineSet{pa}, machines: []types.Machine{ready("a1", "a")}, machine: "a1"},
		{name: "no sets", claim: claimFor("c1", anyB), reason: "no machine set serves template tpl"},
		{name: "no set of the template", claim: claimFor("c1", anyB), sets: []types.MachineSet{bigSet}, machines: []types.Machine{ready("x", "big")},
			reason: "no machine set serves template tpl"},
		{name: "nothing ready", claim: claimFor("c1", anyB), sets: []types.MachineSet{pa, pb}, machines: []types.Machine{
			mach("a1", "a", types.MachineRunning, "other", ago(time.Hour)), mach("b1", "b", types.MachineProvisioning, "", ago(time.Minute)),
			mach("b2", "b", types.MachinePending, "", ago(time.Minute)), mach("b3", "b", types.MachineTerminating, "", ago(time.Hour)),
			mach("b4", "b", types.MachineFailed, "", ago(time.Hour)), mach("b5", "b", types.MachineLost, "", ago(time.Hour))},
			reason: "no ready machine in machine sets a, b (1 claimed, 2 provisioning, 1 terminating)"},
		{name: "stale, outdated and elsewhere machines are skipped", claim: envClaim, sets: []types.MachineSet{pa}, machines: []types.Machine{
			staleLab, outdated, elsewhere},
			reason: "no ready machine in machine sets a (1 other environment, 1 other template, 1 stale)"},
		{name: "machines of unknown sets are ignored", claim: claimFor("c1", anyB), sets: []types.MachineSet{pa}, machines: []types.Machine{ready("z1", "zz")},
			reason: "no ready machine in machine sets a"},
		{name: "any takes the pool", claim: claimFor("c1", anyB, "b"), sets: []types.MachineSet{pa, pb}, machines: []types.Machine{ready("a1", "a")}, machine: "a1"},
		{name: "prefer takes the listed set first", claim: claimFor("c1", prefer, "b"), sets: []types.MachineSet{pa, pb},
			machines: []types.Machine{ready("a1", "a"), ready("a2", "a"), ready("b1", "b")}, machine: "b1"},
		{name: "prefer follows list order", claim: claimFor("c1", prefer, "c", "b"), sets: []types.MachineSet{pa, pb, pc},
			machines: []types.Machine{ready("b1", "b"), ready("c1", "c")}, machine: "c1"},
		{name: "prefer falls back to other sets", claim: claimFor("c1", prefer, "b"), sets: []types.MachineSet{pa, pb},
			machines: []types.Machine{ready("a1", "a"), mach("b1", "b", types.MachineRunning, "x", ago(time.Hour))}, machine: "a1"},
		{name: "require takes only listed sets", claim: claimFor("c1", req, "b"), sets: []types.MachineSet{pa, pb},
			machines: []types.Machine{ready("a1", "a")}, reason: "no ready machine in machine sets b"},
		{name: "require of a missing set", claim: claimFor("c1", req, "b"), sets: []types.MachineSet{pa},
			machines: []types.Machine{ready("a1", "a")}, reason: "none of the required machine sets b serves the claim: machine set b does not exist"},
		{name: "require of a set for another template", claim: claimFor("c1", req, "big"), sets: []types.MachineSet{bigSet},
			reason: "none of the required machine sets big serves the claim: machine set big is for template big, not tpl"},
		{name: "require of a reserved set without the event", claim: claimFor("c1", req, "e"), sets: []types.MachineSet{evSet},
			machines: []types.Machine{ready("e1", "e")}, reason: "none of the required machine sets e serves the claim: machine set e is reserved for a scheduled event (claim under that event in spec.scheduledEvent)"},
		{name: "event set before the public pool", claim: withEvent(claimFor("c1", anyB), "ev"), sets: []types.MachineSet{pa, evSet},
			machines: []types.Machine{ready("a1", "a"), ready("e1", "e")}, machine: "e1"},
		{name: "code set before the public pool", claim: withCode(claimFor("c1", ""), "code1"), sets: []types.MachineSet{pa, codeSet},
			machines: []types.Machine{ready("a1", "a"), ready("k1", "k")}, machine: "k1"},
		{name: "reserved set of another code is not used", claim: withCode(claimFor("c1", ""), "code2"), sets: []types.MachineSet{pa, codeSet},
			machines: []types.Machine{ready("a1", "a"), ready("k1", "k")}, machine: "a1"},
		{name: "listed set before a reserved one", claim: withEvent(claimFor("c1", prefer, "a"), "ev"), sets: []types.MachineSet{pa, evSet},
			machines: []types.Machine{ready("a1", "a"), ready("e1", "e")}, machine: "a1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, set, ok, reason := ChooseMachine(tc.claim, tc.sets, tc.machines, poolT0, PoolLimits{})
			assert.Equal(t, tc.machine != "", ok)
			assert.Equal(t, tc.machine, m)
			assert.Equal(t, tc.reason, reason)
			if ok {
				assert.Equal(t, m[:1], set, "set of the machine")
			} else {
				assert.Empty(t, set)
			}
		})
	}
}

func TestChooseMachineSpecMaxAge(t *testing.T) {
	s := poolSet("a", "", 0, 0)
	s.Spec.MaxAge = types.D(30 * time.Minute)
	_, _, ok, reason := ChooseMachine(claimFor("c", ""), []types.MachineSet{s}, []types.Machine{ready("a1", "a")}, poolT0, PoolLimits{})
	assert.False(t, ok)
	assert.Equal(t, "no ready machine in machine sets a (1 stale)", reason)
	// Config limits apply when the set says nothing.
	_, _, ok, _ = ChooseMachine(claimFor("c", ""), []types.MachineSet{poolSet("a", "", 0, 0)}, []types.Machine{ready("a1", "a")}, poolT0, PoolLimits{MaxAge: time.Minute})
	assert.False(t, ok)
}

func TestChooseMachineDeterministicAndSpread(t *testing.T) {
	sets := []types.MachineSet{poolSet("a", "", 0, 0), poolSet("b", "", 0, 0)}
	var ms []types.Machine
	for i := range 10 {
		ms = append(ms, ready(fmt.Sprintf("m%02d", i), sets[i%2].Metadata.Name))
	}
	rev := make([]types.Machine, len(ms))
	for i := range ms {
		rev[len(ms)-1-i] = ms[i]
	}
	revSets := []types.MachineSet{sets[1], sets[0]}
	picked := map[string]int{}
	for i := range 50 {
		c := claimFor(fmt.Sprintf("claim-%d", i), types.BindAny)
		m, _, ok, _ := ChooseMachine(c, sets, ms, poolT0, PoolLimits{})
		require.True(t, ok)
		m2, _, _, _ := ChooseMachine(c, revSets, rev, poolT0, PoolLimits{})
		assert.Equal(t, m, m2, "order of input does not matter")
		picked[m]++
	}
	// Claims racing for one pool ask for different machines.
	assert.GreaterOrEqual(t, len(picked), 8, "picks %v", picked)
}

// TestPoolRace plays acceptance 2 on the pure functions: 50 claims race for a
// set of 10 ready machines. Each round every pending claim decides on the same
// snapshot (as electors on different nodes would); the host then marks
// machines claimed in arrival order under its lock, and a claim whose machine
// was taken decides again next round. Exactly 10 bind to pool machines, none
// twice, and the rest go per strategy.
func TestPoolRace(t *testing.T) {
	set := []types.MachineSet{poolSet("pool", types.ProvisionAutoScale, 10, 10)}
	var ms []types.Machine
	for i := range 10 {
		ms = append(ms, ready(fmt.Sprintf("m%d", i), "pool"))
	}
	var pending []types.MachineClaim
	for i := range 50 {
		strat := types.BindAny
		if i%2 == 1 {
			strat = types.BindRequireMachineSets
		}
		pending = append(pending, claimFor(fmt.Sprintf("c%d", i), strat, "pool"))
	}
	owner := map[string]string{}
	kinds := map[BindKind]int{}
	rounds := 0
	for len(pending) > 0 {
		rounds++
		require.LessOrEqual(t, rounds, 11, "the race settles")
		decisions := make([]BindDecision, len(pending))
		for i, c := range pending {
			decisions[i] = DecideBind(c, set, ms, poolT0, PoolLimits{})
		}
		var next []types.MachineClaim
		for i, c := range pending {
			d := decisions[i]
			if d.Kind != BindPool {
				kinds[d.Kind]++
				continue
			}
			k := slices.IndexFunc(ms, func(m types.Machine) bool { return m.Metadata.Name == d.Machine })
			require.GreaterOrEqual(t, k, 0)
			if ms[k].Spec.Claim != "" { // taken: the host declines
				next = append(next, c)
				continue
			}
			ms[k].Spec.Claim = c.Metadata.Name
			require.Empty(t, owner[d.Machine], "machine bound twice")
			owner[d.Machine] = c.Metadata.Name
			kinds[BindPool]++
		}
		pending = next
	}
	assert.Len(t, owner, 10)
	assert.Equal(t, 10, kinds[BindPool])
	assert.Equal(t, 50, kinds[BindPool]+kinds[BindElect]+kinds[BindWait])
	assert.Positive(t, kinds[BindWait], "required claims wait for the refill")
	assert.Positive(t, kinds[BindElect], "Any claims are elected directly")
	assert.Greater(t, rounds, 1, "claims did collide")
}

func TestFallbackOnDemand(t *testing.T) {
	od := types.ProvisionOnDemand
	full := poolSet("full", od, 0, 1)
	roomy := poolSet("roomy", od, 0, 3)
	zed := poolSet("zed", od, 0, 0)
	evOD := reservedSet("ev-od", types.AvailabilityScheduledEvent, "ev", od, 0)
	auto := poolSet("auto", types.ProvisionAutoScale, 1, 0)
	used := []types.Machine{mach("f1", "full", types.MachineRunning, "x", ago(time.Hour))}
	tests := []struct {
		name   string
		claim  types.MachineClaim
		sets   []types.MachineSet
		set    string
		reason string
	}{
		{"set with room", claimFor("c", ""), []types.MachineSet{full, roomy}, "roomy", ""},
		{"by name within a tier", claimFor("c", ""), []types.MachineSet{zed, roomy}, "roomy", ""},
		{"all full", claimFor("c", ""), []types.MachineSet{full}, "", "OnDemand machine sets full are at their maxProvisioned"},
		{"AutoScale sets are not on-demand", claimFor("c", ""), []types.MachineSet{auto}, "", "no OnDemand machine set serves template tpl"},
		{"no sets", claimFor("c", ""), nil, "", "no machine set serves template tpl"},
		{"require keeps to the list", claimFor("c", types.BindRequireMachineSets, "full"), []types.MachineSet{full, roomy}, "",
			"OnDemand machine sets full are at their maxProvisioned"},
		{"prefer takes the listed set first", claimFor("c", types.BindPreferMachineSets, "zed"), []types.MachineSet{roomy, zed}, "zed", ""},
		{"reserved before public", withEvent(claimFor("c", ""), "ev"), []types.MachineSet{roomy, evOD}, "ev-od", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set, ok, reason := FallbackOnDemand(tc.claim, tc.sets, used)
			assert.Equal(t, tc.set != "", ok)
			assert.Equal(t, tc.set, set)
			assert.Equal(t, tc.reason, reason)
		})
	}
}

func TestDirectElectionAllowed(t *testing.T) {
	tests := []struct {
		strat types.BindStrategy
		ok    bool
		why   string
	}{
		{"", true, ""},
		{types.BindAny, true, ""},
		{types.BindPreferMachineSets, true, ""},
		{types.BindRequireMachineSets, false, "bindStrategy RequireMachineSets allows only machine sets a, b"},
	}
	for _, tc := range tests {
		t.Run(string(tc.strat), func(t *testing.T) {
			ok, why := DirectElectionAllowed(claimFor("c", tc.strat, "a", "b"))
			assert.Equal(t, tc.ok, ok)
			assert.Equal(t, tc.why, why)
		})
	}
}

func TestDecideBind(t *testing.T) {
	pool := poolSet("a", types.ProvisionAutoScale, 1, 0)
	od := poolSet("o", types.ProvisionOnDemand, 0, 0)
	busy := []types.Machine{mach("a1", "a", types.MachineRunning, "x", ago(time.Hour))}
	tests := []struct {
		name     string
		claim    types.MachineClaim
		sets     []types.MachineSet
		machines []types.Machine
		want     BindDecision
	}{
		{"pool first", claimFor("c", ""), []types.MachineSet{pool, od}, []types.Machine{ready("a2", "a")},
			BindDecision{Kind: BindPool, Machine: "a2", Set: "a"}},
		{"then on demand", claimFor("c", ""), []types.MachineSet{pool, od}, busy,
			BindDecision{Kind: BindOnDemand, Set: "o", Reason: "no ready machine in machine sets a, o (1 claimed)"}},
		{"then direct election", claimFor("c", ""), []types.MachineSet{pool}, busy,
			BindDecision{Kind: BindElect, Reason: "no ready machine in machine sets a (1 claimed); no OnDemand machine set serves template tpl"}},
		{"no sets at all: election", claimFor("c", ""), nil, nil,
			BindDecision{Kind: BindElect, Reason: "no machine set serves template tpl"}},
		{"required set full: wait", claimFor("c", types.BindRequireMachineSets, "a"), []types.MachineSet{pool, od}, busy,
			BindDecision{Kind: BindWait, Reason: "no ready machine in machine sets a (1 claimed); no OnDemand machine set serves template tpl; bindStrategy RequireMachineSets allows only machine sets a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, DecideBind(tc.claim, tc.sets, tc.machines, poolT0, PoolLimits{}))
		})
	}
}
