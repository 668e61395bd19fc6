package types_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// validateCase is one object and the field its Validate must name ("" = valid).
type validateCase struct {
	name  string
	obj   types.Object
	field string
}

// runValidate checks every case: valid objects pass; invalid ones return a
// *FieldError naming the field that wraps ErrInvalid.
func runValidate(t *testing.T, cases []validateCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.obj.Validate()
			if tc.field == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, types.ErrInvalid)
			var fe *types.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.field, fe.Field, "error: %v", err)
			assert.True(t, strings.HasPrefix(err.Error(), tc.field+": "), "message %q names the field", err.Error())
		})
	}
}

func meta(name string) types.ObjectMeta { return types.ObjectMeta{Name: name} }

// setNames returns n distinct machine set names.
func setNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("set-%d", i)
	}
	return out
}

func TestValidateNode(t *testing.T) {
	valid := func(f func(*types.Node)) *types.Node {
		o := &types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: meta("n1"),
			Spec: types.NodeSpec{Drivers: []types.NodeDriver{{Name: "test", Driver: "test"}, {Name: "docker", Driver: "docker"}}}}
		if f != nil {
			f(o)
		}
		return o
	}
	runValidate(t, []validateCase{
		{"valid", valid(nil), ""},
		{"no drivers is valid", valid(func(o *types.Node) { o.Spec.Drivers = nil }), ""},
		{"wrong kind", valid(func(o *types.Node) { o.Kind = types.KindMachine }), "kind"},
		{"missing kind", valid(func(o *types.Node) { o.Kind = "" }), "kind"},
		{"missing name", valid(func(o *types.Node) { o.Metadata.Name = "" }), "metadata.name"},
		{"bad label key", valid(func(o *types.Node) { o.Metadata.Labels = map[string]string{"-zone": "a"} }), "metadata.labels.-zone"},
		{"bad label value", valid(func(o *types.Node) { o.Metadata.Labels = map[string]string{"zone": "a b"} }), "metadata.labels.zone"},
		{"driver without name", valid(func(o *types.Node) { o.Spec.Drivers[1].Name = "" }), "spec.drivers[1].name"},
	})
}

func TestValidateProvider(t *testing.T) {
	runValidate(t, []validateCase{
		{"valid", &types.Provider{TypeMeta: types.TypeMeta{Kind: types.KindProvider}, Metadata: meta("docker")}, ""},
		{"wrong kind", &types.Provider{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: meta("docker")}, "kind"},
		{"upper-case name", &types.Provider{TypeMeta: types.TypeMeta{Kind: types.KindProvider}, Metadata: meta("Docker")}, "metadata.name"},
	})
}

func TestValidateEnvironment(t *testing.T) {
	valid := func(f func(*types.Environment)) *types.Environment {
		o := &types.Environment{TypeMeta: types.TypeMeta{Kind: types.KindEnvironment}, Metadata: meta("lab"),
			Spec: types.EnvironmentSpec{Provider: "docker", Capacity: map[string]int{"t": 3},
				NodeSelector: map[string]string{"zone": "a"}, Placement: types.PlacementSpread}}
		if f != nil {
			f(o)
		}
		return o
	}
	runValidate(t, []validateCase{
		{"valid", valid(nil), ""},
		{"pack", valid(func(o *types.Environment) { o.Spec.Placement = types.PlacementPack }), ""},
		{"no placement", valid(func(o *types.Environment) { o.Spec.Placement = "" }), ""},
		{"wrong kind", valid(func(o *types.Environment) { o.Kind = types.KindProvider }), "kind"},
		{"bad name", valid(func(o *types.Environment) { o.Metadata.Name = "lab_1" }), "metadata.name"},
		{"no provider", valid(func(o *types.Environment) { o.Spec.Provider = "" }), "spec.provider"},
		{"bad placement", valid(func(o *types.Environment) { o.Spec.Placement = "random" }), "spec.placement"},
		{"negative capacity", valid(func(o *types.Environment) { o.Spec.Capacity["t"] = -1 }), "spec.capacity.t"},
		{"bad selector", valid(func(o *types.Environment) { o.Spec.NodeSelector = map[string]string{"zone!": "a"} }), "spec.nodeSelector.zone!"},
	})
}

func TestValidateMachineTemplate(t *testing.T) {
	valid := func(f func(*types.MachineTemplate)) *types.MachineTemplate {
		o := &types.MachineTemplate{TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate}, Metadata: meta("ubuntu"),
			Spec: types.MachineTemplateSpec{
				MachineType: types.MachineTypeUser, Resources: types.Resources{CPU: 2, RAMGB: 4, DiskGB: 20},
				ProviderConfiguration: map[string]json.RawMessage{"docker": json.RawMessage(`{"image":"ubuntu"}`), "test": nil},
				OnNodeLoss:            types.LostRebind,
			}}
		if f != nil {
			f(o)
		}
		return o
	}
	runValidate(t, []validateCase{
		{"valid", valid(nil), ""},
		{"shared, fail on loss", valid(func(o *types.MachineTemplate) {
			o.Spec.MachineType, o.Spec.OnNodeLoss = types.MachineTypeShared, types.LostFail
		}), ""},
		{"zero resources", valid(func(o *types.MachineTemplate) { o.Spec.Resources = types.Resources{} }), ""},
		{"wrong kind", valid(func(o *types.MachineTemplate) { o.Kind = types.KindMachine }), "kind"},
		{"bad name", valid(func(o *types.MachineTemplate) { o.Metadata.Name = "-ubuntu" }), "metadata.name"},
		{"bad machine type", valid(func(o *types.MachineTemplate) { o.Spec.MachineType = "Big" }), "spec.machineType"},
		{"bad lost policy", valid(func(o *types.MachineTemplate) { o.Spec.OnNodeLoss = "Retry" }), "spec.onNodeLoss"},
		{"negative cpu", valid(func(o *types.MachineTemplate) { o.Spec.Resources.CPU = -1 }), "spec.resources.cpu"},
		{"NaN ram", valid(func(o *types.MachineTemplate) { o.Spec.Resources.RAMGB = math.NaN() }), "spec.resources.ramGB"},
		{"absurd cpu", valid(func(o *types.MachineTemplate) { o.Spec.Resources.CPU = 1e308 }), "spec.resources.cpu"},
		{"disk past the cap", valid(func(o *types.MachineTemplate) { o.Spec.Resources.DiskGB = types.MaxResourceAmount + 1 }), "spec.resources.diskGB"},
		{"infinite disk", valid(func(o *types.MachineTemplate) { o.Spec.Resources.DiskGB = math.Inf(1) }), "spec.resources.diskGB"},
		{"no providers", valid(func(o *types.MachineTemplate) { o.Spec.ProviderConfiguration = nil }), "spec.providerConfiguration"},
		{"empty provider name", valid(func(o *types.MachineTemplate) {
			o.Spec.ProviderConfiguration = map[string]json.RawMessage{"": nil}
		}), "spec.providerConfiguration"},
		{"bad provider JSON", valid(func(o *types.MachineTemplate) {
			o.Spec.ProviderConfiguration["docker"] = json.RawMessage(`{"image":`)
		}), "spec.providerConfiguration.docker"},
	})
}

func TestValidateMachineSet(t *testing.T) {
	valid := func(f func(*types.MachineSet)) *types.MachineSet {
		o := &types.MachineSet{TypeMeta: types.TypeMeta{Kind: types.KindMachineSet}, Metadata: meta("pool"),
			Spec: types.MachineSetSpec{
				AvailabilityConfiguration: types.AvailabilityConfiguration{Availability: types.AvailabilityPool},
				ProvisioningStrategy:      types.ProvisionAutoScale, MinAvailable: 2, MaxProvisioned: 5,
				MachineTemplate: "ubuntu", Environment: "lab", MaxIdle: types.D(time.Hour),
			}}
		if f != nil {
			f(o)
		}
		return o
	}
	runValidate(t, []validateCase{
		{"valid", valid(nil), ""},
		{"access code with value", valid(func(o *types.MachineSet) {
			o.Spec.AvailabilityConfiguration = types.AvailabilityConfiguration{Availability: types.AvailabilityAccessCode, Value: "code1"}
		}), ""},
		{"no max", valid(func(o *types.MachineSet) { o.Spec.MaxProvisioned = 0; o.Spec.MinAvailable = 10 }), ""},
		{"on demand", valid(func(o *types.MachineSet) { o.Spec.ProvisioningStrategy = types.ProvisionOnDemand }), ""},
		{"wrong kind", valid(func(o *types.MachineSet) { o.Kind = types.KindMachine }), "kind"},
		{"bad name", valid(func(o *types.MachineSet) { o.Metadata.Name = "Pool" }), "metadata.name"},
		{"no availability", valid(func(o *types.MachineSet) { o.Spec.AvailabilityConfiguration.Availability = "" }), "spec.availabilityConfiguration.availability"},
		{"event without value", valid(func(o *types.MachineSet) {
			o.Spec.AvailabilityConfiguration.Availability = types.AvailabilityScheduledEvent
		}), "spec.availabilityConfiguration.value"},
		{"bad strategy", valid(func(o *types.MachineSet) { o.Spec.ProvisioningStrategy = "Eager" }), "spec.provisioningStrategy"},
		{"negative min", valid(func(o *types.MachineSet) { o.Spec.MinAvailable = -1 }), "spec.minAvailable"},
		{"negative max", valid(func(o *types.MachineSet) { o.Spec.MaxProvisioned = -1 }), "spec.maxProvisioned"},
		{"min above max", valid(func(o *types.MachineSet) { o.Spec.MinAvailable = 6 }), "spec.minAvailable"},
		{"no template", valid(func(o *types.MachineSet) { o.Spec.MachineTemplate = "" }), "spec.machineTemplate"},
		{"negative max idle", valid(func(o *types.MachineSet) { o.Spec.MaxIdle = types.D(-time.Second) }), "spec.maxIdle"},
		{"negative max assigned", valid(func(o *types.MachineSet) { o.Spec.MaxAssigned = types.D(-time.Second) }), "spec.maxAssigned"},
		{"negative max age", valid(func(o *types.MachineSet) { o.Spec.MaxAge = types.D(-time.Second) }), "spec.maxAge"},
		{"bad environment", valid(func(o *types.MachineSet) { o.Spec.Environment = "Lab" }), "spec.environment"},
	})
}

func TestValidateMachine(t *testing.T) {
	valid := func(f func(*types.Machine)) *types.Machine {
		o := &types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: meta("m1"),
			Spec:   types.MachineSpec{MachineTemplate: "ubuntu", Node: "n1", Driver: "test/big", MachineSet: "pool", Claim: "c1", Round: 3},
			Status: types.MachineStatus{Phase: types.MachineRunning}}
		if f != nil {
			f(o)
		}
		return o
	}
	runValidate(t, []validateCase{
		{"valid", valid(nil), ""},
		{"lost", valid(func(o *types.Machine) { o.Status.Phase = types.MachineLost }), ""},
		{"no phase", valid(func(o *types.Machine) { o.Status.Phase = "" }), ""},
		{"wrong kind", valid(func(o *types.Machine) { o.Kind = types.KindMachineClaim }), "kind"},
		{"bad name", valid(func(o *types.Machine) { o.Metadata.Name = "m.1" }), "metadata.name"},
		{"no template", valid(func(o *types.Machine) { o.Spec.MachineTemplate = "" }), "spec.machineTemplate"},
		{"no node: an outside provider's machine", valid(func(o *types.Machine) { o.Spec.Node, o.Spec.Driver = "", "" }), ""},
		{"bad node", valid(func(o *types.Machine) { o.Spec.Node = "N1" }), "spec.node"},
		{"no driver", valid(func(o *types.Machine) { o.Spec.Driver = "" }), "spec.driver"},
		{"bad set", valid(func(o *types.Machine) { o.Spec.MachineSet = "Pool" }), "spec.machineSet"},
		{"bad environment", valid(func(o *types.Machine) { o.Spec.Environment = "-lab" }), "spec.environment"},
		{"bad claim", valid(func(o *types.Machine) { o.Spec.Claim = "c_1" }), "spec.claim"},
		{"bad phase", valid(func(o *types.Machine) { o.Status.Phase = "Exploded" }), "status.phase"},
	})
}

func TestValidateMachineClaim(t *testing.T) {
	valid := func(f func(*types.MachineClaim)) *types.MachineClaim {
		o := &types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim}, Metadata: meta("c1"),
			Spec: types.MachineClaimSpec{MachineTemplate: "ubuntu", User: "alice", AccessCode: "code1", ScheduledEvent: "ev1",
				Environment: "lab", BindStrategy: types.BindPreferMachineSets, MachineSets: []string{"pool"}, BindTimeout: types.D(time.Minute)},
			Status: types.MachineClaimStatus{Phase: types.ClaimRequested}}
		if f != nil {
			f(o)
		}
		return o
	}
	runValidate(t, []validateCase{
		{"valid", valid(nil), ""},
		{"bare", &types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim}, Metadata: meta("c1"),
			Spec: types.MachineClaimSpec{MachineTemplate: "ubuntu"}}, ""},
		{"require with sets", valid(func(o *types.MachineClaim) { o.Spec.BindStrategy = types.BindRequireMachineSets }), ""},
		{"wrong kind", valid(func(o *types.MachineClaim) { o.Kind = types.KindMachine }), "kind"},
		{"bad name", valid(func(o *types.MachineClaim) { o.Metadata.Name = "" }), "metadata.name"},
		{"no template", valid(func(o *types.MachineClaim) { o.Spec.MachineTemplate = "" }), "spec.machineTemplate"},
		{"bad access code ref", valid(func(o *types.MachineClaim) { o.Spec.AccessCode = "Code" }), "spec.accessCode"},
		{"bad event ref", valid(func(o *types.MachineClaim) { o.Spec.ScheduledEvent = "ev_1" }), "spec.scheduledEvent"},
		{"bad environment ref", valid(func(o *types.MachineClaim) { o.Spec.Environment = "lab-" }), "spec.environment"},
		{"bad strategy", valid(func(o *types.MachineClaim) { o.Spec.BindStrategy = "Maybe" }), "spec.bindStrategy"},
		{"require without sets", valid(func(o *types.MachineClaim) {
			o.Spec.BindStrategy, o.Spec.MachineSets = types.BindRequireMachineSets, nil
		}), "spec.bindStrategyMachineSets"},
		{"bad set ref", valid(func(o *types.MachineClaim) { o.Spec.MachineSets = []string{"pool", "Pool"} }), "spec.bindStrategyMachineSets[1]"},
		{"16 sets", valid(func(o *types.MachineClaim) { o.Spec.MachineSets = setNames(types.MaxClaimMachineSets) }), ""},
		{"17 sets", valid(func(o *types.MachineClaim) { o.Spec.MachineSets = setNames(types.MaxClaimMachineSets + 1) }), "spec.bindStrategyMachineSets"},
		{"a set twice", valid(func(o *types.MachineClaim) { o.Spec.MachineSets = []string{"pool", "lab", "pool"} }), "spec.bindStrategyMachineSets[2]"},
		{"negative timeout", valid(func(o *types.MachineClaim) { o.Spec.BindTimeout = types.D(-time.Second) }), "spec.bindTimeout"},
		{"bad phase", valid(func(o *types.MachineClaim) { o.Status.Phase = "Pending" }), "status.phase"},
	})
}

func TestValidateScheduledEvent(t *testing.T) {
	start := time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)
	valid := func(f func(*types.ScheduledEvent)) *types.ScheduledEvent {
		o := &types.ScheduledEvent{TypeMeta: types.TypeMeta{Kind: types.KindScheduledEvent}, Metadata: meta("ev1"),
			Spec: types.ScheduledEventSpec{StartTime: start, EndTime: start.Add(8 * time.Hour), ExpirationStrategy: types.ExpireSoft,
				RequiredMachines: []types.RequiredMachines{
					{MachineTemplate: "ubuntu", Count: 10},
					{MachineTemplate: "win", Count: 1, MachineType: types.MachineTypeShared, BindStrategy: types.BindAny, MachineSets: []string{"pool"}, CreateMachineSet: &types.CreateMachineSet{}},
				}}}
		if f != nil {
			f(o)
		}
		return o
	}
	runValidate(t, []validateCase{
		{"valid", valid(nil), ""},
		{"provisioning at start", valid(func(o *types.ScheduledEvent) { o.Spec.ProvisioningStartTime = start }), ""},
		{"wrong kind", valid(func(o *types.ScheduledEvent) { o.Kind = types.KindSession }), "kind"},
		{"bad name", valid(func(o *types.ScheduledEvent) { o.Metadata.Name = strings.Repeat("e", 64) }), "metadata.name"},
		{"no start", valid(func(o *types.ScheduledEvent) { o.Spec.StartTime = time.Time{} }), "spec.startTime"},
		{"no end", valid(func(o *types.ScheduledEvent) { o.Spec.EndTime = time.Time{} }), "spec.endTime"},
		{"end at start", valid(func(o *types.ScheduledEvent) { o.Spec.EndTime = start }), "spec.endTime"},
		{"end before start", valid(func(o *types.ScheduledEvent) { o.Spec.EndTime = start.Add(-time.Hour) }), "spec.endTime"},
		{"provisioning after start", valid(func(o *types.ScheduledEvent) {
			o.Spec.ProvisioningStartTime = start.Add(time.Minute)
		}), "spec.provisioningStartTime"},
		{"bad expiration", valid(func(o *types.ScheduledEvent) { o.Spec.ExpirationStrategy = "Never" }), "spec.expirationStrategy"},
		{"line without template", valid(func(o *types.ScheduledEvent) {
			o.Spec.RequiredMachines[1].MachineTemplate = ""
		}), "spec.requiredMachines[1].machineTemplate"},
		{"zero count", valid(func(o *types.ScheduledEvent) { o.Spec.RequiredMachines[0].Count = 0 }), "spec.requiredMachines[0].count"},
		{"bad machine type", valid(func(o *types.ScheduledEvent) { o.Spec.RequiredMachines[1].MachineType = "x" }), "spec.requiredMachines[1].machineType"},
		{"bad bind strategy", valid(func(o *types.ScheduledEvent) { o.Spec.RequiredMachines[1].BindStrategy = "x" }), "spec.requiredMachines[1].bindStrategy"},
		{"bad set ref", valid(func(o *types.ScheduledEvent) {
			o.Spec.RequiredMachines[1].MachineSets = []string{"ok", "NOT"}
		}), "spec.requiredMachines[1].preferRequireMachineSets[1]"},
		// A claim under the event lists the line's sets and the one it creates.
		{"15 sets", valid(func(o *types.ScheduledEvent) {
			o.Spec.RequiredMachines[1].MachineSets = setNames(types.MaxClaimMachineSets - 1)
		}), ""},
		{"16 sets", valid(func(o *types.ScheduledEvent) {
			o.Spec.RequiredMachines[1].MachineSets = setNames(types.MaxClaimMachineSets)
		}), "spec.requiredMachines[1].preferRequireMachineSets"},
		{"a set twice", valid(func(o *types.ScheduledEvent) {
			o.Spec.RequiredMachines[1].MachineSets = []string{"ok", "ok"}
		}), "spec.requiredMachines[1].preferRequireMachineSets[1]"},
	})
}

func TestScheduledEventProvisioningStart(t *testing.T) {
	start := time.Date(2025, 6, 1, 9, 0, 0, 0, time.UTC)
	ev := &types.ScheduledEvent{Spec: types.ScheduledEventSpec{StartTime: start}}
	assert.Equal(t, start.Add(-30*time.Minute), ev.ProvisioningStart())
	ev.Spec.ProvisioningStartTime = start.Add(-2 * time.Hour)
	assert.Equal(t, start.Add(-2*time.Hour), ev.ProvisioningStart())
}

func TestValidateAccessCode(t *testing.T) {
	nb := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	valid := func(f func(*types.AccessCode)) *types.AccessCode {
		o := &types.AccessCode{TypeMeta: types.TypeMeta{Kind: types.KindAccessCode}, Metadata: meta("code1"),
			Spec: types.AccessCodeSpec{Code: "s3cret", MachineSets: []string{"pool"}, ScheduledEvents: []string{"ev1"},
				NotBefore: nb, NotAfter: nb.Add(24 * time.Hour)}}
		if f != nil {
			f(o)
		}
		return o
	}
	runValidate(t, []validateCase{
		{"valid", valid(nil), ""},
		{"4 characters", valid(func(o *types.AccessCode) { o.Spec.Code = "abcd" }), ""},
		{"128 characters", valid(func(o *types.AccessCode) { o.Spec.Code = strings.Repeat("a", 128) }), ""},
		{"open ended", valid(func(o *types.AccessCode) { o.Spec.NotAfter = time.Time{} }), ""},
		{"wrong kind", valid(func(o *types.AccessCode) { o.Kind = types.KindSession }), "kind"},
		{"bad name", valid(func(o *types.AccessCode) { o.Metadata.Name = "CODE" }), "metadata.name"},
		{"3 characters", valid(func(o *types.AccessCode) { o.Spec.Code = "abc" }), "spec.code"},
		{"129 characters", valid(func(o *types.AccessCode) { o.Spec.Code = strings.Repeat("a", 129) }), "spec.code"},
		{"bad set ref", valid(func(o *types.AccessCode) { o.Spec.MachineSets = []string{"a", "b", "C"} }), "spec.machineSets[2]"},
		{"bad event ref", valid(func(o *types.AccessCode) { o.Spec.ScheduledEvents = []string{""} }), "spec.scheduledEvents[0]"},
		{"not after at not before", valid(func(o *types.AccessCode) { o.Spec.NotAfter = nb }), "spec.notAfter"},
	})
}

func TestValidateSession(t *testing.T) {
	valid := func(f func(*types.Session)) *types.Session {
		o := &types.Session{TypeMeta: types.TypeMeta{Kind: types.KindSession}, Metadata: meta("s1"),
			Spec: types.SessionSpec{User: "alice", AccessCode: "code1", ScheduledEvent: "ev1", MachineTemplate: "ubuntu",
				PersistenceStrategy: types.PersistThroughCourse, OnEnd: types.EndKeep}}
		if f != nil {
			f(o)
		}
		return o
	}
	runValidate(t, []validateCase{
		{"valid", valid(nil), ""},
		{"no strategy", valid(func(o *types.Session) { o.Spec.PersistenceStrategy = "" }), ""},
		{"wrong kind", valid(func(o *types.Session) { o.Kind = types.KindNode }), "kind"},
		{"bad name", valid(func(o *types.Session) { o.Metadata.Name = "s 1" }), "metadata.name"},
		{"no user", valid(func(o *types.Session) { o.Spec.User = "" }), "spec.user"},
		{"bad access code ref", valid(func(o *types.Session) { o.Spec.AccessCode = "X" }), "spec.accessCode"},
		{"bad event ref", valid(func(o *types.Session) { o.Spec.ScheduledEvent = "-e" }), "spec.scheduledEvent"},
		{"bad template ref", valid(func(o *types.Session) { o.Spec.MachineTemplate = "t_" }), "spec.machineTemplate"},
		{"bad strategy", valid(func(o *types.Session) { o.Spec.PersistenceStrategy = "Forever" }), "spec.persistenceStrategy"},
	})
}

func TestMachineLive(t *testing.T) {
	for phase, live := range map[types.MachinePhase]bool{
		"": true, types.MachinePending: true, types.MachineProvisioning: true, types.MachineRunning: true,
		types.MachineTerminating: true, types.MachineTerminated: false, types.MachineFailed: false, types.MachineLost: false,
	} {
		m := &types.Machine{Status: types.MachineStatus{Phase: phase}}
		assert.Equal(t, live, m.Live(), "phase %q", phase)
	}
}

func TestFieldError(t *testing.T) {
	err := types.Invalid("spec.x", "must be %d", 3)
	assert.EqualError(t, err, "spec.x: must be 3")
	assert.True(t, errors.Is(err, types.ErrInvalid))
	assert.EqualError(t, &types.FieldError{Message: "whole object"}, "whole object")
}
