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
	// DisplayName is the template's pretty name.
	DisplayName string      `json:"displayName,omitempty"`
	MachineType MachineType `json:"machineType,omitempty"`
	Resources   Resources   `json:"resources"`
	// ProviderConfiguration holds per-provider options; its keys are the
	// driver types, driver instance names or Provider names that can serve
	// the template. An entry is a JSON object: the proposal's string map
	// (values in the string forms the Provider's configurationItems
	// describe) or the driver's structured configuration. The
	// Environment's configuration takes precedence over it.
	ProviderConfiguration map[string]json.RawMessage `json:"providerConfiguration"`
	// ConnectProtocols are the protocols the machine may be reached by; with
	// the Environment's endpoints they make a machine's connectEndpoints.
	ConnectProtocols []string `json:"connectProtocol,omitempty"`
	// LegacyConnectProtocols is the earlier name of ConnectProtocols: read,
	// moved there (see Upgrade) and never written.
	LegacyConnectProtocols []string `json:"connectProtocols,omitempty"`
	// MachineNamePrefix starts the names of the template's machines; an
	// Environment's or a MachineSet's overrides it.
	MachineNamePrefix string `json:"machineNamePrefix,omitempty"`
	// AllowOverbook lets claims of this template use the drivers' overbook.
	AllowOverbook bool `json:"allowOverbook,omitempty"`
	// OnNodeLoss says what a claim does when its machine's node is lost.
	OnNodeLoss LostPolicy `json:"onNodeLoss,omitempty"`
	// ClaimMetadata lists the metadata keys a claim of this template may set;
	// a claim's metadata reaches the machine under these keys only, and only
	// as data (environment variables, user data, labels).
	ClaimMetadata []MetadataKey `json:"claimMetadata,omitempty"`
}

// Upgrade moves earlier field names to the proposal's.
func (o *MachineTemplate) Upgrade() {
	s := &o.Spec
	if len(s.ConnectProtocols) == 0 {
		s.ConnectProtocols = s.LegacyConnectProtocols
	}
	s.LegacyConnectProtocols = nil
}

// Meta returns the metadata.
func (o *MachineTemplate) Meta() *ObjectMeta { return &o.Metadata }

// Validate checks the template.
func (o *MachineTemplate) Validate() error {
	if err := o.TypeMeta.check(KindMachineTemplate); err != nil {
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
	if err := validatePrefix("spec.machineNamePrefix", s.MachineNamePrefix); err != nil {
		return err
	}
	for i, p := range s.ConnectProtocols {
		if p == "" || len(p) > 32 {
			return Invalid(fieldIdx("spec.connectProtocol", i), "must be 1 to 32 characters")
		}
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
