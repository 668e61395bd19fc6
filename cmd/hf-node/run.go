package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/buildinfo"
	"github.com/hf-fleet/hf/lib/cluster"
	"github.com/hf-fleet/hf/lib/cluster/member"
	"github.com/hf-fleet/hf/lib/config"
	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/docker"
	"github.com/hf-fleet/hf/lib/drivers/native"
	"github.com/hf-fleet/hf/lib/drivers/plugin"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/openapi"
	"github.com/hf-fleet/hf/lib/pki"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// version, revision and commitTime are set by the release build (make
// build): -ldflags "-X main.version=... -X main.revision=... -X main.commitTime=...".
var version, revision, commitTime = "dev", "", ""

// run parses args, starts the node and blocks until ctx ends. It returns the
// process exit code. held are the signals main holds (holdIgnored).
func run(ctx context.Context, args []string, stdout, stderr io.Writer, held []os.Signal) int {
	info := buildinfo.Read(buildinfo.Stamp{Version: version, Revision: revision, Time: commitTime})
	cmd := &cobra.Command{
		Use:           "hf-node",
		Short:         "hf-node runs one node of an hf fleet",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       info.Version,
		Args:          cobra.NoArgs,
	}
	cmd.AddCommand(versionCmd(info))
	config.BindFlags(cmd.Flags())
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		file, _ := cmd.Flags().GetString("config")
		cfg, err := config.Load(config.LoadOptions{File: file, Flags: cmd.Flags()})
		if err != nil {
			return err
		}
		return serve(ctx, cfg, info, held, stdout, stderr)
	}
	if err := cmd.Execute(); err != nil {
		fmt.Fprintf(stderr, "hf-node: %v\n", err)
		return 1
	}
	return 0
}

func newLogger(cfg config.LogConfig, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.Level))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// The node's Cool cools its member: it is the node's Peers.
var _ cluster.Cooler = (*member.Member)(nil)

// serve runs a node with cfg until ctx ends; held are the signals it was
// started ignoring, which main holds (holdIgnored).
func serve(ctx context.Context, cfg config.Config, info buildinfo.Info, held []os.Signal, stdout, stderr io.Writer) (err error) {
	log := newLogger(cfg.Log, stderr)
	if len(held) > 0 {
		names := make([]string, len(held))
		for i, s := range held {
			names[i] = s.String()
		}
		log.Info("signals ignored by the node's launcher stay ignored by the node, not by its machines", "signals", strings.Join(names, ","))
	}
	for _, v := range cfg.IgnoredEnv {
		log.Warn("environment variable ignored: it has a config section's prefix but names none of its keys",
			"variable", v.Name, "section", v.Section, "variables", strings.Join(v.Variables, ","))
	}
	if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	name, err := nodeName(cfg.DataDir, cfg.Name)
	if err != nil {
		return err
	}

	limit := int64(cfg.MemoryLimitMB) << 20
	if limit > 0 {
		debug.SetMemoryLimit(runtimeLimit(limit))
	}
	st, err := store.Open(store.Config{
		Dir: filepath.Join(cfg.DataDir, "store"), NodeID: name,
		GCInterval: cfg.Store.GCInterval, TombstoneTTL: cfg.Store.TombstoneTTL, SyncWrites: cfg.Store.SyncWrites,
		MemoryLimit: limit,
	}, log)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeWithin(st, storeCloseTimeout); cerr != nil && err == nil {
			err = fmt.Errorf("store: %w", cerr)
		}
	}()
	trimCtx, stopTrim := context.WithCancel(ctx)
	defer stopTrim()
	// Once started, the node and its member drop at a trim what they keep
	// only for speed, squeeze what they keep, and copy it out of the
	// burst's heap (see cluster.Node.Cool).
	var cool atomic.Pointer[func() int64]
	go trimMemoryWhenIdle(trimCtx, log, mappedDir(filepath.Join(cfg.DataDir, "store")), func() int64 {
		if f := cool.Load(); f != nil {
			return (*f)()
		}
		return 0
	})

	sec, err := loadSecrets(ctx, cfg, cfg.Cluster.JoinToken, log)
	if err != nil {
		return err
	}
	// The API's port first: a node that cannot have it stops before its
	// drivers make anything (a docker network, the native driver's dirs).
	ln, err := net.Listen("tcp", cfg.API.Address)
	if err != nil {
		return fmt.Errorf("api listen: %w", err)
	}
	instances, err := prepareDrivers(ctx, cfg, name, log)
	if err != nil {
		ln.Close()
		return err
	}

	admin, err := openapi.LoadOrCreateAdminToken(st, cfg.DataDir, cfg.API.AdminToken, len(cfg.Cluster.Join) > 0)
	if err != nil {
		ln.Close()
		return err
	}
	apiAddr := ln.Addr().String()
	scheme := "http"
	if !cfg.API.PlainHTTP {
		host, _, _ := net.SplitHostPort(apiAddr)
		tlsCfg, err := sec.serverTLS(name, pki.Hosts(host, cfg.API.TLSHosts...))
		if err != nil {
			ln.Close()
			return err
		}
		ln, scheme = tls.NewListener(ln, tlsCfg), "https"
	}
	var key []byte
	var keys [][]byte
	if len(sec.Keys) > 0 {
		key, keys = sec.Keys[0], sec.Keys[1:]
	}
	timings := cfg.Cluster.Timings()
	var node *cluster.Node
	mem, err := member.New(member.Config{
		Name: name, Bind: cfg.Cluster.Bind, Advertise: cfg.Cluster.Advertise, Join: cfg.Cluster.Join,
		Known: knownPeers(st, name, log),
		Key:   key, Keys: keys, Label: cfg.Cluster.Label, Profile: string(cfg.Cluster.Profile),
		GossipInterval: timings.GossipInterval, ProbeInterval: timings.ProbeInterval,
		ProbeTimeout: timings.ProbeTimeout, SuspicionMult: timings.SuspicionMult,
		RejoinInterval: cfg.Cluster.RejoinInterval, AntiEntropyInterval: cfg.Cluster.AntiEntropyInterval,
		Fanout: cfg.Cluster.Fanout, TombstoneMinAge: cfg.Store.TombstoneMinAge,
		// A member down for less than the TTL holds early collection back,
		// as the TTL alone protected it before.
		ForgetAfter: max(member.DefaultForgetAfter, cfg.Store.TombstoneTTL),
		// node is set before Start, the first time these can be called.
		OnMessage:    func(m cluster.Message) { node.Deliver(m) },
		OnMembership: func() { node.MembershipChanged() },
	}, log, st)
	if err != nil {
		ln.Close()
		return err
	}
	node, err = cluster.New(cluster.Config{
		Name: name, APIAddress: apiAddr, Labels: cfg.Labels,
		Placement:    types.Placement(cfg.Scheduler.Placement),
		OfferTimeout: cfg.Scheduler.OfferTimeout,
		LostGrace:    cfg.Scheduler.LostGrace,
		BindTimeout:  cfg.Scheduler.BindTimeout,
		PoolLimits: scheduler.PoolLimits{
			MaxIdle: cfg.Scheduler.PoolMaxIdle, MaxAssigned: cfg.Scheduler.PoolMaxAssigned, MaxAge: cfg.Scheduler.PoolMaxAge,
		},
		ActivityResolution: cfg.Scheduler.ActivityResolution,
		MinMachine:         types.Resources{CPU: cfg.Scheduler.MinCPU, RAMGB: cfg.Scheduler.MinRAMGB},
		MaxRebinds:         cfg.Scheduler.MaxRebinds,
		MaxRefusedPasses:   cfg.Scheduler.MaxRefusedPasses,
		SoftwareVersion:    info.Version,
	}, log, st, instances, mem)
	if err != nil {
		ln.Close()
		return err
	}
	if err := mem.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	node.SetGossipAddress(mem.Addr())
	node.SetAPIAddress(advertisedAPI(apiAddr, mem.Addr()))
	if err := node.Start(ctx); err != nil {
		ln.Close()
		_ = mem.Stop(context.Background())
		return err
	}
	coolNode := node.Cool // its member's too (cluster.Cooler, asserted above)
	cool.Store(&coolNode)
	// One registry for /metrics: the process, the API and the node.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		node.Collector(), mem.Collector(), info.Collector())
	api, err := openapi.New(openapi.Config{
		AdminToken: admin.Static, Tokens: apiTokens(cfg.API.Tokens), NodeName: name, Ready: node.Ready, Metrics: reg,
		MaxClaimsPerUser: cfg.API.MaxClaimsPerUser, MaxStreamsPerToken: cfg.API.MaxStreamsPerToken, UserWritesPerSecond: cfg.API.UserWritesPerSecond,
		CORSOrigins: cfg.API.CORSOrigins, ResumeWindow: cfg.API.ResumeWindow, ShellKeepalive: cfg.API.ShellKeepalive,
		MinMachine:       types.Resources{CPU: cfg.Scheduler.MinCPU, RAMGB: cfg.Scheduler.MinRAMGB},
		ValidateTemplate: validateTemplate(instances),
		AuditFile:        filepath.Join(cfg.DataDir, "audit.log"),
		Joining: &openapi.Joining{Bundle: sec.Bundle, Endpoint: scheme + "://" + advertisedAPI(apiAddr, mem.Addr()),
			CAFingerprint: sec.CA.Fingerprint(), GossipAddress: mem.Addr()},
		Keyring:         keyringOf(sec, mem, cfg.Cluster.Key != ""),
		ClaimsOf:        node.ClaimsOf,
		LiveClaimsOf:    node.LiveClaimsOf,
		SessionsOf:      node.SessionsOf,
		NodeView:        node.NodeView,
		NodeViewChanged: node.NodeViewChanged,
		MachineLogs:     machineLogs(node),
		MachineShell: func(ctx context.Context, m string, opts drivers.ShellOptions, open func() (io.ReadWriter, error)) (drivers.ShellExit, error) {
			exit, err := node.MachineShell(ctx, m, opts, open)
			return exit, apiError(err)
		},
		AtOwner:    node.Ask,
		PeerClient: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: sec.CA.Pool(), MinVersion: tls.VersionTLS12}}},
		PeerScheme: scheme,
	}, log, st)
	if err != nil {
		ln.Close()
		_ = node.Stop(context.Background())
		_ = mem.Stop(context.Background())
		return err
	}
	node.HandleAsks(openapi.UsersKey, api.DecideUserChange)

	if err := writeAPIURL(cfg.DataDir, scheme, apiAddr); err != nil {
		log.Warn("the API's URL not saved in the data dir: hf-cli on this host will not find it", "err", err)
	}
	fmt.Fprintf(stdout, "hf-node %s %s\n", name, info.Version)
	fmt.Fprintf(stdout, "  api:      %s://%s\n", scheme, apiAddr)
	fmt.Fprintf(stdout, "  gossip:   %s\n", mem.Addr())
	fmt.Fprintf(stdout, "  data dir: %s\n", cfg.DataDir)
	switch {
	case admin.Created:
		fmt.Fprintf(stdout, "  admin token (shown once, saved to %s): %s\n", admin.Path, admin.Bearer)
	case admin.Bearer != "":
		fmt.Fprintf(stdout, "  admin token: in %s\n", admin.Path)
	case cfg.API.AdminToken == "":
		fmt.Fprintf(stdout, "  admin token: the cluster's (this node joined); a local one is saved to %s once the cluster's admin user reaches this node\n", admin.Path)
		go func() {
			if path, err := openapi.WaitLocalAdminToken(ctx, st, cfg.DataDir, name, time.Second); err == nil {
				log.Info("local admin token saved", "path", path)
			} else if ctx.Err() == nil {
				log.Warn("local admin token not saved", "err", err)
			}
		}()
	}

	if a := cfg.Debug.PprofAddress; a != "" {
		stopPprof, err := servePprof(a, log)
		if err != nil {
			ln.Close()
			_ = node.Stop(context.Background())
			_ = mem.Stop(context.Background())
			return err
		}
		defer stopPprof()
		fmt.Fprintf(stdout, "  pprof:    http://%s/debug/pprof/\n", a)
	}

	serveErr := api.Serve(ctx, ln) // returns when ctx ends
	stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	stopErr := node.Stop(stopCtx)
	// Leave gracefully, so the others see this node left rather than died.
	if err := mem.Stop(stopCtx); err != nil && stopErr == nil {
		stopErr = err
	}
	for _, in := range instances {
		if c, ok := in.Driver.(io.Closer); ok {
			_ = c.Close()
		}
	}
	if serveErr != nil && !errors.Is(serveErr, context.Canceled) {
		return serveErr
	}
	return stopErr
}

// machineLogs serves the API's machine logs from the node, in the API's
// errors.
func machineLogs(node *cluster.Node) func(context.Context, string, drivers.LogOptions, io.Writer) error {
	return func(ctx context.Context, machine string, opts drivers.LogOptions, w io.Writer) error {
		return apiError(node.MachineLogs(ctx, machine, opts, w))
	}
}

// apiError gives the node's errors of logs and shells the API's meaning,
// in the node's words (the API's sentinels say the same: wrapping one
// around the node's error said it twice, "the machine's driver runs no
// shells: m-1 (driver test): the machine's driver runs no shells").
func apiError(err error) error {
	for _, m := range []struct{ node, api error }{
		{cluster.ErrNotHere, openapi.ErrLogsNotHere},
		{cluster.ErrNoLogs, openapi.ErrNoLogs},
		{cluster.ErrNoShell, openapi.ErrNoShell},
	} {
		if errors.Is(err, m.node) {
			return apiErr{error: err, api: m.api}
		}
	}
	return err
}

// apiErr is a node error that is also the API's sentinel api.
type apiErr struct {
	error
	api error
}

func (e apiErr) Unwrap() error { return e.error }

func (e apiErr) Is(target error) bool { return target == e.api }

// keyringOf is the node's gossip keyring for the API, nil when gossip is
// not encrypted.
func keyringOf(sec *secrets, mem *member.Member, fixed bool) openapi.Keyring {
	if mem.Keyring() == nil {
		return nil
	}
	return &nodeKeyring{sec: sec, mem: mem, fixed: fixed}
}

// advertisedAPI is the API address others reach: apiAddr, with the gossip
// address's host when the API listens on every interface.
func advertisedAPI(apiAddr, gossipAddr string) string {
	gh, _, err := net.SplitHostPort(gossipAddr)
	if err != nil {
		return apiAddr
	}
	return anyHostAs(apiAddr, gh)
}

// validateTemplate checks a template's entries for the drivers of this node
// (by instance name or driver type) with the drivers themselves, so a bad
// entry is a 400 naming its field when the template is written, not a
// failure when it is claimed. Entries for drivers this node lacks are left
// to the nodes that have them.
func validateTemplate(instances []cluster.Instance) func(types.MachineTemplate) error {
	return func(t types.MachineTemplate) error {
		for _, in := range instances {
			if _, ok := t.Spec.ProviderConfiguration[in.Name]; !ok {
				if _, ok := t.Spec.ProviderConfiguration[in.Type]; !ok {
					continue
				}
			}
			if err := in.Driver.ValidateTemplate(t); err != nil {
				return err
			}
		}
		return nil
	}
}

func apiTokens(in []config.TokenConfig) []openapi.Token {
	out := make([]openapi.Token, 0, len(in))
	for _, t := range in {
		out = append(out, openapi.Token{Name: t.Name, Token: t.Token, Role: string(t.Role), User: t.UserName()})
	}
	return out
}

// registry lists the driver types this build knows.
func registry() *drivers.Registry {
	r := drivers.NewRegistry()
	_ = r.Register(testdriver.Type, testdriver.New)
	_ = r.Register(native.Type, native.New)
	_ = r.Register(docker.Type, docker.New)
	// The cloud drivers run in a plugin process (hf-driver-cloud), started
	// when one is configured: their SDKs stay out of this binary.
	for _, t := range plugin.CloudTypes {
		_ = r.Register(t, plugin.Factory(plugin.Cloud, t))
	}
	return r
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

func prepareDrivers(ctx context.Context, cfg config.Config, node string, log *slog.Logger) ([]cluster.Instance, error) {
	reg := registry()
	list := cfg.Drivers
	offered := len(list) // from here on, drivers the host offers, not configured ones
	if cfg.DefaultDrivers {
		// No drivers configured: take what this host offers.
		// The native driver picks its mode from the daemon's user: as root a
		// fresh user per machine, otherwise the daemon's own user.
		list = append(list, config.DriverConfig{Name: native.Type})
		probe, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := docker.Available(probe, "")
		cancel()
		if err == nil {
			list = append(list, config.DriverConfig{Name: docker.Type})
		} else {
			log.Info("docker driver not started: no engine answers", "err", err)
		}
	}
	var out []cluster.Instance
	for i, dc := range list {
		inst := dc.InstanceName()
		dir := filepath.Join(cfg.DataDir, "drivers", unsafeChars.ReplaceAllString(inst, "_"))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("drivers[%d]: %w", i, err)
		}
		d, err := reg.New(dc.Name, drivers.Env{Instance: inst, DataDir: dir, NodeName: node, Log: log.With("node", node)})
		if err != nil {
			return nil, fmt.Errorf("drivers[%d].name: %w", i, err)
		}
		raw, err := dc.ConfigJSON()
		if err != nil {
			return nil, fmt.Errorf("drivers[%d].config: %w", i, err)
		}
		if err := d.Prepare(ctx, raw); err != nil {
			if i >= offered {
				log.Warn("driver not started: this host cannot run it", "driver", dc.Name, "err", err)
				continue
			}
			return nil, fmt.Errorf("drivers[%d].config: %w", i, err)
		}
		out = append(out, cluster.Instance{Name: inst, Type: dc.Name, Driver: d})
	}
	return out, nil
}

// nodeName returns the node's name, kept in the data dir whether it was
// configured or generated on first start, so a restarted node is the same
// member. A node given another name than its data dir's refuses to start:
// under the new name it would take every machine its drivers hold for the
// old one as unknown, and release them all.
func nodeName(dataDir, configured string) (string, error) {
	path := filepath.Join(dataDir, "node-name")
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		kept := strings.TrimSpace(string(b))
		if err := types.ValidateName(path, kept); err != nil {
			return "", err
		}
		if configured != "" && configured != kept {
			return "", fmt.Errorf("name %s: data dir %s is node %s's (%s): a node keeps its name, or it would take the machines its drivers hold as another node's and release them; start it as %s, or give %s a data dir of its own",
				configured, dataDir, kept, path, kept, configured)
		}
		return kept, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("read node name: %w", err)
	}
	name := configured
	if name == "" {
		if name, err = generateName(); err != nil {
			return "", err
		}
	}
	if err := os.WriteFile(path, []byte(name+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("save node name: %w", err)
	}
	return name, nil
}

// generateName makes a node name from the host name and random digits.
func generateName() (string, error) {
	host, _ := os.Hostname()
	host = strings.Trim(regexp.MustCompile(`[^a-z0-9-]+`).ReplaceAllString(strings.ToLower(host), "-"), "-")
	if len(host) > 40 {
		host = host[:40]
	}
	if host == "" {
		host = "node"
	}
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return host + "-" + hex.EncodeToString(b), nil
}

// storeCloseTimeout bounds closing the store when the node stops. Badger's
// close flushes its memtable and retries for ever when it cannot (the data
// dir gone or unwritable): the node then stops without it, which is safe,
// since every write it acknowledged is in badger's log and replayed at the
// next start.
const storeCloseTimeout = 30 * time.Second

// closeWithin closes c, giving up after d.
func closeWithin(c io.Closer, d time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- c.Close() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		return fmt.Errorf("did not close within %s (the log says why); stopping without it: what was written is in its log and is replayed at the next start", d)
	}
}

// knownPeers are the gossip addresses of the other nodes in the store: a
// node restarted without --join (as its service runs it) joins them, so it
// finds its cluster again even where the others cannot reach it first.
func knownPeers(st *store.Store, self string, log *slog.Logger) []string {
	nodes, err := store.List[types.Node](st, types.KindNode)
	if err != nil {
		log.Warn("read the known nodes", "err", err)
		return nil
	}
	var out []string
	for _, n := range nodes {
		if n.Metadata.Name != self && n.Spec.GossipAddress != "" {
			out = append(out, n.Spec.GossipAddress)
		}
	}
	return out
}
