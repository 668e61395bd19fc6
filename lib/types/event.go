package types

import "time"

// ExpirationStrategy says what happens to machines when an event ends.
type ExpirationStrategy string

// Expiration strategies.
const (
	ExpireCutOff ExpirationStrategy = "CutOff"
	ExpireSoft   ExpirationStrategy = "Soft"
)

// EventPhase is the phase of a ScheduledEvent.
type EventPhase string

// Event phases.
const (
	EventScheduled    EventPhase = "Scheduled"
	EventProvisioning EventPhase = "Provisioning"
	EventActive       EventPhase = "Active"
	EventExpired      EventPhase = "Expired"
)

// DefaultProvisioningLead is how long before its start an event provisions.
const DefaultProvisioningLead = 30 * time.Minute

// ScheduledEvent is a time window with required machines.
type ScheduledEvent struct {
	TypeMeta
	Metadata ObjectMeta           `json:"metadata"`
	Spec     ScheduledEventSpec   `json:"spec"`
	Status   ScheduledEventStatus `json:"status"`
}

// RequiredMachines is one line of an event's needs.
type RequiredMachines struct {
	MachineTemplate  string       `json:"machineTemplate"`
	Count            int          `json:"count"`
	MachineType      MachineType  `json:"machineType,omitempty"`
	BindStrategy     BindStrategy `json:"bindStrategy,omitempty"`
	CreateMachineSet bool         `json:"createMachineSet,omitempty"`
	MachineSets      []string     `json:"machineSets,omitempty"`
}

// ScheduledEventSpec describes an event.
type ScheduledEventSpec struct {
	StartTime             time.Time          `json:"startTime"`
	ProvisioningStartTime time.Time          `json:"provisioningStartTime,omitzero"`
	EndTime               time.Time          `json:"endTime"`
	ExpirationStrategy    ExpirationStrategy `json:"expirationStrategy,omitempty"`
	RequiredMachines      []RequiredMachines `json:"requiredMachines,omitempty"`
	// ExpectedUsers multiplies the count of User machines (0 counts as 1).
	ExpectedUsers int `json:"expectedUsers,omitempty"`
}

// ScheduledEventStatus is written by the event's owner.
type ScheduledEventStatus struct {
	Phase              EventPhase `json:"phase,omitempty"`
	CreatedMachineSets []string   `json:"createdMachineSets,omitempty"`
}

// Meta returns the metadata.
func (o *ScheduledEvent) Meta() *ObjectMeta { return &o.Metadata }

// ProvisioningStart is the provisioning start time or its default (start - 30m).
func (o *ScheduledEvent) ProvisioningStart() time.Time {
	if !o.Spec.ProvisioningStartTime.IsZero() {
		return o.Spec.ProvisioningStartTime
	}
	return o.Spec.StartTime.Add(-DefaultProvisioningLead)
}

// Validate checks the event.
func (o *ScheduledEvent) Validate() error {
	if err := checkKind(o.Kind, KindScheduledEvent); err != nil {
		return err
	}
	if err := o.Metadata.Validate(); err != nil {
		return err
	}
	s := &o.Spec
	if s.StartTime.IsZero() {
		return Invalid("spec.startTime", "is required")
	}
	if s.EndTime.IsZero() {
		return Invalid("spec.endTime", "is required")
	}
	if !s.EndTime.After(s.StartTime) {
		return Invalid("spec.endTime", "must be after spec.startTime")
	}
	if !s.ProvisioningStartTime.IsZero() && s.ProvisioningStartTime.After(s.StartTime) {
		return Invalid("spec.provisioningStartTime", "must not be after spec.startTime")
	}
	if s.ExpectedUsers < 0 {
		return Invalid("spec.expectedUsers", "must not be negative")
	}
	if s.ExpirationStrategy != "" {
		if err := oneOf("spec.expirationStrategy", s.ExpirationStrategy, ExpireCutOff, ExpireSoft); err != nil {
			return err
		}
	}
	for i, r := range s.RequiredMachines {
		f := fieldIdx("spec.requiredMachines", i)
		if err := ValidateName(f+".machineTemplate", r.MachineTemplate); err != nil {
			return err
		}
		if r.Count < 1 {
			return Invalid(f+".count", "must be at least 1")
		}
		if r.MachineType != "" {
			if err := oneOf(f+".machineType", r.MachineType, MachineTypeUser, MachineTypeShared); err != nil {
				return err
			}
		}
		if r.BindStrategy != "" {
			if err := oneOf(f+".bindStrategy", r.BindStrategy, BindAny, BindPreferMachineSets, BindRequireMachineSets); err != nil {
				return err
			}
		}
		if err := validateRefs(f+".machineSets", r.MachineSets); err != nil {
			return err
		}
	}
	return nil
}
