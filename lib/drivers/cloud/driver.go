// Package cloud holds the remote drivers whose machines are cloud VMs: "aws"
// (EC2, through aws-sdk-go-v2) and "gce" (Compute Engine, through
// google.golang.org/api/compute/v1). Both are one Driver over a provider,
// the cloud's API; capacity is a quota, not this host's.
//
// The driver keeps no state of its own: every instance is tagged (aws) or
// labelled (gce) with its node, driver instance, machine and claim when it is
// created, in the create call itself, so List finds every instance of this
// node and driver instance, including one whose Allocate was cut short by a
// crash, and the node's start reconcile adopts or releases it.
//
// Claim metadata reaches a VM as data only, under the keys its template
// declares: files written by cloud-init from the user data (aws) or metadata
// items (gce).
package cloud

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// Driver type names.
const (
	TypeAWS = "aws"
	TypeGCE = "gce"
)

// checkTimeout bounds the cloud calls of ValidateTemplate and of the first
// quota read, which have no caller's context.
const checkTimeout = 30 * time.Second

// Driver is a cloud driver. It is safe for concurrent use.
type Driver struct {
	env  drivers.Env
	log  *slog.Logger
	kind string
	// connect parses the driver's config and builds its provider.
	connect func(ctx context.Context, cfg []byte) (provider, Common, error)
	now     func() time.Time
	// consolePoll is how often Logs reads a followed console again.
	consolePoll time.Duration

	mu       sync.Mutex
	prov     provider
	common   Common
	prepared bool
	// ctx ends with Close; background quota reads run under it, and
	// Close waits for them (bg).
	ctx    context.Context
	cancel context.CancelFunc
	bg     sync.WaitGroup
	checks map[string]check

	capMu sync.Mutex
	cap   *capacity

	meterMu sync.Mutex
	meters  map[string]meterState // instance id -> what Activity counted
}

// check is a cached result of checking a template entry with the cloud.
type check struct {
	tc  any
	err error
	at  time.Time
}

var (
	_ drivers.Driver = (*Driver)(nil)
	_ io.Closer      = (*Driver)(nil)
)

func newDriver(env drivers.Env, kind string, connect func(context.Context, []byte) (provider, Common, error)) *Driver {
	env = env.Defaults(kind)
	return &Driver{env: env, log: env.Log.With("driver", env.Instance), kind: kind, connect: connect, now: time.Now,
		consolePoll: consolePoll, checks: map[string]check{}, meters: map[string]meterState{}}
}

// Name implements drivers.Driver.
func (d *Driver) Name() string { return d.kind }

// IsRemote implements drivers.Driver: VMs take a cloud's quota, not this host's.
func (d *Driver) IsRemote() bool { return true }

// Prepare implements drivers.Driver: it parses cfg, builds the SDK client
// and reads the cloud's quota once (a quota it may not read is logged and the
// configured one used).
func (d *Driver) Prepare(ctx context.Context, cfg []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("prepare %s: %w", d.env.Instance, err)
	}
	prov, common, err := d.connect(ctx, cfg)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", d.env.Instance, err)
	}
	bg, cancel := context.WithCancel(context.Background())
	d.mu.Lock()
	if d.cancel != nil {
		d.cancel()
	}
	d.prov, d.common, d.prepared, d.ctx, d.cancel = prov, common, true, bg, cancel
	clear(d.checks)
	d.mu.Unlock()
	d.capMu.Lock()
	d.cap = newCapacity(common)
	d.capMu.Unlock()
	if vms, err := prov.list(ctx, d.owner()); err == nil {
		d.capMu.Lock()
		d.cap.sync(vms)
		d.capMu.Unlock()
	} else {
		return fmt.Errorf("prepare %s: list instances: %w", d.env.Instance, err)
	}
	if common.CloudQuota {
		d.capMu.Lock()
		d.cap.stale(d.now())
		d.capMu.Unlock()
		d.readQuota(ctx, prov)
	}
	d.log.Info("cloud driver prepared", "provider", d.kind, "quota_vcpus", common.Quota.VCPUs,
		"quota_instances", common.Quota.Instances, "cloud_quota", common.CloudQuota)
	return nil
}

// Close ends the driver's background quota reads and waits for them;
// instances keep running. The driver is unusable afterwards
// (drivers.ErrNotPrepared).
func (d *Driver) Close() error {
	d.mu.Lock()
	d.prepared = false
	if d.cancel != nil {
		d.cancel()
	}
	d.mu.Unlock()
	d.bg.Wait()
	return nil
}

func (d *Driver) owner() owner { return owner{node: d.env.NodeName, instance: d.env.Instance} }

// state returns the prepared driver's provider and settings.
func (d *Driver) state() (provider, Common, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.prepared {
		return nil, Common{}, drivers.ErrNotPrepared
	}
	return d.prov, d.common, nil
}

// HostCapacity implements drivers.Driver: the quota (see capacity.report).
// It never blocks: a stale reading of the cloud's quota is read again in the
// background and counts from the next call on.
func (d *Driver) HostCapacity() types.Capacity {
	prov, common, err := d.state()
	if err != nil {
		return types.Capacity{}
	}
	now := d.now()
	d.capMu.Lock()
	c := d.cap.report(now)
	refresh := common.CloudQuota && d.cap.stale(now)
	d.capMu.Unlock()
	if refresh {
		d.mu.Lock()
		defer d.mu.Unlock()
		if !d.prepared { // closed meanwhile: no read outlives Close
			return c
		}
		bg := d.ctx
		d.bg.Go(func() {
			ctx, cancel := context.WithTimeout(bg, checkTimeout)
			defer cancel()
			d.readQuota(ctx, prov)
		})
	}
	return c
}

// readQuota reads the cloud's quota into the ledger.
func (d *Driver) readQuota(ctx context.Context, prov provider) {
	u, err := prov.quota(ctx, d.owner())
	d.capMu.Lock()
	defer d.capMu.Unlock()
	if err != nil {
		if d.cap.cloud == nil {
			d.log.Info("cloud quota not readable; the configured quota applies", "err", err)
		} else {
			d.log.Debug("cloud quota read failed; the last reading applies", "err", err)
		}
		d.cap.read(d.now(), nil)
		return
	}
	d.cap.read(d.now(), &u)
}

// ValidateTemplate implements drivers.Driver: the template needs an entry for
// the instance name or the driver type that decodes and checks, and whose
// image the cloud has. The cloud's answer is cached for quota_refresh.
func (d *Driver) ValidateTemplate(t types.MachineTemplate) error {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	_, err := d.templateConfig(ctx, t)
	return err
}

func (d *Driver) templateConfig(ctx context.Context, t types.MachineTemplate) (any, error) {
	prov, common, err := d.state()
	if err != nil {
		return nil, err
	}
	tc, field, err := drivers.TemplateEntry(t, d.env.Instance, d.kind, prov.parseTemplate)
	if err != nil {
		return nil, err
	}
	key := field + "\x00" + string(t.Spec.ProviderConfiguration[strings.TrimPrefix(field, "spec.providerConfiguration.")])
	now := d.now()
	d.mu.Lock()
	c, ok := d.checks[key]
	d.mu.Unlock()
	if ok && now.Sub(c.at) < common.QuotaRefresh.Duration {
		return c.tc, c.err
	}
	resolved, err := prov.checkTemplate(ctx, tc)
	if err != nil && !errors.Is(err, types.ErrInvalid) {
		return nil, err // not the cloud's verdict on the entry: not cached
	}
	tc, err = resolved, drivers.PrefixField(field, err)
	d.mu.Lock()
	d.checks[key] = check{tc: tc, err: err, at: now}
	d.mu.Unlock()
	return tc, err
}
