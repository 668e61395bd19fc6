// Package docker is the "docker" driver: each machine is a container on the
// node's Docker Engine, with the template's CPU and memory as limits, the
// claim's metadata as environment and its ports published on 127.0.0.1.
//
// The driver keeps no state of its own: labels on the containers say whose
// they are ("<ns>.node", "<ns>.instance", "<ns>.machine", "<ns>.claim"), so a
// restarted driver finds its containers again, and several nodes (each with
// its own label namespace or node name) can share one engine without touching
// each other's containers. Images are never pulled: a template names a tag
// already on the engine or a `docker save` tarball that is downloaded once
// (sha256-checked, through lib/drivers/fetch) and loaded.
//
// The engine client negotiates the API version, so engines from API 1.24 up
// (Docker 1.12+) work, including 20.10 (API 1.41).
package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/docker/docker/client"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/fetch"
	"github.com/hf-fleet/hf/lib/types"
)

// Type is the driver type name.
const Type = "docker"

// ErrExited is wrapped by the error of an allocation whose container stopped
// right after it was started.
var ErrExited = errors.New("container exited")

// ErrImageNotFound is wrapped by the error of an allocation whose local image
// tag is not on the engine (the driver never pulls).
var ErrImageNotFound = errors.New("image not found on the engine")

// ErrForeign is returned by Deallocate for a container that belongs to another
// node, driver instance or label namespace; the driver leaves it alone.
var ErrForeign = errors.New("container is not this driver's")

// pingTimeout bounds the engine pings of Available and StatusText.
const pingTimeout = 2 * time.Second

// Driver is the docker driver. It is safe for concurrent use.
type Driver struct {
	env drivers.Env
	log *slog.Logger

	// mu guards the fields below it; they are set by Prepare and Close.
	mu       sync.Mutex
	cfg      Config
	cli      *client.Client
	fetcher  *fetch.Fetcher
	lbl      labels
	host     string
	capacity types.Capacity
	prepared bool

	images imageCache
	// loads counts images loaded into the engine (tests check "loaded once").
	loads atomic.Int64
}

var (
	_ drivers.Driver        = (*Driver)(nil)
	_ drivers.ActivityMeter = (*Driver)(nil)
	_ drivers.Pauser        = (*Driver)(nil)
	_ io.Closer             = (*Driver)(nil)
)

// New builds an unprepared docker driver; it is a drivers.Factory.
func New(env drivers.Env) drivers.Driver {
	return newDriver(env)
}

func newDriver(env drivers.Env) *Driver {
	env = env.Defaults(Type)
	log := env.Log
	return &Driver{env: env, log: log.With("driver", env.Instance), cfg: DefaultConfig()}
}

// Available reports whether a Docker Engine answers at host (empty: DOCKER_HOST,
// else the local socket) within ctx, or within 2 s when ctx has no deadline.
// hf-node uses it to decide whether to run a docker driver when none is
// configured.
func Available(ctx context.Context, host string) error {
	host = resolveHost(host, os.Getenv("DOCKER_HOST"))
	cli, err := newClient(host)
	if err != nil {
		return err
	}
	defer cli.Close()
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, pingTimeout)
		defer cancel()
	}
	if _, err := cli.Ping(ctx); err != nil {
		return fmt.Errorf("docker engine at %s: %w", host, err)
	}
	return nil
}

// newClient builds an engine client for host with API version negotiation;
// TLS settings come from DOCKER_TLS_VERIFY and DOCKER_CERT_PATH.
func newClient(host string) (*client.Client, error) {
	if err := validateHost(host); err != nil {
		return nil, fmt.Errorf("docker engine: host %w", err)
	}
	cli, err := client.NewClientWithOpts(client.FromEnv, client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker engine at %s: %w", host, err)
	}
	return cli, nil
}

// Name implements drivers.Driver.
func (d *Driver) Name() string { return Type }

// IsRemote implements drivers.Driver: containers use this host's capacity.
func (d *Driver) IsRemote() bool { return false }

// Prepare implements drivers.Driver: it parses cfg, connects to the engine
// (which must answer), makes sure the network exists and reads the host's
// capacity.
func (d *Driver) Prepare(ctx context.Context, cfg []byte) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("prepare %s: %w", d.env.Instance, err)
	}
	c, err := ParseConfig(cfg)
	if err != nil {
		return fmt.Errorf("prepare %s: config: %w", d.env.Instance, err)
	}
	if c.ImagesPath == "" {
		if d.env.DataDir != "" {
			c.ImagesPath = filepath.Join(d.env.DataDir, "images")
		} else {
			c.ImagesPath = filepath.Join(os.TempDir(), "hf-docker-images")
		}
	}
	host := resolveHost(c.Host, os.Getenv("DOCKER_HOST"))
	fetcher, err := fetch.New(fetch.Config{CacheDir: c.ImagesPath, User: c.DownloadUser, Password: c.DownloadPassword}, d.log)
	if err != nil {
		return fmt.Errorf("prepare %s: images_path: %w", d.env.Instance, err)
	}
	total, err := drivers.HostResources(ctx, c.ImagesPath)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", d.env.Instance, err)
	}
	cli, err := newClient(host)
	if err != nil {
		return fmt.Errorf("prepare %s: %w", d.env.Instance, err)
	}
	lbl := labels{ns: c.LabelNamespace, node: d.env.NodeName, instance: d.env.Instance}
	version, err := cli.ServerVersion(ctx)
	if err != nil {
		_ = cli.Close()
		return fmt.Errorf("prepare %s: docker engine at %s: %w", d.env.Instance, host, err)
	}
	nw, err := ensureNetwork(ctx, cli, c.Network, lbl, c.NetworkICC, nil)
	if err != nil {
		_ = cli.Close()
		return fmt.Errorf("prepare %s: %w", d.env.Instance, err)
	}
	if !c.NetworkICC && !isolated(nw) {
		d.log.Warn("docker network lets machines reach each other", "network", c.Network,
			"detail", "it was made by someone else or before hf isolated its networks; remove it (once no container uses it) and the driver makes one with inter-container traffic off, or set network_icc: true to keep it quietly")
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cli != nil {
		_ = d.cli.Close()
	}
	if c.NetworkPerUser {
		st := snapshot{cfg: c, cli: cli, lbl: lbl, host: host}
		if err := d.dropIdleUserNetworks(ctx, st); err != nil {
			d.log.Warn("remove idle users' networks", "err", err)
		}
	}
	d.cfg, d.cli, d.fetcher, d.lbl, d.host = c, cli, fetcher, lbl, host
	d.capacity = c.Alter.Capacity(total)
	d.prepared = true
	d.log.Info("docker driver prepared", "host", host, "engine", version.Version,
		"api", cli.ClientVersion(), "network", c.Network, "network_per_user", c.NetworkPerUser, "label_namespace", c.LabelNamespace)
	return nil
}

// Close releases the engine client's connections. The driver is unusable
// afterwards (its methods return drivers.ErrNotPrepared); containers keep
// running. hf-node calls it on shutdown (the driver is an io.Closer).
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.prepared = false
	if d.cli == nil {
		return nil
	}
	err := d.cli.Close()
	d.cli = nil
	if err != nil {
		return fmt.Errorf("close %s: %w", d.env.Instance, err)
	}
	return nil
}

// StatusText is the driver's state for the node report: "ok: engine
// <version>, api <version>", or why the engine does not answer. It asks the
// engine, for at most 2 s.
func (d *Driver) StatusText() string {
	st, err := d.state()
	if err != nil {
		return err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), pingTimeout)
	defer cancel()
	v, err := st.cli.ServerVersion(ctx)
	if err != nil {
		return fmt.Sprintf("engine at %s unreachable: %v", st.host, err)
	}
	return fmt.Sprintf("ok: engine %s, api %s", v.Version, st.cli.ClientVersion())
}

// HostCapacity implements drivers.Driver: this host's CPUs, RAM and the disk
// of images_path (read by Prepare), with the alter settings applied. Usage is
// counted by the node.
func (d *Driver) HostCapacity() types.Capacity {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.capacity
}

// ValidateTemplate implements drivers.Driver: the template needs an entry for
// the instance name or "docker" that decodes into TemplateConfig, and may ask
// for a privileged container only where allow_privileged is set.
func (d *Driver) ValidateTemplate(t types.MachineTemplate) error {
	_, err := d.templateConfig(t)
	return err
}

func (d *Driver) templateConfig(t types.MachineTemplate) (TemplateConfig, error) {
	tc, prefix, err := drivers.TemplateEntry(t, d.env.Instance, Type, ParseTemplateConfig)
	if err != nil {
		return TemplateConfig{}, err
	}
	d.mu.Lock()
	allow, allowRoot := d.cfg.AllowPrivileged, d.cfg.AllowRoot
	d.mu.Unlock()
	if tc.Privileged && !allow {
		return TemplateConfig{}, types.Invalid(prefix+".privileged", "not allowed on this node (allow_privileged is false)")
	}
	if tc.User != "" {
		if err := checkUser(tc.User, allowRoot); err != nil {
			return TemplateConfig{}, types.Invalid(prefix+".user", "%s", err.Error())
		}
	}
	return tc, nil
}

// snapshot is what one call needs of the prepared driver.
type snapshot struct {
	cfg     Config
	cli     *client.Client
	fetcher *fetch.Fetcher
	lbl     labels
	host    string
}

// state returns the prepared driver's settings, or ErrNotPrepared.
func (d *Driver) state() (snapshot, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.prepared {
		return snapshot{}, drivers.ErrNotPrepared
	}
	return snapshot{cfg: d.cfg, cli: d.cli, fetcher: d.fetcher, lbl: d.lbl, host: d.host}, nil
}

// SharesHost implements drivers.HostSharer: containers run on this host
// (its capacity is this host's, read by Prepare).
func (d *Driver) SharesHost() bool { return true }
