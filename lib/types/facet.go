package types

import (
	"maps"
	"slices"
	"sync"
	"time"

	fastjson "github.com/goccy/go-json"
)

// Facets: every object is stored and replicated as facets, each a part of the
// object with exactly one writer role and a version of its own. The store
// merges two copies of an object facet by facet (the higher version of each
// facet wins), so a writer can never undo another writer's field by writing
// from an older copy, and writers of different facets never conflict.
//
// The first facet of a kind is its creating facet: an object is live while it
// has one newer than its last deletion.

// Facet names.
const (
	// FacetSpec is metadata (labels, annotations, createdAt) and spec: written
	// by the API node that took the request, or by the component that
	// created the object (a set's owner for its provisioning claims, say).
	FacetSpec = "spec"
	// FacetStatus is an object's status, written by its owner: a set's,
	// event's or session's rendezvous owner.
	FacetStatus = "status"
	// FacetReport is what a node says of itself: everything of its Node
	// object but the maintenance flag.
	FacetReport = "report"
	// FacetMaintenance is a node's maintenance flag, set through the API.
	FacetMaintenance = "maintenance"
	// FacetOwner is a machine as its node keeps it: spec and status.
	FacetOwner = "owner"
	// FacetReap is a request that a machine go, by its set's or event's owner.
	FacetReap = "reap"
	// FacetLost is the verdict that a machine is lost with its node.
	FacetLost = "lost"
	// FacetLiveness is the verdict that a node is gone.
	FacetLiveness = "liveness"
	// FacetElection is a claim's election: its elector's word.
	FacetElection = "election"
	// FacetBinding is a claim's binding: the word of the node serving the
	// claim's current round.
	FacetBinding = "binding"
	// FacetEnd is a request that a claim be terminated.
	FacetEnd = "end"
)

// Facet is one facet of an object: its name and a pointer (into the object,
// or to a view whose fields point into it) that the store marshals to write
// the facet and unmarshals a stored facet into. Value's JSON must not depend
// on the object's other facets.
type Facet struct {
	Name  string
	Value any
	// Epoch orders writes of the facet before its version does: a copy of a
	// higher epoch wins, and a write of a lower epoch than the stored one is
	// refused. A claim's election and binding facets use the claim's round,
	// so the node serving round r+1 always wins over the one of round r,
	// whatever their clocks say.
	Epoch uint64
}

// specFacet is the spec facet of most kinds: labels, annotations, createdAt
// and the spec.
type specFacet[S any] struct {
	Labels      *map[string]string `json:"labels"`
	Annotations *map[string]string `json:"annotations"`
	CreatedAt   *time.Time         `json:"createdAt"`
	Spec        *S                 `json:"spec"`
}

func specOf[S any](m *ObjectMeta, spec *S) *specFacet[S] {
	return &specFacet[S]{Labels: &m.Labels, Annotations: &m.Annotations, CreatedAt: &m.CreatedAt, Spec: spec}
}

// Facets implements Object.
func (o *Provider) Facets() []Facet {
	return []Facet{{Name: FacetSpec, Value: specOf(&o.Metadata, &o.Spec)}}
}

// environmentFacet is an Environment's only facet: hf keeps no status of
// its own on it, so the conditions a provider or an admin writes through
// the API travel with the spec.
type environmentFacet struct {
	*specFacet[EnvironmentSpec]
	Status *EnvironmentStatus `json:"status"`
}

// Facets implements Object.
func (o *Environment) Facets() []Facet {
	return []Facet{{Name: FacetSpec, Value: &environmentFacet{specOf(&o.Metadata, &o.Spec), &o.Status}}}
}

// Facets implements Object.
func (o *MachineTemplate) Facets() []Facet {
	return []Facet{{Name: FacetSpec, Value: specOf(&o.Metadata, &o.Spec)}}
}

// Facets implements Object.
func (o *AccessCode) Facets() []Facet {
	return []Facet{{Name: FacetSpec, Value: specOf(&o.Metadata, &o.Spec)}, {Name: FacetStatus, Value: &o.Status}}
}

// Facets implements Object.
func (o *MachineSet) Facets() []Facet {
	return []Facet{{Name: FacetSpec, Value: specOf(&o.Metadata, &o.Spec)}, {Name: FacetStatus, Value: &o.Status}}
}

// Facets implements Object.
func (o *ScheduledEvent) Facets() []Facet {
	return []Facet{{Name: FacetSpec, Value: specOf(&o.Metadata, &o.Spec)}, {Name: FacetStatus, Value: &o.Status}}
}

// Facets implements Object.
func (o *Session) Facets() []Facet {
	return []Facet{{Name: FacetSpec, Value: specOf(&o.Metadata, &o.Spec)}, {Name: FacetStatus, Value: &o.Status}}
}

// Facets implements Object.
func (o *MachineClaim) Facets() []Facet {
	var er uint64
	if e := o.Status.Election; e != nil {
		er = e.Round
	}
	return []Facet{
		{Name: FacetSpec, Value: specOf(&o.Metadata, &o.Spec)},
		{Name: FacetElection, Value: &o.Status.Election, Epoch: er},
		{Name: FacetBinding, Value: &o.Status.Binding, Epoch: BindingEpoch(o.Status.Binding)},
		{Name: FacetEnd, Value: &o.Status.End},
	}
}

// machineOwner is a machine's owner facet: spec and status without the reap
// and lost facets, with the phase its node gave it (Derive may show Lost).
type machineOwner struct{ o *Machine }

type machineOwnerJSON struct {
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	CreatedAt   time.Time         `json:"createdAt"`
	Spec        MachineSpec       `json:"spec"`
	Status      MachineStatus     `json:"status"`
}

// MarshalJSON writes the owner's part.
func (f *machineOwner) MarshalJSON() ([]byte, error) {
	o := f.o
	v := machineOwnerJSON{Labels: o.Metadata.Labels, Annotations: o.Metadata.Annotations, CreatedAt: o.Metadata.CreatedAt, Spec: o.Spec, Status: o.Status}
	v.Status.Reap, v.Status.Lost, v.Status.Conditions = nil, nil, nil // Conditions are derived
	if o.LostHolds() && o.Status.Phase == MachineLost {
		v.Status.Phase, v.Status.Reason = o.Status.Lost.Was, o.Status.Lost.WasReason
	}
	// What the status shows of its resource is the resource's, as its node
	// wrote it: stored once (UnmarshalJSON shows it again). A machine took
	// ~1,070 bytes stored, ~200 of them twice.
	if r := v.Status.Resource; r != nil {
		if len(r.Info) > 0 && maps.Equal(r.Info, v.Status.MachineInformation) {
			v.Status.MachineInformation = nil
		}
		if len(r.Endpoints) > 0 && slices.Equal(r.Endpoints, v.Status.Addresses) {
			v.Status.Addresses = nil
		}
	}
	return fastjson.Marshal(v)
}

// UnmarshalJSON sets the owner's part and keeps the other facets.
func (f *machineOwner) UnmarshalJSON(b []byte) error {
	var v machineOwnerJSON
	if err := fastjson.Unmarshal(b, &v); err != nil {
		return err
	}
	o := f.o
	reap, lost := o.Status.Reap, o.Status.Lost
	o.Metadata.Labels, o.Metadata.Annotations, o.Metadata.CreatedAt, o.Spec, o.Status = v.Labels, v.Annotations, v.CreatedAt, v.Spec, v.Status
	o.Status.Reap, o.Status.Lost = reap, lost
	if r := o.Status.Resource; r != nil {
		// Stored once, shown as the status's own (see MarshalJSON): shared,
		// as Derive shares equal ones.
		if o.Status.MachineInformation == nil {
			o.Status.MachineInformation = r.Info
		}
		if o.Status.Addresses == nil && len(o.Status.LegacyConnectEndpoints) == 0 {
			o.Status.Addresses = r.Endpoints
		}
	}
	return nil
}

// Facets implements Object.
func (o *Machine) Facets() []Facet {
	return []Facet{
		{Name: FacetOwner, Value: &machineOwner{o}},
		{Name: FacetReap, Value: &o.Status.Reap},
		{Name: FacetLost, Value: &o.Status.Lost},
	}
}

// nodeReport is a Node's report facet: all of it but spec.maintenance (the
// API's) and the down verdict, with the phase the node reported (Derive may
// show Draining or Down).
type nodeReport struct{ o *Node }

type nodeReportJSON struct {
	Labels    map[string]string `json:"labels"`
	CreatedAt time.Time         `json:"createdAt"`
	Spec      NodeSpec          `json:"spec"`
	Status    NodeStatus        `json:"status"`
}

// MarshalJSON writes the report.
func (r *nodeReport) MarshalJSON() ([]byte, error) {
	o := r.o
	v := nodeReportJSON{Labels: o.Metadata.Labels, CreatedAt: o.Metadata.CreatedAt, Spec: o.Spec, Status: o.Status}
	// Conditions are the answering node's view, never stored.
	v.Spec.Maintenance, v.Status.Down, v.Status.Conditions = false, nil, nil
	switch {
	case o.DownHolds() && o.Status.Phase == NodeDown:
		v.Status.Phase = o.Status.Down.Was
	case o.Status.Phase == NodeDraining:
		v.Status.Phase = NodeUp
	}
	return fastjson.Marshal(v)
}

// UnmarshalJSON sets the report's fields and keeps the other facets.
func (r *nodeReport) UnmarshalJSON(b []byte) error {
	var v nodeReportJSON
	if err := fastjson.Unmarshal(b, &v); err != nil {
		return err
	}
	o := r.o
	keep, down := o.Spec.Maintenance, o.Status.Down
	o.Metadata.Labels, o.Metadata.CreatedAt, o.Spec, o.Status = v.Labels, v.CreatedAt, v.Spec, v.Status
	o.Spec.Maintenance, o.Status.Down, o.Status.Conditions = keep, down, nil
	return nil
}

type nodeMaintenance struct {
	Maintenance *bool `json:"maintenance"`
}

// Facets implements Object.
func (o *Node) Facets() []Facet {
	return []Facet{
		{Name: FacetReport, Value: &nodeReport{o}},
		{Name: FacetMaintenance, Value: &nodeMaintenance{&o.Spec.Maintenance}},
		{Name: FacetLiveness, Value: &o.Status.Down},
	}
}

// FacetNames returns the facet names of kind, the creating facet first; nil
// for an unknown kind. The slice is shared (every write asks): read only.
func FacetNames(kind string) []string {
	if names, ok := facetNames.Load(kind); ok {
		return names.([]string)
	}
	o, err := New(kind)
	if err != nil {
		return nil
	}
	fs := o.Facets()
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	facetNames.Store(kind, out)
	return out
}

// facetNames keeps FacetNames' answers by kind.
var facetNames sync.Map // string -> []string
