// Package native is the "native" driver: each machine is an environment on the
// host itself, the way build and lab hosts are used without virtualisation.
//
// As root (the privileged mode) a machine is a fresh user with its own home
// and group, a workspace directory with one sub-directory per image (tar,
// tar.gz, tar.bz2, tar.xz or tar.zst, downloaded once into a sha256-checked
// cache and unpacked safely), and the template's entry program running as that
// user with the claim's metadata in its environment, in the template's groups
// that the node's allowed_groups lists, and (as every shell, unless
// allow_setuid) with no_new_privs. When /sys/fs/cgroup (or
// cgroup_path) is a writable cgroup2 file system with the cpu and memory
// controllers, each machine gets a cgroup with cpu.max and memory.max from the
// template's resources; on a cgroup v1 (or hybrid) host whose cpu and memory
// hierarchies are there, a cgroup in each with the CPU quota and the memory
// limit; otherwise limits are not enforced, and StatusText says so.
// Deallocation kills every process of the user, removes the cgroups, what
// the user left in the host's world-writable directories and IPC (sweepUID:
// useradd gives its uid to the next user), the user, its home and the
// workspace.
//
// Without root (or with unprivileged: true) there are no per-machine users:
// the workspace and the entry belong to the daemon's user, and deallocation
// kills the entry's process group and whatever carries the machine's
// HF_NATIVE_ID variable, then removes the workspace.
//
// The driver keeps what it holds in a state file in its data dir, written
// before an allocation makes anything, so a daemon killed mid-way finds the
// leftovers in List on its next start. Users (and, unprivileged, workspaces)
// that carry this driver's marker but are in no state file are listed too, so
// the node's reconcile releases them. Entries keep running across a daemon
// restart and are re-attached from the state file.
//
// Only Linux is supported; on other systems Prepare fails with
// ErrUnsupportedOS (the macOS keys of the config are accepted for later).
package native

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/fetch"
	"github.com/hf-fleet/hf/lib/types"
)

// Type is the driver type name.
const Type = "native"

// ErrUnsupportedOS is returned by Prepare on a system the driver cannot serve.
var ErrUnsupportedOS = errors.New("unsupported operating system")

// envMachineID is set in every entry's environment to the machine id; the
// driver finds a machine's processes by it in unprivileged mode.
const envMachineID = "HF_NATIVE_ID"

// markerFile, in a machine's workspace, holds the driver's marker.
const markerFile = ".hf-native"

// logFile, in a machine's workspace, receives the entry's output.
const logFile = ".entry.log"

// reapInterval is how often the reaper collects ended entry processes.
const reapInterval = time.Second

// Driver is the native driver. It is safe for concurrent use. Call Close when
// the daemon stops: it ends the goroutine that reaps entry processes (the
// machines themselves keep running and are re-attached on the next start).
type Driver struct {
	env    drivers.Env
	log    *slog.Logger
	marker string
	// Host facts, fixed at New; tests replace them.
	goos       string
	root       bool
	procRoot   string
	passwdPath string
	groupPath  string
	// sharedDirs are the world-writable directories a machine user may
	// leave files in, and mqueuePath where POSIX message queues are
	// mounted (sweepUID).
	sharedDirs []string
	mqueuePath string
	// mqueueWarned: the warning that message queues cannot be swept was
	// logged.
	mqueueWarned atomic.Bool

	// mu guards everything below and serialises state file writes, so the file
	// always matches held.
	mu       sync.Mutex
	cfg      Config
	prepared bool
	held     map[string]*held
	children map[int]string // entry pids this driver started -> machine id
	// unsaved: an exit status was recorded (by the reaper, say) that the
	// state file does not hold yet; the next Status call saves it.
	unsaved  bool
	capacity types.Capacity
	cgroups  cgroupSetup
	fetcher  *fetch.Fetcher
	stop     context.CancelFunc // stops the reaper
	reaped   chan struct{}      // closed when the reaper returned

	// userMu serialises useradd/userdel/groupdel.
	userMu sync.Mutex
	// machineLocks serialises Deallocate calls for one machine.
	machineLocks keyedMutex
}

var (
	_ drivers.Driver        = (*Driver)(nil)
	_ drivers.ActivityMeter = (*Driver)(nil)
	_ drivers.Pauser        = (*Driver)(nil)
	_ drivers.GroupLimiter  = (*Driver)(nil)
)

// New builds an unprepared native driver; it is a drivers.Factory.
func New(env drivers.Env) drivers.Driver {
	return newDriver(env)
}

func newDriver(env drivers.Env) *Driver {
	env = env.Defaults(Type)
	log := env.Log
	return &Driver{
		env:        env,
		log:        log.With("driver", env.Instance),
		marker:     markerFor(env.NodeName, env.Instance),
		goos:       runtime.GOOS,
		root:       os.Geteuid() == 0,
		procRoot:   "/proc",
		passwdPath: "/etc/passwd",
		groupPath:  "/etc/group",
		sharedDirs: []string{"/tmp", "/var/tmp", "/dev/shm", "/run/lock"},
		mqueuePath: "/dev/mqueue",
		held:       map[string]*held{},
		children:   map[int]string{},
	}
}

// Name implements drivers.Driver.
func (d *Driver) Name() string { return Type }

// IsRemote implements drivers.Driver: machines live on this host.
func (d *Driver) IsRemote() bool { return false }

// Prepare implements drivers.Driver: it parses cfg, makes the directories,
// loads the state file, probes cgroups and the host, and starts the reaper.
func (d *Driver) Prepare(ctx context.Context, raw []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("prepare %s: %w", d.env.Instance, err)
	}
	cfg, err := parseConfig(raw, hostFacts{Root: d.root, DataDir: d.env.DataDir})
	if err != nil {
		return fmt.Errorf("prepare %s: config: %w", d.env.Instance, err)
	}
	if d.goos != "linux" {
		return fmt.Errorf("prepare %s: %w: the native driver runs on linux only, this host is %s (the macOS keys are accepted for a later version)",
			d.env.Instance, ErrUnsupportedOS, d.goos)
	}
	if err := d.checkAllowedGroups(cfg); err != nil {
		return fmt.Errorf("prepare %s: config: %w", d.env.Instance, err)
	}
	if err := makeDirs(cfg); err != nil {
		return fmt.Errorf("prepare %s: %w", d.env.Instance, err)
	}
	fetcher, err := fetch.New(fetch.Config{CacheDir: cfg.ImagesPath, User: cfg.DownloadUser, Password: cfg.DownloadPassword}, d.log)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", d.env.Instance, err)
	}
	held, err := loadState(d.env.DataDir)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", d.env.Instance, err)
	}
	total, err := drivers.HostResources(ctx, cfg.WorkspacePath)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", d.env.Instance, err)
	}
	cg := probeCgroups(cfg.CgroupPath)
	nproc := "none (unprivileged: machines are this daemon's user)"
	if cfg.Privileged() {
		n, err := limitUserProcesses(cfg.PidsLimit)
		if err != nil {
			return fmt.Errorf("prepare %s: pids_limit: %w", d.env.Instance, err)
		}
		nproc = fmt.Sprintf("%d per machine user (RLIMIT_NPROC)", n)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.prepared {
		return fmt.Errorf("prepare %s: already prepared", d.env.Instance)
	}
	d.cfg, d.held, d.fetcher, d.cgroups = cfg, held, fetcher, cg
	d.capacity = cfg.Alter.Capacity(total)
	d.prepared = true
	rctx, stop := context.WithCancel(context.Background())
	d.stop, d.reaped = stop, make(chan struct{})
	go d.reaper(rctx, d.reaped)
	d.log.Info("native driver prepared", "privileged", cfg.Privileged(), "machines", len(held),
		"workspace", cfg.WorkspacePath, "limits", cg.describe(), "process_limit", nproc)
	if !cfg.Privileged() {
		d.log.Warn("native driver in unprivileged mode: every machine runs as this daemon's user and can reach what it can; run hf-node as root for a user per machine",
			"uid", os.Getuid())
	}
	return nil
}

// makeDirs creates the cache and workspace directories. In privileged mode the
// machine users must reach their workspace and home, so every directory above
// them has to be searchable by others.
// The workspace and home come first: the images' directory is private, and
// made first it made a parent the three share private too (images_path and
// workspace_path side by side, as config.example.yml has them).
func makeDirs(cfg Config) error {
	wsMode := os.FileMode(0o700)
	if cfg.Privileged() {
		wsMode = 0o755
	}
	if err := os.MkdirAll(cfg.WorkspacePath, wsMode); err != nil {
		return fmt.Errorf("workspace_path: %w", err)
	}
	if cfg.Privileged() {
		if err := os.MkdirAll(cfg.HomePath, 0o755); err != nil {
			return fmt.Errorf("home_path: %w", err)
		}
	}
	if err := os.MkdirAll(cfg.ImagesPath, 0o700); err != nil {
		return fmt.Errorf("images_path: %w", err)
	}
	if !cfg.Privileged() {
		return nil
	}
	for _, p := range []struct{ key, dir string }{{"workspace_path", cfg.WorkspacePath}, {"home_path", cfg.HomePath}} {
		if err := searchable(p.dir); err != nil {
			return types.Invalid(p.key, "%v: the machine users could not reach their files; allow others to search it (chmod o+x) or choose another path", err)
		}
	}
	return nil
}

// searchable checks that dir and every directory above it let others in.
func searchable(dir string) error {
	for p := filepath.Clean(dir); ; p = filepath.Dir(p) {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("%s is not searchable by other users (mode %04o)", p, st.Mode().Perm())
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// Close stops the goroutine that reaps entry processes and waits for it. The
// machines keep running. Close is safe to call more than once and before
// Prepare; the driver still answers afterwards (Status then reaps on demand).
func (d *Driver) Close() error {
	d.mu.Lock()
	stop, reaped := d.stop, d.reaped
	d.stop = nil
	d.mu.Unlock()
	if stop != nil {
		stop()
		<-reaped
	}
	return nil
}

// reaper collects ended entry processes every reapInterval, so none stays a
// zombie while nobody asks for its status.
func (d *Driver) reaper(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(reapInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			d.mu.Lock()
			d.reapLocked()
			d.mu.Unlock()
		}
	}
}

// reapLocked collects every ended child and records its exit status in
// memory; it reports whether an exit status recorded now or earlier is not
// in the state file yet. The reaper does not write the state file: a record
// it wrote could be stale by then (another driver on the same data dir, a
// daemon that is being replaced), so the status is saved by the next Status
// call or state change instead. (Status once saved only what its own reap
// recorded, so an exit the reaper had collected first never reached the
// file, and a restarted driver called a failed entry Terminated.)
func (d *Driver) reapLocked() bool {
	for pid, id := range d.children {
		done, code, desc := reapChild(pid)
		if !done {
			continue
		}
		delete(d.children, pid)
		if h, ok := d.held[id]; ok && h.m.PID == pid {
			if code != nil && *code == -1 {
				// Killed: say so when it was the machine's memory limit,
				// or "killed by signal killed" leaves its user guessing.
				if n := cgroupOOMKills(h.m.cgroups()); n > 0 {
					desc += fmt.Sprintf(" (out of memory: the kernel killed %d of the machine's processes for going over its RAM)", n)
				}
			}
			h.m.ExitCode, h.m.Exit = code, desc
			d.unsaved = true
			d.log.Info("entry ended", "resource", id, "pid", pid, "exit", desc)
		}
	}
	return d.unsaved
}

// ValidateTemplate implements drivers.Driver: the template needs an entry for
// the instance name or "native" that decodes into a valid TemplateConfig,
// and may name only groups the node's allowed_groups lists.
func (d *Driver) ValidateTemplate(t types.MachineTemplate) error {
	_, err := d.templateConfig(t)
	return err
}

func (d *Driver) templateConfig(t types.MachineTemplate) (TemplateConfig, error) {
	tc, prefix, err := drivers.TemplateEntry(t, d.env.Instance, Type, parseTemplateConfig)
	if err != nil {
		return TemplateConfig{}, err
	}
	d.mu.Lock()
	allowed := d.cfg.AllowedGroups
	d.mu.Unlock()
	if err := checkGroups(tc, allowed, prefix); err != nil {
		return TemplateConfig{}, err
	}
	return tc, nil
}

// AllowedGroups implements drivers.GroupLimiter: the node's allowed_groups.
func (d *Driver) AllowedGroups() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string{}, d.cfg.AllowedGroups...)
}

// HostCapacity implements drivers.Driver: the host's CPUs, RAM and the disk
// that holds the workspace (read when the driver prepared), with the alter
// settings applied.
func (d *Driver) HostCapacity() types.Capacity {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.capacity
}

// StatusText is the driver's status line on the Node object: the mode and
// whether resource limits are enforced.
func (d *Driver) StatusText() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.prepared {
		return "not prepared"
	}
	mode := "ok: a user per machine"
	if !d.cfg.Privileged() {
		mode = "unprivileged mode: no per-machine users"
	}
	return mode + "; " + d.cgroups.describe()
}

// List implements drivers.Driver: the machines of the state file and, for the
// node's reconcile to release, those found on the host with this driver's
// marker but in no state file (orphans of a lost state file).
func (d *Driver) List(ctx context.Context) ([]types.Resource, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	d.mu.Lock()
	if !d.prepared {
		d.mu.Unlock()
		return nil, fmt.Errorf("list: %w", drivers.ErrNotPrepared)
	}
	out := d.heldResourcesLocked()
	known := map[string]bool{}
	for id := range d.held {
		known[id] = true
	}
	d.mu.Unlock()

	orphans, err := d.orphans()
	if err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	for _, m := range orphans {
		if !known[m.ID] {
			out = append(out, d.resource(m, types.Resources{}))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// orphans finds the machines this driver instance made that may be in no
// state file: users with its marker (privileged), workspaces with its marker
// file (unprivileged).
func (d *Driver) orphans() ([]*machine, error) {
	cfg := d.config()
	var out []*machine
	if cfg.Privileged() {
		b, err := os.ReadFile(d.passwdPath)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", d.passwdPath, err)
		}
		for _, e := range parsePasswd(b) {
			if e.GECOS == d.marker && d.ownID(e.Name) && e.UID != 0 {
				out = append(out, d.orphanMachine(cfg, e.Name, &e))
			}
		}
		return out, nil
	}
	entries, err := os.ReadDir(cfg.WorkspacePath)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", cfg.WorkspacePath, err)
	}
	for _, e := range entries {
		if e.IsDir() && d.ownID(e.Name()) && d.hasMarker(filepath.Join(cfg.WorkspacePath, e.Name())) {
			out = append(out, d.orphanMachine(cfg, e.Name(), nil))
		}
	}
	return out, nil
}

// orphanMachine describes a machine found on the host; pw is its user.
func (d *Driver) orphanMachine(cfg Config, id string, pw *passwdEntry) *machine {
	m := &machine{
		ID: id, Phase: phaseReady, Orphan: true, Unprivileged: pw == nil,
		Workspace: filepath.Join(cfg.WorkspacePath, id),
	}
	if pw != nil {
		m.User, m.UID, m.GID, m.Home = pw.Name, pw.UID, pw.GID, pw.Home
	} else {
		m.Home = m.Workspace
	}
	if cg := d.cgroupSetup(); cg.Parent != "" {
		m.setCgroups(cg.dirsFor(id), len(cg.V1) > 0)
	}
	return m
}

// hasMarker reports whether the workspace dir carries this driver's marker.
func (d *Driver) hasMarker(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, markerFile))
	return err == nil && strings.TrimSpace(string(b)) == d.marker
}

func (d *Driver) config() Config {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg
}

func (d *Driver) cgroupSetup() cgroupSetup {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cgroups
}

// keyedMutex is a mutex per key, dropped when nobody holds or waits for it.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	mu sync.Mutex
	n  int
}

// lock locks key and returns its unlock.
func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{}
		k.locks[key] = l
	}
	l.n++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.n--; l.n == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}

// SharesHost implements drivers.HostSharer: machines run on this host.
func (d *Driver) SharesHost() bool { return true }
