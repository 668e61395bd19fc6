package types

import "time"

// ClaimPhase is the phase of a MachineClaim.
type ClaimPhase string

// Claim phases.
const (
	ClaimRequested  ClaimPhase = "Requested"
	ClaimBound      ClaimPhase = "Bound"
	ClaimFailed     ClaimPhase = "Failed"
	ClaimTerminated ClaimPhase = "Terminated"
)

// BindStrategy says where a claim may find its machine.
type BindStrategy string

// Bind strategies.
const (
	BindAny                BindStrategy = "Any"
	BindPreferMachineSets  BindStrategy = "PreferMachineSets"
	BindRequireMachineSets BindStrategy = "RequireMachineSets"
)

// DefaultBindTimeout is how long a claim waits for capacity when it says nothing.
const DefaultBindTimeout = 5 * time.Minute

// MachineClaim is a user's request for a machine.
type MachineClaim struct {
	TypeMeta
	Metadata ObjectMeta         `json:"metadata"`
	Spec     MachineClaimSpec   `json:"spec"`
	Status   MachineClaimStatus `json:"status"`
}

// MachineClaimSpec is what the user asks for.
type MachineClaimSpec struct {
	MachineTemplate string       `json:"machineTemplate"`
	User            string       `json:"user,omitempty"`
	AccessCode      string       `json:"accessCode,omitempty"`
	ScheduledEvent  string       `json:"scheduledEvent,omitempty"`
	Environment     string       `json:"environment,omitempty"`
	BindStrategy    BindStrategy `json:"bindStrategy,omitempty"`
	MachineSets     []string     `json:"machineSets,omitempty"`
	// BindTimeout is how long the claim may stay Requested before it fails.
	BindTimeout Duration `json:"bindTimeout,omitzero"`
	// Metadata is passed to the machine as data (environment variables, user
	// data), under the keys its template declares in spec.claimMetadata only.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// MachineClaimStatus is written by the claim's elector and its serving node.
type MachineClaimStatus struct {
	Phase   ClaimPhase `json:"phase,omitempty"`
	Machine string     `json:"machine,omitempty"`
	Node    string     `json:"node,omitempty"`
	Driver  string     `json:"driver,omitempty"`
	// Round is the election round the current node accepted.
	Round  uint64 `json:"round,omitempty"`
	Reason string `json:"reason,omitempty"`
	// PhaseTimes records when each phase was entered.
	PhaseTimes PhaseTimes `json:"phaseTimes,omitempty"`
}

// Meta returns the metadata.
func (o *MachineClaim) Meta() *ObjectMeta { return &o.Metadata }

// Validate checks the claim.
func (o *MachineClaim) Validate() error {
	if err := checkKind(o.Kind, KindMachineClaim); err != nil {
		return err
	}
	if err := o.Metadata.Validate(); err != nil {
		return err
	}
	s := &o.Spec
	if err := ValidateName("spec.machineTemplate", s.MachineTemplate); err != nil {
		return err
	}
	for f, v := range map[string]string{"spec.accessCode": s.AccessCode, "spec.scheduledEvent": s.ScheduledEvent, "spec.environment": s.Environment} {
		if err := validateRef(f, v); err != nil {
			return err
		}
	}
	if s.BindStrategy != "" {
		if err := oneOf("spec.bindStrategy", s.BindStrategy, BindAny, BindPreferMachineSets, BindRequireMachineSets); err != nil {
			return err
		}
	}
	if s.BindStrategy == BindRequireMachineSets && len(s.MachineSets) == 0 {
		return Invalid("spec.machineSets", "is required with bindStrategy RequireMachineSets")
	}
	if err := validateRefs("spec.machineSets", s.MachineSets); err != nil {
		return err
	}
	if s.BindTimeout.Duration < 0 {
		return Invalid("spec.bindTimeout", "must not be negative")
	}
	if err := validateClaimMetadata("spec.metadata", s.Metadata); err != nil {
		return err
	}
	if o.Status.Phase != "" {
		if err := oneOf("status.phase", o.Status.Phase, ClaimRequested, ClaimBound, ClaimFailed, ClaimTerminated); err != nil {
			return err
		}
	}
	return nil
}
