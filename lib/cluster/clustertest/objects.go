package clustertest

import (
	"context"
	"encoding/json"
	"time"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Template is a test-driver template of cpu CPUs and ram GB.
func Template(name string, cpu, ram float64) *types.MachineTemplate {
	return &types.MachineTemplate{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate},
		Metadata: types.ObjectMeta{Name: name},
		Spec: types.MachineTemplateSpec{
			Resources:             types.Resources{CPU: cpu, RAMGB: ram},
			ProviderConfiguration: map[string]json.RawMessage{"test": json.RawMessage(`{}`)},
		},
	}
}

// Claim is a Requested claim for template with a bind timeout.
func Claim(name, template string, bindTimeout time.Duration) *types.MachineClaim {
	c := &types.MachineClaim{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
		Metadata: types.ObjectMeta{Name: name},
		Spec:     types.MachineClaimSpec{MachineTemplate: template, BindTimeout: types.D(bindTimeout)},
		Status:   types.MachineClaimStatus{Phase: types.ClaimRequested},
	}
	c.Status.PhaseTimes.Mark(string(types.ClaimRequested), time.Now())
	return c
}

// Claims returns every claim as host h sees it, by name.
func (h *Host) Claims() map[string]*types.MachineClaim {
	cs, _ := store.List[types.MachineClaim](h.Store, types.KindMachineClaim)
	out := map[string]*types.MachineClaim{}
	for _, c := range cs {
		out[c.Metadata.Name] = c
	}
	return out
}

// Machines returns every machine as host h sees it, by name.
func (h *Host) Machines() map[string]*types.Machine {
	ms, _ := store.List[types.Machine](h.Store, types.KindMachine)
	out := map[string]*types.Machine{}
	for _, m := range ms {
		out[m.Metadata.Name] = m
	}
	return out
}

// Held returns the resource ids host h's driver really holds.
func (h *Host) Held() map[string]bool {
	rs, _ := h.Driver.List(context.Background())
	out := map[string]bool{}
	for _, r := range rs {
		out[r.ID] = true
	}
	return out
}

// Host returns the host named name, failing the test when there is none.
func (f *Fleet) Host(name string) *Host {
	f.T.Helper()
	for _, h := range f.Hosts {
		if h.Name == name {
			return h
		}
	}
	f.T.Fatalf("no host %s in the fleet", name)
	return nil
}

// nodeOf returns the Node object of name as h has it.
func nodeOf(h *Host, name string) (*types.Node, bool) {
	n, err := store.Get[types.Node](h.Store, types.KindNode, name)
	return n, err == nil
}
