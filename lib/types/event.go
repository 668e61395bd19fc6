package types

import (
	"bytes"
	"encoding/json"
	"time"
)

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

// PrintingOption says whether users may print the event's content.
type PrintingOption string

// Printing options.
const (
	PrintingEnabled  PrintingOption = "PrintingEnabled"
	PrintingDisabled PrintingOption = "PrintingDisabled"
)

// RequiredMachines is one line of an event's needs (the proposal's
// MachineRequirement): Count machines of MachineTemplate per user (User) or
// for the whole event (Shared), bound by BindStrategy from
// PreferRequireMachineSets and from the set CreateMachineSet describes.
type RequiredMachines struct {
	MachineTemplate string       `json:"machineTemplate"`
	Count           int          `json:"count"`
	MachineType     MachineType  `json:"machineType,omitempty"`
	BindStrategy    BindStrategy `json:"bindStrategy,omitempty"`
	// CreateMachineSet, when set, is the spec of a set the event creates
	// for the line (its empty fields filled from the line: template,
	// availability to the event, AutoScale keeping the line's machines
	// ready). The earlier form, true, is an empty spec.
	CreateMachineSet *CreateMachineSet `json:"createMachineSet,omitempty"`
	// MachineSets are existing sets the line prefers or requires.
	MachineSets []string `json:"preferRequireMachineSets,omitempty"`
	// LegacyMachineSets is the earlier name of MachineSets: read, moved
	// there (see Upgrade) and never written.
	LegacyMachineSets []string `json:"machineSets,omitempty"`
}

// CreateMachineSet is a requiredMachines line's createMachineSet: a
// MachineSet spec. It also decodes from the earlier boolean form (true: an
// empty spec; false: none).
type CreateMachineSet struct {
	MachineSetSpec
	none bool
}

// UnmarshalJSON takes a MachineSet spec (strictly: no unknown fields) or a
// boolean.
func (c *CreateMachineSet) UnmarshalJSON(b []byte) error {
	switch t := bytes.TrimSpace(b); string(t) {
	case "true", "null":
		*c = CreateMachineSet{}
		return nil
	case "false":
		*c = CreateMachineSet{none: true}
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var s MachineSetSpec
	if err := dec.Decode(&s); err != nil {
		return err
	}
	*c = CreateMachineSet{MachineSetSpec: s}
	return nil
}

// MarshalJSON writes the spec, without the fields it leaves empty (the
// event fills them from the line).
func (c CreateMachineSet) MarshalJSON() ([]byte, error) {
	b, err := json.Marshal(c.MachineSetSpec)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(b, &fields); err != nil {
		return nil, err
	}
	for k, v := range fields {
		switch string(v) {
		case `""`, "0", "null", "{}", "[]", `{"availability":""}`:
			delete(fields, k)
		}
	}
	return json.Marshal(fields)
}

// Creates reports whether the line has the event create a set.
func (r *RequiredMachines) Creates() bool {
	return r.CreateMachineSet != nil && !r.CreateMachineSet.none
}

// ScheduledEventSpec describes an event.
type ScheduledEventSpec struct {
	// DisplayName is the event's pretty name.
	DisplayName           string             `json:"displayName,omitempty"`
	StartTime             time.Time          `json:"startTime"`
	ProvisioningStartTime time.Time          `json:"provisioningStartTime,omitzero"`
	EndTime               time.Time          `json:"endTime"`
	ExpirationStrategy    ExpirationStrategy `json:"expirationStrategy,omitempty"`
	RequiredMachines      []RequiredMachines `json:"requiredMachines,omitempty"`
	// PrintingOption says whether users may print the content.
	PrintingOption PrintingOption `json:"printingOption,omitempty"`
	// Scenarios and Courses are the content the event grants (kept for the
	// UI; hf has no content of its own).
	Scenarios []string `json:"scenarios,omitempty"`
	Courses   []string `json:"courses,omitempty"`
	// ExpectedUsers multiplies the count of User machines (0 counts as 1).
	ExpectedUsers int `json:"expectedUsers,omitempty"`
}

// ScheduledEventStatus is written by the event's owner.
type ScheduledEventStatus struct {
	Phase EventPhase `json:"phase,omitempty"`
	// Conditions: Provisioned (whether the event's sets could be made, and
	// if not why).
	Conditions         Conditions `json:"conditions,omitempty"`
	CreatedMachineSets []string   `json:"createdMachineSets,omitempty"`
}

// ConditionProvisioned is an event's condition: whether its sets are made.
const ConditionProvisioned = "Provisioned"

// Upgrade moves earlier field names to the proposal's.
func (o *ScheduledEvent) Upgrade() {
	for i := range o.Spec.RequiredMachines {
		r := &o.Spec.RequiredMachines[i]
		if len(r.MachineSets) == 0 {
			r.MachineSets = r.LegacyMachineSets
		}
		r.LegacyMachineSets = nil
		if r.CreateMachineSet != nil {
			r.CreateMachineSet.AvailabilityConfiguration.upgrade()
			if r.CreateMachineSet.none {
				r.CreateMachineSet = nil
			}
		}
	}
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
	if err := o.TypeMeta.check(KindScheduledEvent); err != nil {
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
	if err := atMost("spec.expectedUsers", s.ExpectedUsers, MaxUsers); err != nil {
		return err
	}
	if err := atMost("spec.requiredMachines", len(s.RequiredMachines), 100); err != nil {
		return err
	}
	if s.PrintingOption != "" {
		if err := oneOf("spec.printingOption", s.PrintingOption, PrintingEnabled, PrintingDisabled); err != nil {
			return err
		}
	}
	if err := validateRefs("spec.scenarios", s.Scenarios); err != nil {
		return err
	}
	if err := validateRefs("spec.courses", s.Courses); err != nil {
		return err
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
		if err := atMost(f+".count", r.Count, MaxCount); err != nil {
			return err
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
		// A claim under the event lists these and the set the line creates.
		if err := validateSetList(f+".preferRequireMachineSets", r.MachineSets, MaxClaimMachineSets-1); err != nil {
			return err
		}
		if r.MachineType == MachineTypeShared && !r.Creates() {
			return Invalid(f+".createMachineSet", "is required for Shared machines: the event makes the count machines its users share")
		}
		if r.BindStrategy == BindRequireMachineSets && len(r.MachineSets) == 0 && !r.Creates() {
			return Invalid(f+".preferRequireMachineSets", "is required with bindStrategy RequireMachineSets when no machine set is created")
		}
		if r.Creates() {
			c := r.CreateMachineSet.MachineSetSpec
			if c.AvailabilityConfiguration.Availability == "" {
				c.AvailabilityConfiguration = AvailabilityConfiguration{Availability: AvailabilityScheduledEvent, Value: o.Metadata.Name}
			}
			if c.MachineTemplate == "" {
				c.MachineTemplate = r.MachineTemplate
			} else if c.MachineTemplate != r.MachineTemplate {
				return Invalid(f+".createMachineSet.machineTemplate", "must be the line's machineTemplate %q", r.MachineTemplate)
			}
			if err := c.validate(f + ".createMachineSet"); err != nil {
				return err
			}
		}
	}
	return nil
}
