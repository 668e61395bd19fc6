package types

import "encoding/json"

// MachineType says whether a machine serves one user or is shared.
type MachineType string

// Machine types.
const (
	MachineTypeUser   MachineType = "User"
	MachineTypeShared MachineType = "Shared"
)

// LostPolicy says what happens to a claim whose machine was lost with its node.
type LostPolicy string

// Lost policies.
const (
	// LostRebind binds the claim again elsewhere (the default).
	LostRebind LostPolicy = "Rebind"
	// LostFail marks the claim Failed.
	LostFail LostPolicy = "Fail"
)

// MachineTemplate is what a machine is.
type MachineTemplate struct {
	TypeMeta
	Metadata ObjectMeta          `json:"metadata"`
	Spec     MachineTemplateSpec `json:"spec"`
}

// MachineTemplateSpec describes a machine.
type MachineTemplateSpec struct {
	MachineType MachineType `json:"machineType,omitempty"`
	Resources   Resources   `json:"resources"`
	// ProviderConfiguration holds per-driver options; its keys are the driver
	// types (or instance names) that can serve the template.
	ProviderConfiguration map[string]json.RawMessage `json:"providerConfiguration"`
	ConnectProtocols      []string                   `json:"connectProtocols,omitempty"`
	// AllowOverbook lets claims of this template use the drivers' overbook.
	AllowOverbook bool `json:"allowOverbook,omitempty"`
	// OnNodeLoss says what a claim does when its machine's node is lost.
	OnNodeLoss LostPolicy `json:"onNodeLoss,omitempty"`
	// ClaimMetadata lists the metadata keys a claim of this template may set;
	// a claim's metadata reaches the machine under these keys only, and only
	// as data (environment variables, user data, labels).
	ClaimMetadata []MetadataKey `json:"claimMetadata,omitempty"`
}

// Meta returns the metadata.
func (o *MachineTemplate) Meta() *ObjectMeta { return &o.Metadata }

// Validate checks the template.
func (o *MachineTemplate) Validate() error {
	if err := checkKind(o.Kind, KindMachineTemplate); err != nil {
		return err
	}
	if err := o.Metadata.Validate(); err != nil {
		return err
	}
	s := &o.Spec
	if s.MachineType != "" {
		if err := oneOf("spec.machineType", s.MachineType, MachineTypeUser, MachineTypeShared); err != nil {
			return err
		}
	}
	if s.OnNodeLoss != "" {
		if err := oneOf("spec.onNodeLoss", s.OnNodeLoss, LostRebind, LostFail); err != nil {
			return err
		}
	}
	if err := s.Resources.Validate("spec.resources"); err != nil {
		return err
	}
	if err := validateMetadataKeys("spec.claimMetadata", s.ClaimMetadata); err != nil {
		return err
	}
	if len(s.ProviderConfiguration) == 0 {
		return Invalid("spec.providerConfiguration", "must name at least one provider")
	}
	for k, v := range s.ProviderConfiguration {
		if k == "" {
			return Invalid("spec.providerConfiguration", "has an empty provider name")
		}
		if len(v) > 0 && !json.Valid(v) {
			return Invalid("spec.providerConfiguration."+k, "is not valid JSON")
		}
	}
	return nil
}
