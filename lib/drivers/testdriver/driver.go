// Package testdriver is the "test" driver: instant, in-memory machines with a
// configurable delay and failure rate, for tests and benchmarks. Like a real
// driver its machines outlive a daemon restart: what it holds is kept in a small
// JSON file in its data dir.
package testdriver

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/internal/intern"
	"github.com/hf-fleet/hf/lib/types"
)

// Type is the driver type name.
const Type = "test"

// ErrInjectedFailure is returned by Allocate when the failure rate or the
// template's "fail" option makes it fail.
var ErrInjectedFailure = errors.New("injected allocation failure")

// Driver is the test driver. It is safe for concurrent use.
type Driver struct {
	env drivers.Env
	log *slog.Logger

	// mu guards everything below and serialises state file writes, so the
	// files always match held.
	mu       sync.Mutex
	cfg      Config
	prepared bool
	held     map[string]types.Resource
	// journaled counts the journal's lines since the last snapshot.
	journaled int
	// journal is the journal file, open for appending from its first line
	// until the next snapshot (or Close); journalSize is its length.
	journal     *os.File
	journalSize int64
	// used is each resource's activity counter (see Use).
	used map[string]uint64
	// paused holds the resources paused by Pause.
	paused map[string]bool
	// roll returns a uniform number in [0, 1) for the failure rate; tests
	// replace it to make failures deterministic. Called with mu held.
	roll func() float64
}

var (
	_ io.Closer             = (*Driver)(nil)
	_ drivers.Driver        = (*Driver)(nil)
	_ drivers.ActivityMeter = (*Driver)(nil)
	_ drivers.Pauser        = (*Driver)(nil)
	_ drivers.Cooler        = (*Driver)(nil)
)

// New builds an unprepared test driver; it is a drivers.Factory.
func New(env drivers.Env) drivers.Driver {
	return newDriver(env)
}

func newDriver(env drivers.Env) *Driver {
	env = env.Defaults(Type)
	log := env.Log
	return &Driver{
		env:    env,
		log:    log.With("driver", env.Instance),
		cfg:    DefaultConfig(),
		held:   map[string]types.Resource{},
		used:   map[string]uint64{},
		paused: map[string]bool{},
		roll:   mrand.Float64,
	}
}

// Held returns how many resources d holds, or -1 when d is not a test driver.
func Held(d drivers.Driver) int {
	td, ok := d.(*Driver)
	if !ok {
		return -1
	}
	return td.Held()
}

// Held returns how many resources the driver holds.
func (d *Driver) Held() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.held)
}

// Name implements drivers.Driver.
func (d *Driver) Name() string { return Type }

// IsRemote implements drivers.Driver: the test driver counts as a local driver.
func (d *Driver) IsRemote() bool { return false }

// Prepare implements drivers.Driver: it parses cfg and loads the state file.
func (d *Driver) Prepare(ctx context.Context, cfg []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("prepare %s: %w", d.env.Instance, err)
	}
	c, err := ParseConfig(cfg)
	if err != nil {
		return fmt.Errorf("prepare %s: config: %w", d.env.Instance, err)
	}
	held, err := loadState(d.env.DataDir)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", d.env.Instance, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, r := range held {
		held[id] = d.pack(r)
	}
	d.held = held
	// Start from a snapshot alone, so the journal holds this run's changes.
	if err := d.compactLocked(); err != nil {
		d.held = map[string]types.Resource{}
		return fmt.Errorf("prepare %s: %w", d.env.Instance, err)
	}
	d.cfg = c
	d.prepared = true
	d.log.Debug("test driver prepared", "resources", len(held), "delay", c.Delay.String(),
		"failure_rate", c.FailureRate)
	return nil
}

// ValidateTemplate implements drivers.Driver: the template needs an entry for
// the instance name or "test" that decodes into TemplateConfig.
func (d *Driver) ValidateTemplate(t types.MachineTemplate) error {
	_, err := d.templateConfig(t)
	return err
}

func (d *Driver) templateConfig(t types.MachineTemplate) (TemplateConfig, error) {
	tc, _, err := drivers.TemplateEntry(t, d.env.Instance, Type, ParseTemplateConfig)
	return tc, err
}

// HostCapacity implements drivers.Driver from the configured cpus, ram_gb and
// disk_gb and the alter settings.
func (d *Driver) HostCapacity() types.Capacity {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cfg.Capacity()
}

// Allocate implements drivers.Driver. It waits the delay (returning early with
// the context's error), fails when asked to, and otherwise records a new
// resource and writes the state file before returning it.
func (d *Driver) Allocate(ctx context.Context, t types.MachineTemplate, meta map[string]string) (*types.Resource, error) {
	d.mu.Lock()
	cfg, prepared := d.cfg, d.prepared
	d.mu.Unlock()
	if !prepared {
		return nil, fmt.Errorf("allocate: %w", drivers.ErrNotPrepared)
	}
	tc, err := d.templateConfig(t)
	if err != nil {
		return nil, fmt.Errorf("allocate: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("allocate: %w", err)
	}
	delay := cfg.Delay.Duration
	if tc.Delay != nil {
		delay = tc.Delay.Duration
	}
	if err := sleep(ctx, delay); err != nil {
		return nil, fmt.Errorf("allocate: %w", err)
	}
	if tc.Fail {
		return nil, fmt.Errorf("allocate: template %q asks to fail: %w", t.Metadata.Name, ErrInjectedFailure)
	}
	data, err := json.Marshal(resourceData{Template: t.Metadata.Name, Meta: t.MachineMetadata(meta), Config: tc})
	if err != nil {
		return nil, fmt.Errorf("allocate: %w", err)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if cfg.FailureRate > 0 && d.roll() < cfg.FailureRate {
		return nil, fmt.Errorf("allocate: failure rate %g: %w", cfg.FailureRate, ErrInjectedFailure)
	}
	id := d.newIDLocked()
	info, eps := d.made(id)
	r := types.Resource{
		ID:        id,
		Driver:    d.env.Instance,
		Info:      info,
		Endpoints: eps,
		Resources: t.Spec.Resources,
		Data:      data,
	}
	held := r
	held.Info, held.Endpoints = nil, nil // made gives them back
	d.held[id] = held
	if err := d.journalLocked(journalLine{Put: &r}); err != nil {
		delete(d.held, id)
		return nil, fmt.Errorf("allocate: %w", err)
	}
	d.log.Debug("test machine allocated", "resource", id, "template", t.Metadata.Name)
	r.Data = bytes.Clone(data) // held keeps data
	return &r, nil
}

// Cool implements drivers.Cooler: the held resources are copied afresh,
// their ids shared by the map and the resource.
func (d *Driver) Cool(tab *intern.Table) {
	d.mu.Lock()
	defer d.mu.Unlock()
	held := make(map[string]types.Resource, len(d.held))
	for id, r := range d.held {
		held[tab.String(id)] = r.Copy(tab)
	}
	d.held = held
}

// made is the information and the endpoints the driver gives resource id.
func (d *Driver) made(id string) (map[string]string, []types.Endpoint) {
	return map[string]string{"host": d.env.NodeName, "id": id}, []types.Endpoint{d.endpoint(id)}
}

func (d *Driver) endpoint(id string) types.Endpoint {
	return types.Endpoint{Protocol: "test", Address: "test://" + d.env.NodeName + "/" + id}
}

// pack is r as held: without the information and endpoints made gives it,
// which unpack puts back. A node holding 10,000 test machines kept a third
// of its heap's resources here, for fake machines. A resource made under
// another node name is kept whole.
func (d *Driver) pack(r types.Resource) types.Resource {
	if len(r.Info) == 2 && r.Info["host"] == d.env.NodeName && r.Info["id"] == r.ID &&
		len(r.Endpoints) == 1 && r.Endpoints[0] == d.endpoint(r.ID) {
		r.Info, r.Endpoints = nil, nil
	}
	return r
}

// unpack is a held resource as the driver handed it out, sharing nothing
// with held.
func (d *Driver) unpack(r types.Resource) types.Resource {
	if r.Info == nil && r.Endpoints == nil {
		r.Info, r.Endpoints = d.made(r.ID)
		r.Data = bytes.Clone(r.Data)
		return r
	}
	return drivers.CloneResource(r)
}

// resourceData is what Resource.Data holds for a test machine.
type resourceData struct {
	Template string            `json:"template,omitempty"`
	Meta     map[string]string `json:"meta,omitempty"`
	// Config is the template configuration the machine was made with.
	Config TemplateConfig `json:"config"`
}

// sleep waits d or until ctx is done, whichever comes first.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// newIDLocked returns "test-" and 16 random hex digits not held yet. The ids
// come from crypto/rand, not roll, so they stay unique across restarts.
func (d *Driver) newIDLocked() string {
	for {
		var b [8]byte
		_, _ = rand.Read(b[:]) // never fails (crypto/rand docs)
		id := Type + "-" + hex.EncodeToString(b[:])
		if _, taken := d.held[id]; !taken {
			return id
		}
	}
}

// Status implements drivers.Driver: Running while held, ErrNotFound after.
func (d *Driver) Status(ctx context.Context, r *types.Resource) (types.MachinePhase, error) {
	if r == nil {
		return "", errors.New("status: nil resource")
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("status %s: %w", r.ID, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.prepared {
		return "", fmt.Errorf("status %s: %w", r.ID, drivers.ErrNotPrepared)
	}
	if _, ok := d.held[r.ID]; !ok {
		return "", fmt.Errorf("status %s: %w", r.ID, drivers.ErrNotFound)
	}
	return types.MachineRunning, nil
}

// Use adds n to the activity counter of resource id, as if its machine had
// been used for n nanoseconds of CPU: for tests of idle reaping. It reports
// whether d is a test driver holding id.
func Use(d drivers.Driver, id string, n uint64) bool {
	td, ok := d.(*Driver)
	if !ok {
		return false
	}
	td.mu.Lock()
	defer td.mu.Unlock()
	if _, held := td.held[id]; !held {
		return false
	}
	td.used[id] += n
	return true
}

// Activity implements drivers.ActivityMeter: the counter Use advances.
func (d *Driver) Activity(ctx context.Context, r *types.Resource) (uint64, error) {
	if _, err := d.Status(ctx, r); err != nil {
		return 0, fmt.Errorf("activity: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.used[r.ID], nil
}

// Pause implements drivers.Pauser: it marks the resource paused.
func (d *Driver) Pause(ctx context.Context, r *types.Resource) error {
	return d.setPaused(ctx, r, true)
}

// Resume implements drivers.Pauser.
func (d *Driver) Resume(ctx context.Context, r *types.Resource) error {
	return d.setPaused(ctx, r, false)
}

func (d *Driver) setPaused(ctx context.Context, r *types.Resource, paused bool) error {
	if _, err := d.Status(ctx, r); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if paused {
		d.paused[r.ID] = true
	} else {
		delete(d.paused, r.ID)
	}
	return nil
}

// Paused reports whether d is a test driver that holds resource id paused.
func Paused(d drivers.Driver, id string) bool {
	td, ok := d.(*Driver)
	if !ok {
		return false
	}
	td.mu.Lock()
	defer td.mu.Unlock()
	return td.paused[id]
}

// Deallocate implements drivers.Driver; a resource not held is not an error.
func (d *Driver) Deallocate(ctx context.Context, r *types.Resource) error {
	if r == nil {
		return errors.New("deallocate: nil resource")
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("deallocate %s: %w", r.ID, err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.prepared {
		return fmt.Errorf("deallocate %s: %w", r.ID, drivers.ErrNotPrepared)
	}
	old, ok := d.held[r.ID]
	if !ok {
		return nil
	}
	delete(d.held, r.ID)
	if err := d.journalLocked(journalLine{Del: r.ID}); err != nil {
		d.held[r.ID] = old
		return fmt.Errorf("deallocate %s: %w", r.ID, err)
	}
	delete(d.used, r.ID)
	delete(d.paused, r.ID)
	d.log.Debug("test machine deallocated", "resource", r.ID)
	return nil
}

// List implements drivers.Driver: every held resource, sorted by id.
func (d *Driver) List(ctx context.Context) ([]types.Resource, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("list: %w", err)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.prepared {
		return nil, fmt.Errorf("list: %w", drivers.ErrNotPrepared)
	}
	return d.sortedLocked(), nil
}

// sortedLocked returns the held resources sorted by id, as handed out.
func (d *Driver) sortedLocked() []types.Resource {
	out := make([]types.Resource, 0, len(d.held))
	for _, r := range d.held {
		out = append(out, d.unpack(r))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// StatusText says what the driver is in node reports: not a real host's.
func (d *Driver) StatusText() string {
	return "ok: test driver: fake machines, capacity from its config, not this host's"
}

// Logs implements drivers.LogReader with two lines a test can look for (a
// fake machine has no output of its own).
func (d *Driver) Logs(ctx context.Context, r *types.Resource, opts drivers.LogOptions, w io.Writer) error {
	if _, err := d.Status(ctx, r); err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	lines := []string{"test machine " + r.ID + " started", "test machine " + r.ID + " has no output of its own"}
	if opts.Tail > 0 && opts.Tail < len(lines) {
		lines = lines[len(lines)-opts.Tail:]
	}
	for _, l := range lines {
		if _, err := io.WriteString(w, l+"\n"); err != nil {
			return err
		}
	}
	return nil
}
