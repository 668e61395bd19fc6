package testdriver

import (
	"math"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// Config is the test driver's configuration (JSON, snake_case keys).
type Config struct {
	// CPUs is the host CPUs the driver pretends to have.
	CPUs float64 `json:"cpus"`
	// RAMGB is the host RAM (GiB) the driver pretends to have.
	RAMGB float64 `json:"ram_gb"`
	// DiskGB is the host disk (GiB) the driver pretends to have.
	DiskGB float64 `json:"disk_gb"`
	// Delay is how long each allocation takes ("250ms").
	Delay types.Duration `json:"delay"`
	// FailureRate is the probability (0..1) that an allocation fails.
	FailureRate float64 `json:"failure_rate"`
	drivers.Alter
}

// DefaultConfig returns the configuration used for absent keys: 4 CPUs, 8 GiB.
func DefaultConfig() Config {
	return Config{CPUs: 4, RAMGB: 8}
}

// ParseConfig decodes cfg strictly over the defaults and validates it.
func ParseConfig(cfg []byte) (Config, error) {
	c := DefaultConfig()
	if err := drivers.DecodeConfig(cfg, &c); err != nil {
		return Config{}, err
	}
	return c, c.Validate()
}

// Validate checks the configuration; the error names the key.
func (c Config) Validate() error {
	for _, f := range []struct {
		key string
		v   float64
	}{{"cpus", c.CPUs}, {"ram_gb", c.RAMGB}, {"disk_gb", c.DiskGB}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return types.Invalid(f.key, "must be a non-negative number")
		}
	}
	if c.Delay.Duration < 0 {
		return types.Invalid("delay", "must not be negative")
	}
	if math.IsNaN(c.FailureRate) || c.FailureRate < 0 || c.FailureRate > 1 {
		return types.Invalid("failure_rate", "must be between 0 and 1")
	}
	return c.Alter.Validate()
}

// Capacity is the host the driver pretends to be, with the alter settings applied.
func (c Config) Capacity() types.Capacity {
	return c.Alter.Capacity(types.Resources{CPU: c.CPUs, RAMGB: c.RAMGB, DiskGB: c.DiskGB})
}

// TemplateConfig is the template's providerConfiguration entry for the test driver.
type TemplateConfig struct {
	// Fail makes every allocation of the template fail (for tests).
	Fail bool `json:"fail"`
	// Delay, when set, replaces the driver's delay for this template.
	Delay *types.Duration `json:"delay"`
	// Label is any text; the machine's resource records it (a test sees
	// what configuration reached the driver).
	Label string `json:"label,omitempty"`
}

// ParseTemplateConfig decodes a template entry (empty or `{}` is fine) strictly.
func ParseTemplateConfig(raw []byte) (TemplateConfig, error) {
	var tc TemplateConfig
	if err := drivers.DecodeConfig(raw, &tc); err != nil {
		return TemplateConfig{}, err
	}
	if tc.Delay != nil && tc.Delay.Duration < 0 {
		return TemplateConfig{}, types.Invalid("delay", "must not be negative")
	}
	return tc, nil
}
