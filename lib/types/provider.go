package types

// Provider is a driver type as seen by users.
type Provider struct {
	TypeMeta
	Metadata ObjectMeta   `json:"metadata"`
	Spec     ProviderSpec `json:"spec"`
}

// ProviderSpec lists what a provider takes and reports.
type ProviderSpec struct {
	// Driver is the driver type behind the provider; defaults to the name.
	Driver string `json:"driver,omitempty"`
	// ConfigurationItems are the keys an Environment may set, with a description.
	ConfigurationItems map[string]string `json:"configurationItems,omitempty"`
	// MachineInformation are the keys the driver reports for each machine.
	MachineInformation []string `json:"machineInformation,omitempty"`
}

// Meta returns the metadata.
func (o *Provider) Meta() *ObjectMeta { return &o.Metadata }

// Validate checks the provider.
func (o *Provider) Validate() error {
	if err := checkKind(o.Kind, KindProvider); err != nil {
		return err
	}
	return o.Metadata.Validate()
}
