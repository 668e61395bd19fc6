package types

// Placement is how candidates are ranked.
type Placement string

// Placement policies.
const (
	// PlacementPack fills the busiest node that fits.
	PlacementPack Placement = "pack"
	// PlacementSpread picks the least loaded node.
	PlacementSpread Placement = "spread"
)

// Environment is where a provider allocates: a set of nodes by label, or a cloud
// account and region.
type Environment struct {
	TypeMeta
	Metadata ObjectMeta        `json:"metadata"`
	Spec     EnvironmentSpec   `json:"spec"`
	Status   EnvironmentStatus `json:"status,omitzero"`
}

// EnvironmentStatus is the environment's state. hf keeps no conditions of
// its own on an environment; it keeps those an admin writes.
type EnvironmentStatus struct {
	Conditions Conditions `json:"conditions,omitempty"`
}

// EnvironmentSpec describes an environment.
type EnvironmentSpec struct {
	// DisplayName is the environment's pretty name.
	DisplayName string `json:"displayName,omitempty"`
	// Provider names the Provider object (not its display name) whose
	// machines the environment holds.
	Provider string `json:"provider"`
	// ProviderConfiguration is the provider's configuration here, keys and
	// values as the Provider's configurationItems define them; it takes
	// precedence over the MachineTemplate's.
	ProviderConfiguration map[string]string `json:"providerConfiguration,omitempty"`
	// TemplateSpecific is configuration for one MachineTemplate here (by
	// template name), taking precedence over ProviderConfiguration.
	TemplateSpecific map[string]map[string]string `json:"templateSpecific,omitempty"`
	// MachineNamePrefix starts the names of the machines made here; it
	// overrides the template's, and a MachineSet's overrides it.
	MachineNamePrefix string `json:"machineNamePrefix,omitempty"`
	// Capacity caps machines per template in this environment (optional).
	Capacity map[string]int `json:"capacity,omitempty"`
	// Endpoints per protocol.
	Endpoints map[string]string `json:"endpoints,omitempty"`
	// NodeSelector limits the nodes by label.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// Placement overrides the cluster's placement policy.
	Placement Placement `json:"placement,omitempty"`
}

// Meta returns the metadata.
func (o *Environment) Meta() *ObjectMeta { return &o.Metadata }

// Validate checks the environment.
func (o *Environment) Validate() error {
	if err := o.TypeMeta.check(KindEnvironment); err != nil {
		return err
	}
	if err := o.Metadata.Validate(); err != nil {
		return err
	}
	if o.Spec.Provider == "" {
		return Invalid("spec.provider", "is required")
	}
	if o.Spec.Placement != "" {
		if err := oneOf("spec.placement", o.Spec.Placement, PlacementPack, PlacementSpread); err != nil {
			return err
		}
	}
	if err := validatePrefix("spec.machineNamePrefix", o.Spec.MachineNamePrefix); err != nil {
		return err
	}
	for t := range o.Spec.TemplateSpecific {
		if err := ValidateName("spec.templateSpecific."+t, t); err != nil {
			return err
		}
	}
	if err := ValidateConditions("status.conditions", o.Status.Conditions); err != nil {
		return err
	}
	for k, v := range o.Spec.Capacity {
		if err := nonNegative("spec.capacity."+k, v); err != nil {
			return err
		}
	}
	return ValidateLabels("spec.nodeSelector", o.Spec.NodeSelector)
}
