package native

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hf-fleet/hf/lib/types"
)

// cpuPeriod is the CPU quota period in microseconds (the kernel's default):
// a quota of 1.5 periods is 1.5 CPUs.
const cpuPeriod = 100000

const gib = 1 << 30

// cgroupParentName is the cgroup under the configured cgroup_path (in each
// hierarchy on cgroup v1) that holds a child cgroup per machine.
const cgroupParentName = "hf-native"

// cgroupSetup is what the driver found out about cgroups when it prepared.
type cgroupSetup struct {
	// Parent is the directory the machines' cgroups go in (on cgroup v1, in
	// the first hierarchy of V1); "" when the driver cannot make cgroups
	// (then limits are not enforced either).
	Parent string
	// V1 lists, on a cgroup v1 (or hybrid) host, the hierarchies a machine
	// joins, each with its parent directory; empty with cgroup v2.
	V1 []cgroupHierarchy
	// Limits is true when the cpu and memory controllers are on for them.
	Limits bool
	// Pids is true when the pids controller is on too, so a machine's
	// processes are bounded (pids.max).
	Pids bool
	// Reason says why limits are not enforced.
	Reason string
}

// cgroupHierarchy is one cgroup v1 hierarchy: the directory of the driver's
// parent cgroup in it, and the controllers it carries.
type cgroupHierarchy struct {
	Parent      string
	Controllers []string
}

// describe says how limits stand, for the node's driver status.
func (s cgroupSetup) describe() string {
	where := "cgroup v2 (" + s.Parent + ")"
	if len(s.V1) > 0 {
		where = "cgroup v1 (" + strings.Join(s.parents(), ", ") + ")"
	}
	switch {
	case s.Limits && s.Pids:
		return "cpu, memory and process limits enforced with " + where
	case s.Limits:
		return "cpu and memory limits enforced with " + where + "; no process limit: the pids controller is not available"
	}
	return "resource limits not enforced: " + s.Reason
}

// parents lists the directories the machines' cgroups go in: Parent, or
// the parent in each cgroup v1 hierarchy.
func (s cgroupSetup) parents() []string {
	if len(s.V1) == 0 {
		return []string{s.Parent}
	}
	out := make([]string, len(s.V1))
	for i, h := range s.V1 {
		out[i] = h.Parent
	}
	return out
}

// dirsFor returns the cgroup directories of machine id: one with cgroup v2,
// one in each hierarchy with v1.
func (s cgroupSetup) dirsFor(id string) []string {
	out := s.parents()
	for i, p := range out {
		out[i] = filepath.Join(p, id)
	}
	return out
}

// cgroupFile is one limit: the file of a machine's cgroup and its value.
type cgroupFile struct{ Name, Value string }

// cgroupLimits returns the files and values that hold a machine to res, in
// the order they are written: the CPU quota from CPUs, the memory limit from
// RAM (a zero resource is unlimited), and the process limit from pids when
// it is positive. v1 names cgroup v1's files instead of v2's; there the
// memory-and-swap limit (written only where the host accounts swap) follows
// the memory limit, which it may not be below.
func cgroupLimits(v1 bool, res types.Resources, pids int64) []cgroupFile {
	var out []cgroupFile
	if pids > 0 {
		out = append(out, cgroupFile{"pids.max", strconv.FormatInt(pids, 10)})
	}
	if res.CPU > 0 {
		quota := strconv.FormatInt(int64(math.Ceil(res.CPU*cpuPeriod)), 10)
		if v1 {
			out = append(out, cgroupFile{"cpu.cfs_period_us", strconv.Itoa(cpuPeriod)}, cgroupFile{"cpu.cfs_quota_us", quota})
		} else {
			out = append(out, cgroupFile{"cpu.max", fmt.Sprintf("%s %d", quota, cpuPeriod)})
		}
	}
	if res.RAMGB > 0 {
		mem := strconv.FormatInt(int64(math.Ceil(res.RAMGB*gib)), 10)
		if v1 {
			out = append(out, cgroupFile{"memory.limit_in_bytes", mem}, cgroupFile{memswLimit, mem})
		} else {
			out = append(out, cgroupFile{"memory.max", mem})
		}
	}
	return out
}

// memswLimit is cgroup v1's memory-and-swap limit, present only where the
// kernel accounts swap.
const memswLimit = "memory.memsw.limit_in_bytes"

// controllerOf is the controller a cgroup file belongs to ("cpu" for
// cpu.max).
func controllerOf(file string) string {
	c, _, _ := strings.Cut(file, ".")
	return c
}
