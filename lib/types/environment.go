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
	Metadata ObjectMeta      `json:"metadata"`
	Spec     EnvironmentSpec `json:"spec"`
}

// EnvironmentSpec describes an environment.
type EnvironmentSpec struct {
	Provider              string                       `json:"provider"`
	ProviderConfiguration map[string]string            `json:"providerConfiguration,omitempty"`
	TemplateSpecific      map[string]map[string]string `json:"templateSpecific,omitempty"`
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
	if err := checkKind(o.Kind, KindEnvironment); err != nil {
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
	for k, v := range o.Spec.Capacity {
		if err := nonNegative("spec.capacity."+k, v); err != nil {
			return err
		}
	}
	return ValidateLabels("spec.nodeSelector", o.Spec.NodeSelector)
}
