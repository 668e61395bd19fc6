package types

import "time"

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
	MachineSet      string `json:"machineSet,omitempty"`
	MachineTemplate string `json:"machineTemplate"`
	Environment     string `json:"environment,omitempty"`
	// Node owns the machine and is the only writer of its status.
	Node string `json:"node"`
	// Driver is the driver instance on Node.
	Driver string `json:"driver"`
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
	ConnectEndpoints   []Endpoint        `json:"connectEndpoints,omitempty"`
	Reason             string            `json:"reason,omitempty"`
	PhaseTimes         PhaseTimes        `json:"phaseTimes,omitempty"`
	// LastActivity is when the driver last saw the machine in use (see
	// drivers.ActivityMeter), written by its node at a coarse resolution.
	LastActivity time.Time `json:"lastActivity,omitzero"`
	// Paused is set while the machine's node holds it paused (its session
	// ended with PauseOnEnd); it is still Running for capacity and binding.
	Paused bool `json:"paused,omitempty"`
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
	if err := checkKind(o.Kind, KindMachine); err != nil {
		return err
	}
	if err := o.Metadata.Validate(); err != nil {
		return err
	}
	s := &o.Spec
	if err := ValidateName("spec.machineTemplate", s.MachineTemplate); err != nil {
		return err
	}
	if err := ValidateName("spec.node", s.Node); err != nil {
		return err
	}
	if s.Driver == "" {
		return Invalid("spec.driver", "is required")
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
