package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

const (
	// killPoll is how often the kill loop looks for survivors.
	killPoll = 20 * time.Millisecond
	// killPatience is how long processes may survive SIGKILL (stuck in the
	// kernel) before Deallocate gives up and reports them; the machine stays
	// in the state file so a later Deallocate tries again.
	killPatience = 30 * time.Second
	// cgroupPatience bounds the wait for an emptied cgroup to go away.
	cgroupPatience = 10 * time.Second
)

// Status implements drivers.Driver: Provisioning while the allocation runs,
// Running while the entry or any process of the machine lives, then Failed
// when the entry exited non-zero (or was killed) and Terminated otherwise. The
// exit status is known for entries this driver started and reaped; after a
// daemon restart an entry that ended counts as Terminated. ErrNotFound when
// the machine is neither in the state file nor on the host.
func (d *Driver) Status(ctx context.Context, r *types.Resource) (types.MachinePhase, error) {
	if r == nil {
		return "", errors.New("status: nil resource")
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("status %s: %w", r.ID, err)
	}
	m, known, err := d.lookup(r.ID)
	if err != nil {
		return "", fmt.Errorf("status %s: %w", r.ID, err)
	}
	if m.Phase == phaseAllocating {
		return types.MachineProvisioning, nil
	}
	match, err := d.matcher(&m)
	if err != nil {
		return "", fmt.Errorf("status %s: %w", r.ID, err)
	}
	procs, err := d.machineProcs(match)
	if err != nil {
		return "", fmt.Errorf("status %s: %w", r.ID, err)
	}
	if len(procs) > 0 {
		return types.MachineRunning, nil
	}
	if known {
		// The entry may have ended after the reap above: it is a zombie now,
		// so collecting it again gives its exit status for sure.
		d.mu.Lock()
		if d.reapLocked() {
			d.saveLockedOrWarn()
		}
		if h, ok := d.held[r.ID]; ok {
			m.ExitCode = h.m.ExitCode
		}
		d.mu.Unlock()
	}
	switch {
	case m.ExitCode != nil && *m.ExitCode != 0:
		return types.MachineFailed, nil
	}
	return types.MachineTerminated, nil
}

// lookup finds machine id in the state file or, as an orphan, on the host;
// known tells which. ErrNotFound when it is in neither.
func (d *Driver) lookup(id string) (m machine, known bool, err error) {
	d.mu.Lock()
	if !d.prepared {
		d.mu.Unlock()
		return m, false, drivers.ErrNotPrepared
	}
	if d.reapLocked() {
		d.saveLockedOrWarn()
	}
	h, known := d.held[id]
	if known {
		m = *h.m
	}
	d.mu.Unlock()
	if known {
		return m, true, nil
	}
	orphan, err := d.findOrphan(id)
	if err != nil {
		return m, false, err
	}
	if orphan == nil {
		return m, false, drivers.ErrNotFound
	}
	return *orphan, false, nil
}

// Activity implements drivers.ActivityMeter: the CPU time of the machine in
// nanoseconds, from its cgroup's CPU account when it has one (which counts
// processes that ended too), else summed over its live processes and
// the children they waited for, from /proc (10 ms ticks).
func (d *Driver) Activity(ctx context.Context, r *types.Resource) (uint64, error) {
	if r == nil {
		return 0, errors.New("activity: nil resource")
	}
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("activity %s: %w", r.ID, err)
	}
	m, _, err := d.lookup(r.ID)
	if err != nil {
		return 0, fmt.Errorf("activity %s: %w", r.ID, err)
	}
	if usec, ok := cgroupCPUUsec(m.cgroups()); ok {
		return usec * 1000, nil
	}
	match, err := d.matcher(&m)
	if err != nil {
		return 0, fmt.Errorf("activity %s: %w", r.ID, err)
	}
	procs, err := d.machineProcs(match)
	if err != nil {
		return 0, fmt.Errorf("activity %s: %w", r.ID, err)
	}
	var ticks uint64
	for _, p := range procs {
		ticks += p.CPUTicks
	}
	return ticks * nsPerTick, nil
}

// Pause implements drivers.Pauser: every process of the machine is stopped
// (SIGSTOP), looking again until none is left running, since a process may
// fork meanwhile.
func (d *Driver) Pause(ctx context.Context, r *types.Resource) error {
	return d.signalMachine(ctx, r, "pause", syscall.SIGSTOP, func(p procInfo) bool { return p.State != 'T' })
}

// Resume implements drivers.Pauser: every stopped process of the machine
// continues (SIGCONT).
func (d *Driver) Resume(ctx context.Context, r *types.Resource) error {
	return d.signalMachine(ctx, r, "resume", syscall.SIGCONT, func(p procInfo) bool { return p.State == 'T' })
}

// signalMachine sends sig to the machine's processes for which want holds,
// until none is left (at most a few rounds).
func (d *Driver) signalMachine(ctx context.Context, r *types.Resource, verb string, sig syscall.Signal, want func(procInfo) bool) error {
	if r == nil {
		return fmt.Errorf("%s: nil resource", verb)
	}
	m, _, err := d.lookup(r.ID)
	if err != nil {
		return fmt.Errorf("%s %s: %w", verb, r.ID, err)
	}
	match, err := d.matcher(&m)
	if err != nil {
		return fmt.Errorf("%s %s: %w", verb, r.ID, err)
	}
	for range 5 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s %s: %w", verb, r.ID, err)
		}
		procs, err := d.machineProcs(match)
		if err != nil {
			return fmt.Errorf("%s %s: %w", verb, r.ID, err)
		}
		left := 0
		for _, p := range procs {
			if !want(p) {
				continue
			}
			left++
			if err := signalProc(p.PID, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("%s %s: process %d: %w", verb, r.ID, p.PID, err)
			}
		}
		if left == 0 {
			return nil
		}
		time.Sleep(10 * time.Millisecond) // the signal takes effect asynchronously
	}
	return nil
}

// findOrphan returns the machine id as found on the host with this driver's
// marker, or nil.
func (d *Driver) findOrphan(id string) (*machine, error) {
	cfg := d.config()
	if !d.ownID(id) {
		return nil, nil
	}
	if cfg.Privileged() {
		pw, ok, err := d.userByName(id)
		if err != nil || !ok || pw.GECOS != d.marker || pw.UID == 0 {
			return nil, err
		}
		return d.orphanMachine(cfg, id, &pw), nil
	}
	if d.hasMarker(filepath.Join(cfg.WorkspacePath, id)) {
		return d.orphanMachine(cfg, id, nil), nil
	}
	return nil, nil
}

// Deallocate implements drivers.Driver: it stops every process of the machine
// (SIGTERM, SIGKILL after stop_grace), removes its cgroup, what its user left
// in the host's shared places (sweepUID), the user, its home and workspace,
// and forgets it. A machine that is already gone is not an error.
func (d *Driver) Deallocate(ctx context.Context, r *types.Resource) error {
	if r == nil {
		return errors.New("deallocate: nil resource")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("deallocate %s: %w", r.ID, err)
	}
	d.mu.Lock()
	prepared := d.prepared
	d.mu.Unlock()
	if !prepared {
		return fmt.Errorf("deallocate %s: %w", r.ID, drivers.ErrNotPrepared)
	}
	if !validID(r.ID) {
		// Nothing this driver makes has such a name, so nothing of it exists.
		d.log.Warn("deallocate a resource that is not a native machine", "resource", r.ID)
		return nil
	}
	unlock := d.machineLocks.lock(r.ID)
	defer unlock()

	d.mu.Lock()
	var m *machine
	h, known := d.held[r.ID]
	if known {
		cp := *h.m
		m = &cp
	}
	d.mu.Unlock()
	if !known {
		orphan, err := d.findOrphan(r.ID)
		if err != nil {
			return fmt.Errorf("deallocate %s: %w", r.ID, err)
		}
		if orphan == nil {
			return nil
		}
		m = orphan
	}
	if err := d.release(ctx, m, known); err != nil {
		return fmt.Errorf("deallocate %s: %w", r.ID, err)
	}
	d.log.Info("machine deallocated", "resource", r.ID, "orphan", !known)
	return nil
}

// release removes everything of m from the host and then its record. On
// error the record stays, so the machine is still listed and can be released
// again. known says the state file lists m.
func (d *Driver) release(ctx context.Context, m *machine, known bool) error {
	cfg := d.config()
	match, err := d.matcher(m)
	if err != nil {
		return err
	}
	if err := d.killAll(ctx, cfg, match); err != nil {
		return err
	}
	var errs []error
	if dirs := m.cgroups(); len(dirs) > 0 {
		cctx, cancel := context.WithTimeout(ctx, cgroupPatience)
		for _, dir := range dirs {
			errs = append(errs, removeCgroup(cctx, dir))
		}
		cancel()
	}
	// Names are checked before anything is removed: only directories named
	// for the machine are ever deleted.
	home := ""
	if m.Home != "" && filepath.Base(m.Home) == m.ID {
		home = m.Home
	}
	ws := ""
	if m.Workspace != "" && filepath.Base(m.Workspace) == m.ID {
		ws = m.Workspace
	}
	for _, dir := range []string{ws, home} {
		if dir != "" {
			errs = append(errs, unmountUnder(dir))
		}
	}
	if !m.Unprivileged {
		// What the user left in /tmp and the like goes before the user:
		// only while it exists with this driver's marker (match.uid) is its
		// uid surely not someone else's. When that fails, the user stays,
		// so the release is tried again and sweeps again.
		var err error
		if match.uid > 0 {
			err = d.sweepUID(match.uid)
		}
		if err == nil {
			err = d.deleteUser(ctx, cfg, m.ID, known)
		}
		errs = append(errs, err)
	}
	for _, dir := range []string{ws, home} {
		if dir != "" {
			errs = append(errs, os.RemoveAll(dir))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old, ok := d.held[m.ID]
	if !ok {
		return nil
	}
	delete(d.held, m.ID)
	if err := d.saveLocked(); err != nil {
		d.held[m.ID] = old
		return err
	}
	return nil
}

// procMatch says which processes belong to a machine.
type procMatch struct {
	id string
	// uid, when > 0, claims every process with that user id (privileged).
	uid int
	// pid and start identify the entry process.
	pid   int
	start uint64
	// group claims the entry's process group and HF_NATIVE_ID carriers of the
	// daemon's own user (unprivileged).
	group  bool
	ownUID int
	cgroup string
}

// matcher builds the procMatch of m. Processes are claimed by user id only
// while the user exists with this driver's marker and that id, so a uid that
// was freed and given to someone else is never hit.
func (d *Driver) matcher(m *machine) (procMatch, error) {
	pm := procMatch{id: m.ID, pid: m.PID, start: m.PIDStart, ownUID: os.Getuid()}
	if dirs := m.cgroups(); len(dirs) > 0 {
		pm.cgroup = dirs[0] // each lists the same processes
	}
	if m.Unprivileged {
		pm.group = true
		return pm, nil
	}
	pw, ok, err := d.userByName(m.ID)
	if err != nil {
		return pm, err
	}
	if ok && pw.GECOS == d.marker && pw.UID != 0 && (m.UID == 0 || m.UID == pw.UID) {
		pm.uid = pw.UID
	}
	return pm, nil
}

// machineProcs returns the live processes that belong to the machine.
func (d *Driver) machineProcs(pm procMatch) ([]procInfo, error) {
	procs, err := listProcs(d.procRoot)
	if err != nil {
		return nil, err
	}
	inCgroup := map[int]bool{}
	if pm.cgroup != "" {
		for _, pid := range cgroupProcs(pm.cgroup) {
			inCgroup[pid] = true
		}
	}
	self := os.Getpid()
	kv := envMachineID + "=" + pm.id
	var out []procInfo
	for _, p := range procs {
		if !p.live() || p.PID == self || p.PID == 1 {
			continue
		}
		switch {
		case pm.uid > 0 && p.hasUID(pm.uid),
			pm.pid > 0 && p.PID == pm.pid && p.Start == pm.start,
			inCgroup[p.PID],
			pm.group && p.hasUID(pm.ownUID) && pm.pid > 0 && p.PGID == pm.pid && p.Start >= pm.start,
			pm.group && p.hasUID(pm.ownUID) && procHasEnv(d.procRoot, p.PID, kv):
			out = append(out, p)
		}
	}
	return out, nil
}

// killAll stops the machine's processes: SIGTERM once, SIGKILL (and
// cgroup.kill) after the grace, looking again until none is left, since a
// dying process may have forked.
func (d *Driver) killAll(ctx context.Context, cfg Config, pm procMatch) error {
	killAt := time.Now().Add(cfg.StopGrace.Duration)
	giveUp := killAt.Add(killPatience)
	termed := map[int]bool{}
	for {
		// Our own entry becomes a zombie when it dies; collect it.
		d.mu.Lock()
		d.reapLocked()
		d.mu.Unlock()
		procs, err := d.machineProcs(pm)
		if err != nil {
			return err
		}
		if len(procs) == 0 {
			return nil
		}
		now := time.Now()
		if now.After(giveUp) {
			pids := make([]string, len(procs))
			for i, p := range procs {
				pids[i] = strconv.Itoa(p.PID)
			}
			return fmt.Errorf("processes %s survive SIGKILL", strings.Join(pids, ", "))
		}
		kill := !now.Before(killAt)
		if kill && pm.cgroup != "" {
			killCgroup(pm.cgroup)
		}
		for _, p := range procs {
			switch {
			case kill:
				err = signalProc(p.PID, syscall.SIGKILL)
			case !termed[p.PID]:
				termed[p.PID] = true
				err = signalProc(p.PID, syscall.SIGTERM)
				if err == nil && p.State == 'T' {
					// A paused machine: let it see the SIGTERM.
					err = signalProc(p.PID, syscall.SIGCONT)
				}
			}
			if err != nil {
				return fmt.Errorf("signal process %d: %w", p.PID, err)
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stop processes: %w", ctx.Err())
		case <-time.After(killPoll):
		}
	}
}
