package drivers

import (
	"context"
	"errors"
	"fmt"
	"math"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/disk"
	"github.com/shirou/gopsutil/v4/mem"

	"github.com/hf-fleet/hf/lib/types"
)

const gib = 1 << 30

// HostResources reads what this host has: logical CPUs and RAM in GiB and, when
// diskPath is given, the size in GiB of the file system that holds it. Sizes are
// rounded down to 0.01 GiB. At most one diskPath may be given.
func HostResources(ctx context.Context, diskPath ...string) (types.Resources, error) {
	if len(diskPath) > 1 {
		return types.Resources{}, errors.New("host resources: at most one disk path")
	}
	cpus, err := cpu.CountsWithContext(ctx, true)
	if err != nil {
		return types.Resources{}, fmt.Errorf("host resources: count cpus: %w", err)
	}
	if cpus <= 0 {
		return types.Resources{}, errors.New("host resources: no cpus found")
	}
	vm, err := mem.VirtualMemoryWithContext(ctx)
	if err != nil {
		return types.Resources{}, fmt.Errorf("host resources: read memory: %w", err)
	}
	r := types.Resources{CPU: float64(cpus), RAMGB: toGiB(vm.Total)}
	if len(diskPath) == 1 && diskPath[0] != "" {
		u, err := disk.UsageWithContext(ctx, diskPath[0])
		if err != nil {
			return types.Resources{}, fmt.Errorf("host resources: disk of %s: %w", diskPath[0], err)
		}
		r.DiskGB = toGiB(u.Total)
	}
	return r, nil
}

func toGiB(bytes uint64) float64 {
	return math.Floor(float64(bytes)/gib*100) / 100
}
