package types

import (
	"maps"
	"slices"
	"time"
)

// The labels a node puts on the machines it reserves: the claim the machine
// was made for and the node it runs on.
const (
	LabelClaim = "hf/claim"
	LabelNode  = "hf/node"
)

// LabelProvisionFor marks the claims a MachineSet's owner creates to provision
// warm machines: their machines join the set unclaimed once running.
const LabelProvisionFor = "hf/provision-for"

// MachinePhase is the phase of a Machine.
type MachinePhase string

// Machine phases.
const (
	MachinePending      MachinePhase = "Pending"
	MachineProvisioning MachinePhase = "Provisioning"
	MachineRunning      MachinePhase = "Running"
	MachineTerminating  MachinePhase = "Terminating"
	MachineTerminated   MachinePhase = "Terminated"
	MachineFailed       MachinePhase = "Failed"
	// MachineLost is a machine whose node died or whose driver no longer holds it.
	MachineLost MachinePhase = "Lost"
)

// Machine is one allocated thing: an environment, a container or a VM.
type Machine struct {
	TypeMeta
	Metadata ObjectMeta    `json:"metadata"`
	Spec     MachineSpec   `json:"spec"`
	Status   MachineStatus `json:"status"`
}

// MachineSpec says what the machine is and who owns it.
type MachineSpec struct {
	// MachineType is the template's: User or Shared.
	MachineType MachineType `json:"machineType,omitempty"`
	// Provider is the Provider the machine was made through (its
	// Environment's; else the driver type).
	Provider string `json:"provider,omitempty"`
	// ConfigurationOptions is the provider configuration the machine was
	// made with, resolved in increasing precedence from the template, the
	// Environment's providerConfiguration, its templateSpecific entry and
	// the MachineSet; values in their string forms.
	ConfigurationOptions map[string]string `json:"configurationOptions,omitempty"`
	// ConnectEndpoints are the ways a user reaches the machine by protocol:
	// the template's connectProtocol that the Environment has an endpoint
	// for.
	ConnectEndpoints map[string]string `json:"connectEndpoints,omitempty"`
	MachineSet       string            `json:"machineSet,omitempty"`
	MachineTemplate  string            `json:"machineTemplate"`
	Environment      string            `json:"environment,omitempty"`
	// Node owns the machine and is the only writer of its status.
	Node string `json:"node,omitempty"`
	// Driver is the driver instance on Node.
	Driver string `json:"driver,omitempty"`
	// Claim is the claim the machine was allocated for or is bound to.
	Claim string `json:"claim,omitempty"`
	// Round is the claim's election round the machine was allocated in.
	Round uint64 `json:"round,omitempty"`
}

// MachineStatus is written by the owning node.
type MachineStatus struct {
	Phase              MachinePhase      `json:"phase,omitempty"`
	Resource           *Resource         `json:"resource,omitempty"`
	MachineInformation map[string]string `json:"machineInformation,omitempty"`
	// Addresses are the machine's own addresses by protocol, as its driver
	// reports them (hf's addition; spec.connectEndpoints are the
	// Environment's gateways).
	Addresses []Endpoint `json:"addresses,omitempty"`
	// Conditions: Ready (the machine runs, or why not) and Lost (why it was
	// lost), derived from the phase and the verdicts.
	Conditions Conditions `json:"conditions,omitempty"`
	// LegacyConnectEndpoints is the earlier name of Addresses: read, moved
	// there (see Upgrade) and never written.
	LegacyConnectEndpoints []Endpoint `json:"connectEndpoints,omitempty"`
	Reason                 string     `json:"reason,omitempty"`
	PhaseTimes             PhaseTimes `json:"phaseTimes,omitempty"`
	// LastActivity is when the driver last saw the machine in use (see
	// drivers.ActivityMeter), written by its node at a coarse resolution.
	LastActivity time.Time `json:"lastActivity,omitzero"`
	// Paused is set while the machine's node holds it paused (its session
	// ended with PauseOnEnd); it is still Running for capacity and binding.
	Paused bool `json:"paused,omitempty"`

	// Reap is a request that the machine go (its set's owner reaped it, an
	// event ended): the reap facet. Its node carries it out.
	Reap *MachineRequest `json:"reap,omitempty"`
	// Lost is the verdict that the machine is lost with its node, passed by
	// a node that reaches a majority of the cluster: the lost facet. It holds
	// while the node has not written the machine since (see Derive).
	Lost *MachineVerdict `json:"lost,omitempty"`
}

// MachineRequest asks a machine's node to do something with it.
type MachineRequest struct {
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
	// Claim is the claim the machine held when it was asked for ("" for a
	// warm machine): a request for a warm machine lapses once a claim has
	// taken it (the take and the request crossed).
	Claim string    `json:"claim,omitempty"`
	At    time.Time `json:"at,omitzero"`
	// By is the node that asked.
	By string `json:"by,omitempty"`
}

// MachineVerdict says a machine is lost.
type MachineVerdict struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at,omitzero"`
	By     string    `json:"by,omitempty"`
	// Owner is the version of the owner facet the verdict was passed on;
	// a later write by the machine's node overrides the verdict.
	Owner Version `json:"owner"`
	// Was and WasReason are the phase and reason the node had given the
	// machine, shown again if the verdict is overridden.
	Was       MachinePhase `json:"was,omitempty"`
	WasReason string       `json:"wasReason,omitempty"`
}

// LostHolds reports whether the lost verdict is current: the machine's node
// has not written it since the verdict was passed.
func (o *Machine) LostHolds() bool {
	return o.Status.Lost != nil && o.Status.Lost.Owner == o.Metadata.Facets.Get(FacetOwner)
}

// Machine condition types.
const (
	ConditionReady = "Ready"
	ConditionLost  = "Lost"
)

// Derive shows a current lost verdict as phase Lost with its reason, and
// the conditions that follow from phase and verdicts. What the status shows
// of its resource (machine information, addresses) shares the resource's
// map and slice when they are equal, as they were when the node wrote them:
// a decoded machine then holds them once (a node's cache holds every
// machine). Writers replace these fields, never change them in place.
func (o *Machine) Derive() {
	st := &o.Status
	if r := st.Resource; r != nil {
		if len(r.Info) > 0 && maps.Equal(r.Info, st.MachineInformation) {
			st.MachineInformation = r.Info
		}
		if len(r.Endpoints) > 0 && slices.Equal(r.Endpoints, st.Addresses) {
			st.Addresses = r.Endpoints
		}
	}
	if o.LostHolds() && st.Phase != MachineLost {
		st.Phase, st.Reason = MachineLost, st.Lost.Reason
	}
	if st.Phase == "" {
		st.Conditions = nil
		return
	}
	ready := Condition{Type: ConditionReady, Status: ConditionFalse, Reason: string(st.Phase), Message: st.Reason,
		LastTransitionTime: st.PhaseTimes.At(string(st.Phase)), LastUpdateTime: o.Metadata.UpdatedAt}
	if st.Phase == MachineRunning {
		ready.Status = ConditionTrue
	}
	cs := Conditions{ready}
	if o.LostHolds() {
		cs = append(cs, Condition{Type: ConditionLost, Status: ConditionTrue, Reason: "NodeGone", Message: st.Lost.Reason,
			LastTransitionTime: st.Lost.At, LastUpdateTime: st.Lost.At})
	}
	st.Conditions = cs
}

// Upgrade moves earlier field names to the proposal's.
func (o *Machine) Upgrade() {
	st := &o.Status
	if len(st.LegacyConnectEndpoints) > 0 {
		if len(st.Addresses) == 0 {
			st.Addresses = st.LegacyConnectEndpoints
		}
		st.LegacyConnectEndpoints = nil
	}
}

// Meta returns the metadata.
func (o *Machine) Meta() *ObjectMeta { return &o.Metadata }

// Live reports whether the machine holds or may hold a driver resource.
func (o *Machine) Live() bool {
	switch o.Status.Phase {
	case MachineTerminated, MachineFailed, MachineLost:
		return false
	}
	return true
}

// Validate checks the machine.
func (o *Machine) Validate() error {
	if err := o.TypeMeta.check(KindMachine); err != nil {
		return err
	}
	if err := o.Metadata.Validate(); err != nil {
		return err
	}
	s := &o.Spec
	if err := ValidateName("spec.machineTemplate", s.MachineTemplate); err != nil {
		return err
	}
	// A machine of hf's own drivers names its node and driver; one an
	// outside provider records (the proposal's model) may name neither.
	if err := validateRef("spec.node", s.Node); err != nil {
		return err
	}
	if s.Node != "" && s.Driver == "" {
		return Invalid("spec.driver", "is required with spec.node")
	}
	if s.MachineType != "" {
		if err := oneOf("spec.machineType", s.MachineType, MachineTypeUser, MachineTypeShared); err != nil {
			return err
		}
	}
	for f, v := range map[string]string{"spec.machineSet": s.MachineSet, "spec.environment": s.Environment, "spec.claim": s.Claim} {
		if err := validateRef(f, v); err != nil {
			return err
		}
	}
	if o.Status.Phase != "" {
		return oneOf("status.phase", o.Status.Phase, MachinePending, MachineProvisioning, MachineRunning,
			MachineTerminating, MachineTerminated, MachineFailed, MachineLost)
	}
	return nil
}
