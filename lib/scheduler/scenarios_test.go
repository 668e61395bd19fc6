package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// The six provisioning scenarios of the proposal's MachineRequirement, as
// an event's requiredMachines line: what the event creates, how its claims
// bind (ClaimUnderEvent), and which sets a claim may then bind in, best
// first (candidateSets).
func TestProvisioningScenarios(t *testing.T) {
	pool := poolSet("pool", "", 5, 5)
	pool.Spec.MachineTemplate = "tpl"
	p1 := poolSet("p1", "", 5, 5)
	p1.Spec.MachineTemplate = "tpl"
	created := &types.CreateMachineSet{}
	for _, sc := range []struct {
		name       string
		line       types.RequiredMachines
		creates    []string
		strategy   types.BindStrategy
		sets       []string
		candidates []string
	}{
		{"1 any existing pool, nothing created",
			types.RequiredMachines{BindStrategy: types.BindAny},
			nil, types.BindAny, nil, []string{"p1", "pool"}},
		{"2 prefer existing pools, nothing created",
			types.RequiredMachines{BindStrategy: types.BindPreferMachineSets, MachineSets: []string{"p1"}},
			nil, types.BindPreferMachineSets, []string{"p1"}, []string{"p1", "pool"}},
		{"3 require existing pools, nothing created",
			types.RequiredMachines{BindStrategy: types.BindRequireMachineSets, MachineSets: []string{"p1"}},
			nil, types.BindRequireMachineSets, []string{"p1"}, []string{"p1"}},
		{"4 any pool, a set created",
			types.RequiredMachines{BindStrategy: types.BindAny, CreateMachineSet: created},
			[]string{"ws-0"}, types.BindAny, nil, []string{"ws-0", "p1", "pool"}},
		{"5 prefer pools, a set created and auto-preferred",
			types.RequiredMachines{BindStrategy: types.BindPreferMachineSets, CreateMachineSet: created, MachineSets: []string{"p1"}},
			[]string{"ws-0"}, types.BindPreferMachineSets, []string{"p1", "ws-0"}, []string{"p1", "ws-0", "pool"}},
		{"5 prefer no existing pool, a set created and auto-preferred",
			types.RequiredMachines{BindStrategy: types.BindPreferMachineSets, CreateMachineSet: created},
			[]string{"ws-0"}, types.BindPreferMachineSets, []string{"ws-0"}, []string{"ws-0", "p1", "pool"}},
		{"6 require pools, a set created and auto-required",
			types.RequiredMachines{BindStrategy: types.BindRequireMachineSets, CreateMachineSet: created, MachineSets: []string{"p1"}},
			[]string{"ws-0"}, types.BindRequireMachineSets, []string{"p1", "ws-0"}, []string{"p1", "ws-0"}},
		{"6 require only the created set",
			types.RequiredMachines{BindStrategy: types.BindRequireMachineSets, CreateMachineSet: created},
			[]string{"ws-0"}, types.BindRequireMachineSets, []string{"ws-0"}, []string{"ws-0"}},
		{"6 require the created set, listed too: once in the claim",
			types.RequiredMachines{BindStrategy: types.BindRequireMachineSets, CreateMachineSet: created, MachineSets: []string{"ws-0", "p1"}},
			[]string{"ws-0"}, types.BindRequireMachineSets, []string{"ws-0", "p1"}, []string{"ws-0", "p1"}},
	} {
		t.Run(sc.name, func(t *testing.T) {
			sc.line.MachineTemplate, sc.line.Count, sc.line.MachineType = "tpl", 2, types.MachineTypeUser
			ev := event("ws", evStart, time.Hour, "", sc.line)
			require.NoError(t, ev.Validate())
			plan := PlanEvent(evStart.Add(time.Minute), ev, 3, []types.MachineSet{pool, p1})
			assert.Equal(t, sc.creates, setNames(plan.Create), "sets the event creates")
			sets := []types.MachineSet{pool, p1}
			sets = append(sets, plan.Create...)

			c := claimFor("alice-1", "")
			c.Spec.MachineTemplate, c.Spec.ScheduledEvent = "tpl", "ws"
			got, ok := ClaimUnderEvent(c, ev)
			require.True(t, ok)
			assert.Equal(t, sc.strategy, got.Spec.BindStrategy)
			assert.Equal(t, sc.sets, got.Spec.MachineSets)
			require.NoError(t, got.Validate())
			cands, why := candidateSets(got, sets)
			var names []string
			for _, c := range cands {
				names = append(names, c.set.Metadata.Name)
			}
			assert.Equal(t, sc.candidates, names, why)
		})
	}
	t.Run("a claim's own strategy stands", func(t *testing.T) {
		ev := event("ws", evStart, time.Hour, "", types.RequiredMachines{MachineTemplate: "tpl", Count: 1, BindStrategy: types.BindRequireMachineSets, MachineSets: []string{"p1"}})
		c := claimFor("alice-1", "")
		c.Spec.MachineTemplate, c.Spec.BindStrategy = "tpl", types.BindAny
		got, ok := ClaimUnderEvent(c, ev)
		assert.True(t, ok)
		assert.Equal(t, types.BindAny, got.Spec.BindStrategy)
		other := claimFor("x", "")
		other.Spec.MachineTemplate = "other"
		_, ok = ClaimUnderEvent(other, ev)
		assert.False(t, ok, "no line for the claim's template")
	})
}

// A shared claim goes to the least used running shared machine of its
// line's set; machines being reaped, lost, not running or not Shared are
// never chosen.
func TestChooseShared(t *testing.T) {
	m := func(name string, phase types.MachinePhase, mt types.MachineType) types.Machine {
		return types.Machine{Metadata: types.ObjectMeta{Name: name}, Spec: types.MachineSpec{MachineType: mt, Node: "n1"}, Status: types.MachineStatus{Phase: phase}}
	}
	reaped := m("a-reaped", types.MachineRunning, types.MachineTypeShared)
	reaped.Status.Reap = &types.MachineRequest{Reason: "Stale"}
	ms := []types.Machine{reaped, m("b", types.MachineRunning, types.MachineTypeShared), m("c", types.MachineRunning, types.MachineTypeShared),
		m("d-pending", types.MachinePending, types.MachineTypeShared), m("e-user", types.MachineRunning, types.MachineTypeUser)}
	got, _ := ChooseShared("ev", "ev-0", ms, map[string]int{"b": 2, "c": 1})
	assert.Equal(t, "c", got)
	got, _ = ChooseShared("ev", "ev-0", ms, map[string]int{"b": 1, "c": 1})
	assert.Equal(t, "b", got, "ties by name")
	got, why := ChooseShared("ev", "ev-0", ms[3:], nil)
	assert.Empty(t, got)
	assert.Equal(t, "waiting for the shared machines of scheduled event ev (machine set ev-0 has none running yet)", why)

	ev := event("ev", evStart, time.Hour, "", types.RequiredMachines{MachineTemplate: "tpl", Count: 2, MachineType: types.MachineTypeShared, CreateMachineSet: &types.CreateMachineSet{}})
	require.NoError(t, ev.Validate())
	i, shared := SharedLine(claimFor("c", ""), ev)
	assert.True(t, shared)
	assert.Equal(t, 0, i)
	plan := PlanEvent(evStart, ev, 5, nil)
	require.Len(t, plan.Create, 1)
	assert.Equal(t, 2, plan.Create[0].Spec.MaxProvisioned, "count machines per event, whatever the users")
	assert.Equal(t, "Shared", plan.Create[0].Metadata.Annotations[AnnotationMachineType])
	ev.Spec.RequiredMachines[0].CreateMachineSet = nil
	assert.ErrorContains(t, ev.Validate(), "createMachineSet: is required for Shared machines")
}
