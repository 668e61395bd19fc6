package native

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hf-fleet/hf/lib/types"
)

// cgroup2Magic is CGROUP2_SUPER_MAGIC, the f_type of a cgroup2 file system.
const cgroup2Magic = 0x63677270

// cgroupV1Magic is CGROUP_SUPER_MAGIC, the f_type of a cgroup v1 hierarchy.
const cgroupV1Magic = 0x27e0eb

// v1Controllers are the cgroup v1 controllers a machine joins, the one whose
// hierarchy lists its processes first.
var v1Controllers = []string{"memory", "cpu", "pids", "cpuacct"}

// probeCgroups checks whether machines can get cgroups under path and limits
// in them, and prepares the parent cgroup when they can: path is a cgroup2
// file system, or (a cgroup v1 or hybrid host) holds a hierarchy for each of
// the cpu and memory controllers.
func probeCgroups(path string) cgroupSetup {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return cgroupSetup{Reason: fmt.Sprintf("cannot read %s: %v", path, err)}
	}
	if int64(st.Type) != cgroup2Magic {
		return probeCgroupsV1(path)
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

// probeCgroupsV1 finds the cgroup v1 hierarchies of the controllers a
// machine joins under path (a controller's directory there, or a link to the
// hierarchy that carries it with others, as cpu to cpu,cpuacct) and makes the
// driver's parent cgroup in each.
func probeCgroupsV1(path string) cgroupSetup {
	var found []cgroupHierarchy
	have := map[string]bool{}
	for _, c := range v1Controllers {
		dir, err := filepath.EvalSymlinks(filepath.Join(path, c))
		var st syscall.Statfs_t
		if err != nil || syscall.Statfs(dir, &st) != nil || int64(st.Type) != cgroupV1Magic {
			continue
		}
		have[c] = true
		parent := filepath.Join(dir, cgroupParentName)
		if i := slices.IndexFunc(found, func(h cgroupHierarchy) bool { return h.Parent == parent }); i >= 0 {
			found[i].Controllers = append(found[i].Controllers, c)
			continue
		}
		found = append(found, cgroupHierarchy{Parent: parent, Controllers: []string{c}})
	}
	if !have["cpu"] || !have["memory"] {
		return cgroupSetup{Reason: path + " is not a cgroup2 file system and holds no cgroup v1 hierarchies of the cpu and memory controllers (set cgroup_path)"}
	}
	for _, h := range found {
		if err := syscall.Access(filepath.Dir(h.Parent), 2 /* W_OK */); err != nil {
			return cgroupSetup{Reason: filepath.Dir(h.Parent) + " is not writable by hf-node"}
		}
		if err := os.Mkdir(h.Parent, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return cgroupSetup{Reason: fmt.Sprintf("cannot make %s: %v", h.Parent, err)}
		}
	}
	return cgroupSetup{Parent: found[0].Parent, V1: found, Limits: true, Pids: have["pids"]}
}

// createCgroup makes the machine's cgroups (one with v2, one in each
// hierarchy with v1) and writes its limits. pids bounds its processes where
// the pids controller is on.
func createCgroup(setup cgroupSetup, id string, res types.Resources, pids int64) ([]string, error) {
	dirs := setup.dirsFor(id)
	for i, dir := range dirs {
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return dirs[:i], fmt.Errorf("create cgroup: %w", err)
		}
	}
	if !setup.Limits {
		return dirs, nil
	}
	if !setup.Pids {
		pids = 0
	}
	for _, f := range cgroupLimits(len(setup.V1) > 0, res, pids) {
		dir := dirs[0]
		if len(setup.V1) > 0 {
			i := slices.IndexFunc(setup.V1, func(h cgroupHierarchy) bool { return slices.Contains(h.Controllers, controllerOf(f.Name)) })
			if i < 0 {
				continue
			}
			dir = dirs[i]
			if _, err := os.Stat(filepath.Join(dir, f.Name)); f.Name == memswLimit && err != nil {
				continue // the kernel does not account swap
			}
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name), []byte(f.Value), 0o644); err != nil {
			return dirs, fmt.Errorf("cgroup %s: set %s to %s: %w", dir, f.Name, f.Value, err)
		}
	}
	return dirs, nil
}

// cgroupCPUUsec reads the CPU time the cgroup dirs' processes took, in
// microseconds: usage_usec of a cgroup v2 dir's cpu.stat, or cgroup v1's
// cpuacct.usage (nanoseconds) in the dir that has it; false when none does.
func cgroupCPUUsec(dirs []string) (uint64, bool) {
	for _, dir := range dirs {
		if b, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage")); err == nil {
			n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
			return n / 1000, err == nil
		}
		if n, found, ok := cgroupKey(dir, "cpu.stat", "usage_usec"); found {
			return n, ok
		}
	}
	return 0, false
}

// cgroupOOMKills counts the processes the kernel's OOM killer killed in the
// cgroup dirs for going over the memory limit: oom_kill in a cgroup v2 dir's
// memory.events, or in cgroup v1's memory.oom_control (kernel 4.13 on), in
// the dir that has it; 0 when none says.
func cgroupOOMKills(dirs []string) uint64 {
	for _, dir := range dirs {
		for _, name := range []string{"memory.events", "memory.oom_control"} {
			if n, _, ok := cgroupKey(dir, name, "oom_kill"); ok {
				return n
			}
		}
	}
	return 0
}

// cgroupKey reads key's value from dir's flat-keyed file name ("key value"
// lines, as cpu.stat and memory.events): found when a line has the key, ok
// when its value is a number as well.
func cgroupKey(dir, name, key string) (n uint64, found, ok bool) {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return 0, false, false
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, has := strings.CutPrefix(line, key+" "); has {
			n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, true, err == nil
		}
	}
	return 0, false, false
}

// startConfined runs start, which forks one process with attr, so that the
// process begins in a machine's cgroups: the cgroup v2 dir v2 (clone3 with
// CLONE_INTO_CGROUP, through attr) or the cgroup v1 dirs v1, so not even its
// first instruction runs outside; and, with noNewPrivs, with no_new_privs
// set, so neither it nor anything it runs gains privileges through setuid or
// setgid programs or file capabilities. With none of these it only runs
// start.
func startConfined(v2 string, v1 []string, noNewPrivs bool, attr *syscall.SysProcAttr, start func() error) error {
	if v2 != "" {
		cg, err := os.Open(v2)
		if err != nil {
			return fmt.Errorf("open cgroup: %w", err)
		}
		defer cg.Close()
		attr.UseCgroupFD, attr.CgroupFD = true, int(cg.Fd())
	}
	return forkConfined(v1, noNewPrivs, start)
}

// forkConfined runs start, which forks the machine's process, on a thread of
// its own that first joins the cgroup v1 dirs (writing its id to their tasks
// files) and, with noNewPrivs, sets no_new_privs (prctl): a child starts in
// its parent thread's cgroups on v1, and inherits the thread's no_new_privs,
// which it cannot clear. Go has no SysProcAttr field for either, and both are
// a thread's, so the thread is given up with them: its goroutine ends locked
// to it, and the runtime ends the thread with it. Without dirs or
// noNewPrivs it only runs start.
func forkConfined(dirs []string, noNewPrivs bool, start func() error) error {
	if len(dirs) == 0 && !noNewPrivs {
		return start()
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() == unix.Getpid() {
			// The main thread is never ended, so it would keep what is set
			// here (and stay in the machine's cgroups, keeping them from
			// being removed): fork from another, which cannot be this one
			// while it is locked.
			done <- forkConfined(dirs, noNewPrivs, start)
			runtime.UnlockOSThread()
			return
		}
		if noNewPrivs {
			if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
				done <- fmt.Errorf("set no_new_privs: %w", err)
				return
			}
		}
		tid := []byte(strconv.Itoa(unix.Gettid()))
		for _, dir := range dirs {
			if err := os.WriteFile(filepath.Join(dir, "tasks"), tid, 0); err != nil {
				done <- fmt.Errorf("join cgroup %s: %w", dir, err)
				return
			}
		}
		done <- start()
	}()
	return <-done
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
