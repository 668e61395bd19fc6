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
	Type  AvailabilityType `json:"type"`
	Value string           `json:"value,omitempty"`
}

// MachineSetSpec describes a pool.
type MachineSetSpec struct {
	AvailabilityConfiguration AvailabilityConfiguration `json:"availabilityConfiguration"`
	ProvisioningStrategy      ProvisioningStrategy      `json:"provisioningStrategy,omitempty"`
	MinAvailable              int                       `json:"minAvailable,omitempty"`
	MaxProvisioned            int                       `json:"maxProvisioned,omitempty"`
	MachineTemplate           string                    `json:"machineTemplate"`
	Environment               string                    `json:"environment,omitempty"`
	// MaxIdle reaps an assigned machine idle this long (0: default).
	MaxIdle Duration `json:"maxIdle,omitzero"`
	// MaxAssigned reaps a machine assigned this long (0: default).
	MaxAssigned Duration `json:"maxAssigned,omitzero"`
	// MaxAge reaps an unassigned machine older than this (0: default).
	MaxAge Duration `json:"maxAge,omitzero"`
}

// MachineSetStatus is written by the set's reconcile owner.
type MachineSetStatus struct {
	Provisioned int `json:"provisioned"`
	Available   int `json:"available"`
}

// Meta returns the metadata.
func (o *MachineSet) Meta() *ObjectMeta { return &o.Metadata }

// Validate checks the set.
func (o *MachineSet) Validate() error {
	if err := checkKind(o.Kind, KindMachineSet); err != nil {
		return err
	}
	if err := o.Metadata.Validate(); err != nil {
		return err
	}
	s := &o.Spec
	if err := oneOf("spec.availabilityConfiguration.type", s.AvailabilityConfiguration.Type,
		AvailabilityPool, AvailabilityAccessCode, AvailabilityScheduledEvent); err != nil {
		return err
	}
	if s.AvailabilityConfiguration.Type != AvailabilityPool {
		if err := ValidateName("spec.availabilityConfiguration.value", s.AvailabilityConfiguration.Value); err != nil {
			return err
		}
	}
	if s.ProvisioningStrategy != "" {
		if err := oneOf("spec.provisioningStrategy", s.ProvisioningStrategy, ProvisionAutoScale, ProvisionOnDemand); err != nil {
			return err
		}
	}
	if err := nonNegative("spec.minAvailable", s.MinAvailable); err != nil {
		return err
	}
	if err := nonNegative("spec.maxProvisioned", s.MaxProvisioned); err != nil {
		return err
	}
	if s.MaxProvisioned > 0 && s.MinAvailable > s.MaxProvisioned {
		return Invalid("spec.minAvailable", "must not exceed spec.maxProvisioned")
	}
	if err := ValidateName("spec.machineTemplate", s.MachineTemplate); err != nil {
		return err
	}
	for f, d := range map[string]Duration{"spec.maxIdle": s.MaxIdle, "spec.maxAssigned": s.MaxAssigned, "spec.maxAge": s.MaxAge} {
		if d.Duration < 0 {
			return Invalid(f, "must not be negative")
		}
	}
	return validateRef("spec.environment", s.Environment)
}
