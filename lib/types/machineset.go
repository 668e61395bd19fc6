package types

// AvailabilityType says who may bind machines of a set.
type AvailabilityType string

// Availability types.
const (
	AvailabilityPool           AvailabilityType = "Pool"
	AvailabilityAccessCode     AvailabilityType = "AccessCode"
	AvailabilityScheduledEvent AvailabilityType = "ScheduledEvent"
)

// ProvisioningStrategy says when a set creates machines.
type ProvisioningStrategy string

// Provisioning strategies.
const (
	ProvisionAutoScale ProvisioningStrategy = "AutoScale"
	ProvisionOnDemand  ProvisioningStrategy = "OnDemand"
)

// MachineSet is a pool of identical machines.
type MachineSet struct {
	TypeMeta
	Metadata ObjectMeta       `json:"metadata"`
	Spec     MachineSetSpec   `json:"spec"`
	Status   MachineSetStatus `json:"status"`
}

// AvailabilityConfiguration says who may bind the set's machines.
type AvailabilityConfiguration struct {
	Availability AvailabilityType `json:"availability"`
	// Value names the AccessCode or ScheduledEvent of the availability.
	Value string `json:"value,omitempty"`
	// Type is the earlier name of Availability: read, moved there (see
	// Upgrade) and never written.
	Type AvailabilityType `json:"type,omitempty"`
}

// upgrade moves the earlier field name to the proposal's.
func (a *AvailabilityConfiguration) upgrade() {
	if a.Availability == "" {
		a.Availability = a.Type
	}
	a.Type = ""
}

// MachineSetSpec describes a pool.
type MachineSetSpec struct {
	AvailabilityConfiguration AvailabilityConfiguration `json:"availabilityConfiguration"`
	ProvisioningStrategy      ProvisioningStrategy      `json:"provisioningStrategy,omitempty"`
	MinAvailable              int                       `json:"minAvailable,omitempty"`
	MaxProvisioned            int                       `json:"maxProvisioned,omitempty"`
	MachineTemplate           string                    `json:"machineTemplate"`
	Environment               string                    `json:"environment,omitempty"`
	// Provider names the Provider of the set's machines (by default the
	// Environment's).
	Provider string `json:"provider,omitempty"`
	// ProviderConfiguration is configuration for this set's machines, over
	// the template's and the Environment's.
	ProviderConfiguration map[string]string `json:"providerConfiguration,omitempty"`
	// MachineNamePrefix starts the names of the set's machines; it
	// overrides the Environment's and the template's.
	MachineNamePrefix string `json:"machineNamePrefix,omitempty"`
	// MaxIdle reaps an assigned machine idle this long (0: default).
	MaxIdle Duration `json:"maxIdle,omitzero"`
	// MaxAssigned reaps a machine assigned this long (0: default).
	MaxAssigned Duration `json:"maxAssigned,omitzero"`
	// MaxAge reaps an unassigned machine older than this (0: default).
	MaxAge Duration `json:"maxAge,omitzero"`
}

// MachineSetStatus is written by the set's reconcile owner.
type MachineSetStatus struct {
	// Conditions say why the set cannot fill (type Filled).
	Conditions  Conditions `json:"conditions,omitempty"`
	Provisioned int        `json:"provisioned"`
	Available   int        `json:"available"`
}

// ConditionFilled is a set's condition: whether it holds the machines it
// wants, and if not why.
const ConditionFilled = "Filled"

// Upgrade moves earlier field names to the proposal's.
func (o *MachineSet) Upgrade() { o.Spec.AvailabilityConfiguration.upgrade() }

// Meta returns the metadata.
func (o *MachineSet) Meta() *ObjectMeta { return &o.Metadata }

// Validate checks the set.
func (o *MachineSet) Validate() error {
	if err := o.TypeMeta.check(KindMachineSet); err != nil {
		return err
	}
	if err := o.Metadata.Validate(); err != nil {
		return err
	}
	s := &o.Spec
	return s.validate("spec")
}

// validate checks a set's spec (also as a requiredMachines line's
// createMachineSet, under field).
func (s *MachineSetSpec) validate(field string) error {
	if err := oneOf(field+".availabilityConfiguration.availability", s.AvailabilityConfiguration.Availability,
		AvailabilityPool, AvailabilityAccessCode, AvailabilityScheduledEvent); err != nil {
		return err
	}
	if s.AvailabilityConfiguration.Availability != AvailabilityPool {
		if err := ValidateName(field+".availabilityConfiguration.value", s.AvailabilityConfiguration.Value); err != nil {
			return err
		}
	}
	if s.ProvisioningStrategy != "" {
		if err := oneOf(field+".provisioningStrategy", s.ProvisioningStrategy, ProvisionAutoScale, ProvisionOnDemand); err != nil {
			return err
		}
	}
	if err := nonNegative(field+".minAvailable", s.MinAvailable); err != nil {
		return err
	}
	if err := nonNegative(field+".maxProvisioned", s.MaxProvisioned); err != nil {
		return err
	}
	if err := atMost(field+".minAvailable", s.MinAvailable, MaxCount); err != nil {
		return err
	}
	if err := atMost(field+".maxProvisioned", s.MaxProvisioned, MaxCount); err != nil {
		return err
	}
	if s.MaxProvisioned > 0 && s.MinAvailable > s.MaxProvisioned {
		return Invalid(field+".minAvailable", "must not exceed maxProvisioned")
	}
	if err := ValidateName(field+".machineTemplate", s.MachineTemplate); err != nil {
		return err
	}
	for f, d := range map[string]Duration{".maxIdle": s.MaxIdle, ".maxAssigned": s.MaxAssigned, ".maxAge": s.MaxAge} {
		if d.Duration < 0 {
			return Invalid(field+f, "must not be negative")
		}
	}
	if err := validatePrefix(field+".machineNamePrefix", s.MachineNamePrefix); err != nil {
		return err
	}
	if err := validateRef(field+".provider", s.Provider); err != nil {
		return err
	}
	return validateRef(field+".environment", s.Environment)
}
