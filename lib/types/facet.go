package types

import (
	"encoding/json"
	"time"
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
)

// Facet is one facet of an object: its name and a pointer (into the object,
// or to a view whose fields point into it) that the store marshals to write
// the facet and unmarshals a stored facet into. Value's JSON must not depend
// on the object's other facets.
type Facet struct {
	Name  string
	Value any
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
	return []Facet{{FacetSpec, specOf(&o.Metadata, &o.Spec)}}
}

// Facets implements Object.
func (o *Environment) Facets() []Facet {
	return []Facet{{FacetSpec, specOf(&o.Metadata, &o.Spec)}}
}

// Facets implements Object.
func (o *MachineTemplate) Facets() []Facet {
	return []Facet{{FacetSpec, specOf(&o.Metadata, &o.Spec)}}
}

// accessCodeFacet is an AccessCode's only facet: its status is the admin's
// switch, written through the API like the spec.
type accessCodeFacet struct {
	*specFacet[AccessCodeSpec]
	Status *AccessCodeStatus `json:"status"`
}

// Facets implements Object.
func (o *AccessCode) Facets() []Facet {
	return []Facet{{FacetSpec, &accessCodeFacet{specOf(&o.Metadata, &o.Spec), &o.Status}}}
}

// Facets implements Object.
func (o *MachineSet) Facets() []Facet {
	return []Facet{{FacetSpec, specOf(&o.Metadata, &o.Spec)}, {FacetStatus, &o.Status}}
}

// Facets implements Object.
func (o *ScheduledEvent) Facets() []Facet {
	return []Facet{{FacetSpec, specOf(&o.Metadata, &o.Spec)}, {FacetStatus, &o.Status}}
}

// Facets implements Object.
func (o *Session) Facets() []Facet {
	return []Facet{{FacetSpec, specOf(&o.Metadata, &o.Spec)}, {FacetStatus, &o.Status}}
}

// Facets implements Object.
func (o *MachineClaim) Facets() []Facet {
	return []Facet{{FacetSpec, specOf(&o.Metadata, &o.Spec)}, {FacetStatus, &o.Status}}
}

// machineFacet is a machine as its node keeps it.
type machineFacet struct {
	*specFacet[MachineSpec]
	Status *MachineStatus `json:"status"`
}

// Facets implements Object.
func (o *Machine) Facets() []Facet {
	return []Facet{{FacetOwner, &machineFacet{specOf(&o.Metadata, &o.Spec), &o.Status}}}
}

// nodeReport is a Node's report facet: all of it but spec.maintenance, which
// the API writes (a report from the node must not carry its own copy of it).
type nodeReport struct{ o *Node }

type nodeReportJSON struct {
	Labels    map[string]string `json:"labels"`
	CreatedAt time.Time         `json:"createdAt"`
	Spec      NodeSpec          `json:"spec"`
	Status    NodeStatus        `json:"status"`
}

// MarshalJSON writes the report without the maintenance flag.
func (r *nodeReport) MarshalJSON() ([]byte, error) {
	v := nodeReportJSON{Labels: r.o.Metadata.Labels, CreatedAt: r.o.Metadata.CreatedAt, Spec: r.o.Spec, Status: r.o.Status}
	v.Spec.Maintenance = false
	return json.Marshal(v)
}

// UnmarshalJSON sets the report's fields and keeps the maintenance flag.
func (r *nodeReport) UnmarshalJSON(b []byte) error {
	var v nodeReportJSON
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	keep := r.o.Spec.Maintenance
	r.o.Metadata.Labels, r.o.Metadata.CreatedAt, r.o.Spec, r.o.Status = v.Labels, v.CreatedAt, v.Spec, v.Status
	r.o.Spec.Maintenance = keep
	return nil
}

type nodeMaintenance struct {
	Maintenance *bool `json:"maintenance"`
}

// Facets implements Object.
func (o *Node) Facets() []Facet {
	return []Facet{{FacetReport, &nodeReport{o}}, {FacetMaintenance, &nodeMaintenance{&o.Spec.Maintenance}}}
}

// FacetNames returns the facet names of kind, the creating facet first; nil
// for an unknown kind.
func FacetNames(kind string) []string {
	o, err := New(kind)
	if err != nil {
		return nil
	}
	fs := o.Facets()
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = f.Name
	}
	return out
}
