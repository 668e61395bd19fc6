package native

import (
	"fmt"
	"math"
	"strconv"

	"github.com/hf-fleet/hf/lib/types"
)

// cpuPeriod is the cgroup v2 cpu.max period in microseconds (the kernel's
// default): a quota of 1.5 periods is 1.5 CPUs.
const cpuPeriod = 100000

const gib = 1 << 30

// cgroupParentName is the cgroup under the configured cgroup_path that holds a
// child cgroup per machine.
const cgroupParentName = "hf-native"

// cgroupSetup is what the driver found out about cgroups when it prepared.
type cgroupSetup struct {
	// Parent is the directory the machines' cgroups go in; "" when the driver
	// cannot make cgroups (then limits are not enforced either).
	Parent string
	// Limits is true when the cpu and memory controllers are on for them.
	Limits bool
	// Pids is true when the pids controller is on too, so a machine's
	// processes are bounded (pids.max).
	Pids bool
	// Reason says why limits are not enforced.
	Reason string
}

// describe says how limits stand, for the node's driver status.
func (s cgroupSetup) describe() string {
	switch {
	case s.Limits && s.Pids:
		return "cpu, memory and process limits enforced with cgroup v2 (" + s.Parent + ")"
	case s.Limits:
		return "cpu and memory limits enforced with cgroup v2 (" + s.Parent + "); no process limit: the pids controller is not available"
	}
	return "resource limits not enforced: " + s.Reason
}

// cgroupLimits returns the cgroup v2 files and values that hold a machine to
// res: cpu.max from CPUs, memory.max from RAM (a zero resource is
// unlimited), and pids.max from pids when it is positive.
func cgroupLimits(res types.Resources, pids int64) map[string]string {
	out := map[string]string{}
	if pids > 0 {
		out["pids.max"] = strconv.FormatInt(pids, 10)
	}
	if res.CPU > 0 {
		quota := int64(math.Ceil(res.CPU * cpuPeriod))
		out["cpu.max"] = fmt.Sprintf("%d %d", quota, cpuPeriod)
	}
	if res.RAMGB > 0 {
		out["memory.max"] = strconv.FormatInt(int64(math.Ceil(res.RAMGB*gib)), 10)
	}
	return out
}
