package native

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// cgroup2Magic is CGROUP2_SUPER_MAGIC, the f_type of a cgroup2 file system.
const cgroup2Magic = 0x63677270

// probeCgroups checks whether machines can get cgroups under path and limits
// in them, and prepares the parent cgroup when they can.
func probeCgroups(path string) cgroupSetup {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return cgroupSetup{Reason: fmt.Sprintf("cannot read %s: %v", path, err)}
	}
	if int64(st.Type) != cgroup2Magic {
		return cgroupSetup{Reason: path + " is not a cgroup2 file system (cgroup v1 or hybrid host; set cgroup_path)"}
	}
	if err := syscall.Access(path, 2 /* W_OK */); err != nil {
		return cgroupSetup{Reason: path + " is not writable by hf-node"}
	}
	parent := filepath.Join(path, cgroupParentName)
	if err := os.Mkdir(parent, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return cgroupSetup{Reason: fmt.Sprintf("cannot make %s: %v", parent, err)}
	}
	setup := cgroupSetup{Parent: parent}
	b, err := os.ReadFile(filepath.Join(path, "cgroup.controllers"))
	if err != nil {
		setup.Reason = fmt.Sprintf("cannot read the controllers of %s: %v", path, err)
		return setup
	}
	have := strings.Fields(string(b))
	var missing []string
	for _, c := range []string{"cpu", "memory"} {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		setup.Reason = fmt.Sprintf("cgroup controllers %s are not available at %s", strings.Join(missing, ", "), path)
		return setup
	}
	for _, dir := range []string{path, parent} {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+cpu +memory"), 0); err != nil {
			setup.Reason = fmt.Sprintf("cannot enable the cpu and memory controllers in %s: %v", dir, err)
			return setup
		}
	}
	setup.Limits = true
	// The pids controller bounds a fork bomb; without it the others still hold.
	if slices.Contains(have, "pids") {
		setup.Pids = true
		for _, dir := range []string{path, parent} {
			if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+pids"), 0); err != nil {
				setup.Pids = false
				break
			}
		}
	}
	return setup
}

// createCgroup makes the machine's cgroup and writes its limits.
// pids bounds its processes where the pids controller is on.
func createCgroup(setup cgroupSetup, id string, res types.Resources, pids int64) (string, error) {
	dir := filepath.Join(setup.Parent, id)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("create cgroup: %w", err)
	}
	if !setup.Limits {
		return dir, nil
	}
	if !setup.Pids {
		pids = 0
	}
	for file, v := range cgroupLimits(res, pids) {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(v), 0o644); err != nil {
			return dir, fmt.Errorf("cgroup %s: set %s to %s: %w", dir, file, v, err)
		}
	}
	return dir, nil
}

// cgroupCPUUsec reads usage_usec from the cgroup v2 dir's cpu.stat; false
// when there is no such dir or file.
func cgroupCPUUsec(dir string) (uint64, bool) {
	if dir == "" {
		return 0, false
	}
	b, err := os.ReadFile(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "usage_usec "); ok {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// cgroupProcs lists the processes in the cgroup dir (none when it is gone).
func cgroupProcs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// killCgroup kills every process in the cgroup at once (cgroup.kill, Linux
// 5.14+); false when the kernel has no cgroup.kill.
func killCgroup(dir string) bool {
	return os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0) == nil
}

// removeCgroup kills what is left in the cgroup and removes it. rmdir fails
// while dying processes linger, so it retries until ctx ends.
func removeCgroup(ctx context.Context, dir string) error {
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if len(cgroupProcs(dir)) > 0 {
		killCgroup(dir)
	}
	for {
		err := syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			return fmt.Errorf("remove cgroup %s: %w", dir, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("remove cgroup %s: still busy: %w", dir, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
