package types

// Provider is a driver type as seen by users: what its Environments and
// MachineTemplates may configure, and what it reports of each machine.
type Provider struct {
	TypeMeta
	Metadata ObjectMeta   `json:"metadata"`
	Spec     ProviderSpec `json:"spec"`
}

// ProviderSpec lists what a provider takes and reports.
type ProviderSpec struct {
	// Driver is the driver type behind the provider; defaults to the name.
	Driver string `json:"driver,omitempty"`
	// ConfigurationItems are the properties an Environment, a MachineSet or
	// a MachineTemplate may set for this provider; writes of those objects
	// are checked against them.
	ConfigurationItems Properties `json:"configurationItems,omitempty"`
	// MachineInformation are the properties the provider reports of each
	// machine; the required ones must be in every machine's
	// status.machineInformation once it runs.
	MachineInformation Properties `json:"machineInformation,omitempty"`
}

// DriverType is the driver type behind the provider.
func (o *Provider) DriverType() string {
	if o.Spec.Driver != "" {
		return o.Spec.Driver
	}
	return o.Metadata.Name
}

// Meta returns the metadata.
func (o *Provider) Meta() *ObjectMeta { return &o.Metadata }

// Validate checks the provider.
func (o *Provider) Validate() error {
	if err := o.TypeMeta.check(KindProvider); err != nil {
		return err
	}
	if err := o.Metadata.Validate(); err != nil {
		return err
	}
	if err := o.Spec.ConfigurationItems.validate("spec.configurationItems"); err != nil {
		return err
	}
	return o.Spec.MachineInformation.validate("spec.machineInformation")
}
