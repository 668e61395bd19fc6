package types

import "time"

// NodePhase says whether a node is alive in the cluster.
type NodePhase string

// Node phases.
const (
	NodeUp       NodePhase = "Up"
	NodeDown     NodePhase = "Down"
	NodeDraining NodePhase = "Draining"
)

// Node is one hf-node, written by itself.
type Node struct {
	TypeMeta
	Metadata ObjectMeta `json:"metadata"`
	Spec     NodeSpec   `json:"spec"`
	Status   NodeStatus `json:"status"`
}

// NodeSpec describes a node.
type NodeSpec struct {
	// APIAddress is the node's REST API address (host:port).
	APIAddress string `json:"apiAddress,omitempty"`
	// GossipAddress is the node's memberlist address (host:port).
	GossipAddress string `json:"gossipAddress,omitempty"`
	// Maintenance stops new placements on the node (drain).
	Maintenance bool `json:"maintenance,omitempty"`
	// Drivers are the driver instances the node runs.
	Drivers []NodeDriver `json:"drivers,omitempty"`
	// SoftwareVersion is the hf-node build.
	SoftwareVersion string `json:"softwareVersion,omitempty"`
}

// NodeDriver is one driver instance of a node with its capacity.
type NodeDriver struct {
	// Name is the instance name ("test", "docker", "test/big").
	Name string `json:"name"`
	// Driver is the driver type.
	Driver string `json:"driver"`
	// Remote drivers (cloud) may be served by any node.
	Remote bool `json:"remote,omitempty"`
	// Status is a short human-readable state: "ok" or "ok: <details>" when
	// the driver works as configured (the dashboard shows anything else as
	// a warning), else what is wrong ("unprivileged mode: ...", an error).
	Status   string   `json:"status,omitempty"`
	Capacity Capacity `json:"capacity"`
	// AllowedGroups are the host groups the driver may put a machine in
	// (the native driver's allowed_groups), empty when none; nil when the
	// driver has no such list, or the node does not say (an earlier
	// release). The API refuses an Environment or MachineSet whose groups
	// no node that could serve it allows.
	AllowedGroups []string `json:"allowedGroups,omitzero"`
}

// Capacity is a driver's capacity on a node.
type Capacity struct {
	// Total is what the host has.
	Total Resources `json:"total"`
	// Usable is Total plus the alter settings.
	Usable Resources `json:"usable"`
	// Overbook is added on top of Usable for claims that allow overbooking.
	Overbook Resources `json:"overbook"`
	// Used is what allocated machines take.
	Used Resources `json:"used"`
	// Reserved is what accepted but not yet allocated claims take.
	Reserved Resources `json:"reserved"`
	// Free is Usable - Used - Reserved.
	Free Resources `json:"free"`
}

// NodeStatus is the node's live state. Phase is derived (see Derive) from
// what the node reports, its maintenance flag and the down verdict.
type NodeStatus struct {
	Phase NodePhase `json:"phase,omitempty"`
	// Down is the verdict that the node is gone, passed by a node that
	// reaches a majority of the cluster: the liveness facet. It holds while
	// the node has not reported since.
	Down      *NodeVerdict `json:"down,omitempty"`
	StartedAt time.Time    `json:"startedAt,omitzero"`
	// Heartbeat is the last time the node refreshed its own record.
	Heartbeat time.Time `json:"heartbeat,omitzero"`
	Machines  int       `json:"machines"`
	// Conditions: Reachable, whether the node that answers a request sees
	// this one as a live member. It is that node's own view, added when it
	// answers and never stored: the phase is the cluster's word (the
	// node's report, or the verdict of a node that reaches a majority),
	// the same on every node, while a node cut off from the others can
	// pass no verdict and would show them Up.
	Conditions Conditions `json:"conditions,omitempty"`
}

// ConditionReachable is a Node's condition: whether the node answering sees
// it as a live member (see NodeStatus.Conditions).
const ConditionReachable = "Reachable"

// Reasons of the Reachable condition.
const (
	// ReasonMember: a live member of the answering node's membership
	// (or the answering node itself).
	ReasonMember = "Member"
	// ReasonUnreachable: not a live member as the answering node sees
	// it, which reaches a majority of the members it knows: its verdict
	// is the cluster's, and the node reads Down once it is passed.
	ReasonUnreachable = "Unreachable"
	// ReasonNoQuorum: not a live member as the answering node sees it,
	// which reaches no majority of the members it knows: it passes no
	// verdict, so the phase is whatever the cluster last told it.
	ReasonNoQuorum = "NoQuorum"
)

// Unreachable reports whether the answering node said it cannot reach this
// one while its phase is not Down: the case the phase alone hides.
func (o *Node) Unreachable() bool {
	c := o.Status.Conditions.Get(ConditionReachable)
	return c != nil && c.Status == ConditionFalse && o.Status.Phase != NodeDown
}

// NodeVerdict says a node is gone.
type NodeVerdict struct {
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at,omitzero"`
	By     string    `json:"by,omitempty"`
	// Report is the version of the report facet the verdict was passed on.
	Report Version `json:"report"`
	// Was is the phase the node had reported.
	Was NodePhase `json:"was,omitempty"`
}

// DownHolds reports whether the down verdict is current: the node has not
// reported since it was passed.
func (o *Node) DownHolds() bool {
	return o.Status.Down != nil && o.Status.Down.Report == o.Metadata.Facets.Get(FacetReport)
}

// Derive sets the phase shown: Down under a current verdict, Draining for an
// Up node in maintenance, else what the node reported.
func (o *Node) Derive() {
	switch {
	case o.DownHolds():
		o.Status.Phase = NodeDown
	case o.Status.Phase == NodeUp && o.Spec.Maintenance:
		o.Status.Phase = NodeDraining
	}
}

// Meta returns the metadata.
func (o *Node) Meta() *ObjectMeta { return &o.Metadata }

// Validate checks the node.
func (o *Node) Validate() error {
	if err := o.TypeMeta.check(KindNode); err != nil {
		return err
	}
	if err := o.Metadata.Validate(); err != nil {
		return err
	}
	for i, d := range o.Spec.Drivers {
		if d.Name == "" {
			return Invalid(fieldIdx("spec.drivers", i)+".name", "is required")
		}
	}
	return nil
}
