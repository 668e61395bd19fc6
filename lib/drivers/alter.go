package drivers

import (
	"math"

	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/types"
)

// Alter is the capacity adjustment every local driver accepts. Embed it in a
// driver's config struct so its keys sit at the top level of the config:
//
//	type Config struct {
//		drivers.Alter
//		Image string `json:"image"`
//	}
type Alter struct {
	// CPUAlter is added to the host's CPUs; negative keeps some for the host.
	CPUAlter float64 `json:"cpu_alter"`
	// RAMAlter is added to the host's RAM (GiB); negative keeps some for the host.
	RAMAlter float64 `json:"ram_alter"`
	// CPUOverbook is the CPUs claims that allow overbooking may use on top.
	CPUOverbook float64 `json:"cpu_overbook"`
	// RAMOverbook is the RAM (GiB) claims that allow overbooking may use on top.
	RAMOverbook float64 `json:"ram_overbook"`
}

// Validate checks that every value is a finite number and the overbooks are not
// negative; the error names the key.
func (a Alter) Validate() error {
	for _, f := range []struct {
		key      string
		v        float64
		positive bool
	}{
		{"cpu_alter", a.CPUAlter, false},
		{"ram_alter", a.RAMAlter, false},
		{"cpu_overbook", a.CPUOverbook, true},
		{"ram_overbook", a.RAMOverbook, true},
	} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) {
			return types.Invalid(f.key, "must be a finite number")
		}
		if f.positive && f.v < 0 {
			return types.Invalid(f.key, "must not be negative")
		}
	}
	return nil
}

// Capacity applies the alter settings to what the host has: Usable = total +
// alter, floored at 0 (disk is not altered), Overbook = the overbook settings
// (floored at 0). Used, Reserved and Free are left for the caller, which knows
// what is allocated (scheduler.WithUsage fills them). The maths is
// scheduler.HostCapacity's.
func (a Alter) Capacity(total types.Resources) types.Capacity {
	return scheduler.HostCapacity(total, scheduler.Alter(a))
}
