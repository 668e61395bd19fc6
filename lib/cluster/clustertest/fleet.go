// Package clustertest runs whole hf nodes (store, test driver, gossip member
// and node loop) in one process on 127.0.0.1, over a network that can cut links,
// for multi-node tests and benchmarks.
package clustertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster"
	"github.com/hf-fleet/hf/lib/cluster/member"
	"github.com/hf-fleet/hf/lib/cluster/member/membertest"
	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Options configure a fleet.
type Options struct {
	// Driver is each node's test driver config JSON (default 4 CPUs, 8 GB).
	Driver string
	// DriverFor overrides Driver per node index when it returns non-empty.
	DriverFor func(i int) string
	// Node is applied to each node's config (timings, placement).
	Node func(i int, cfg *cluster.Config)
	// Member is the base member config (membertest.FastConfig when zero).
	Member member.Config
	// Drivers, when set, builds node i's driver instances instead of the
	// test driver (Host.Driver is the first); dir is the node's data dir.
	Drivers func(t testing.TB, i int, node, dir string) []cluster.Instance
	// LostGrace is the nodes' grace before a dead node's machines are lost
	// (default 10s: long enough that a member wrongly suspected on a loaded
	// machine under -race comes back first; node-loss tests set it short).
	LostGrace time.Duration
}

// Members are the peers of the node loop, and say whether they joined.
var (
	_ cluster.Peers  = (*member.Member)(nil)
	_ cluster.Joiner = (*member.Member)(nil)
)

// Host is one node of a fleet.
type Host struct {
	Name   string
	Dir    string
	Addr   string // gossip address, kept across restarts
	Store  *store.Store
	Driver drivers.Driver
	Member *member.Member
	Node   *cluster.Node
	up     bool
}

// Fleet is a set of nodes. Its methods are for the test goroutine.
type Fleet struct {
	T     testing.TB
	Net   *membertest.Network
	Hosts []*Host
	opts  Options
	log   *slog.Logger
}

// Logger is the log of fleet nodes: discarded unless HF_TEST_LOG is set (to
// a level such as info or warn; any other value means debug).
func Logger() *slog.Logger {
	if v := os.Getenv("HF_TEST_LOG"); v != "" {
		var level slog.Level
		if level.UnmarshalText([]byte(v)) != nil {
			level = slog.LevelDebug
		}
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// Start starts n nodes joined together and waits until all see each other.
func Start(t testing.TB, n int, opts Options) *Fleet {
	t.Helper()
	if opts.Driver == "" {
		opts.Driver = `{"cpus": 4, "ram_gb": 8}`
	}
	if opts.Member.Profile == "" {
		opts.Member = membertest.FastConfig()
	}
	if opts.LostGrace == 0 {
		opts.LostGrace = 10 * time.Second
	}
	f := &Fleet{T: t, Net: membertest.NewNetwork(), opts: opts, log: Logger()}
	for i := range n {
		f.Hosts = append(f.Hosts, &Host{Name: fmt.Sprintf("n%d", i), Dir: t.TempDir(), Addr: "127.0.0.1:0"})
	}
	// Registered after the temp dirs, so it runs before they are removed.
	t.Cleanup(f.stopAll)
	for i := range n {
		f.start(i)
	}
	f.WaitMembers(15 * time.Second)
	return f
}

func (f *Fleet) driverConfig(i int) string {
	if f.opts.DriverFor != nil {
		if c := f.opts.DriverFor(i); c != "" {
			return c
		}
	}
	return f.opts.Driver
}

func (f *Fleet) start(i int) {
	t := f.T
	t.Helper()
	h := f.Hosts[i]
	log := f.log.With("node", h.Name)
	var join []string
	for _, o := range f.Up() {
		join = append(join, o.Addr)
	}
	st, err := store.Open(store.Config{Dir: filepath.Join(h.Dir, "store"), NodeID: h.Name, GCInterval: -1}, log)
	require.NoError(t, err)
	var instances []cluster.Instance
	if f.opts.Drivers != nil {
		instances = f.opts.Drivers(t, i, h.Name, h.Dir)
	} else {
		drv := testdriver.New(drivers.Env{Instance: "test", DataDir: filepath.Join(h.Dir, "test"), NodeName: h.Name, Log: log})
		require.NoError(t, drv.Prepare(context.Background(), []byte(f.driverConfig(i))))
		instances = []cluster.Instance{{Name: "test", Type: "test", Driver: drv}}
	}
	drv := instances[0].Driver
	tr, err := f.Net.Transport(h.Name, h.Addr)
	if err != nil {
		tr, err = f.Net.Transport(h.Name, "127.0.0.1:0")
	}
	require.NoError(t, err)
	var node *cluster.Node
	mcfg := f.opts.Member
	mcfg.Name, mcfg.Bind, mcfg.Join, mcfg.Transport = h.Name, tr.Addr(), join, tr
	mcfg.OnMessage = func(m cluster.Message) { node.Deliver(m) }
	mcfg.OnMembership = func() { node.MembershipChanged() }
	mem, err := member.New(mcfg, log, st)
	require.NoError(t, err)
	ncfg := cluster.Config{Name: h.Name, OfferTimeout: time.Second, ResyncInterval: time.Second, DownAfter: time.Second, LostGrace: f.opts.LostGrace}
	if f.opts.Node != nil {
		f.opts.Node(i, &ncfg)
	}
	node, err = cluster.New(ncfg, log, st, instances, mem)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, mem.Start(ctx))
	node.SetGossipAddress(mem.Addr())
	require.NoError(t, node.Start(ctx))
	_, port, _ := net.SplitHostPort(mem.Addr())
	h.Addr = net.JoinHostPort("127.0.0.1", port)
	h.Store, h.Driver, h.Member, h.Node, h.up = st, drv, mem, node, true
}

// Up returns the running hosts.
func (f *Fleet) Up() []*Host {
	var out []*Host
	for _, h := range f.Hosts {
		if h.up {
			out = append(out, h)
		}
	}
	return out
}

// UpNames returns the names of the running hosts, sorted.
func (f *Fleet) UpNames() []string {
	var out []string
	for _, h := range f.Up() {
		out = append(out, h.Name)
	}
	slices.Sort(out)
	return out
}

// WaitMembers waits until every running host sees exactly the running hosts.
func (f *Fleet) WaitMembers(within time.Duration) {
	f.T.Helper()
	want := f.UpNames()
	require.Eventually(f.T, func() bool {
		for _, h := range f.Up() {
			if !slices.Equal(h.Member.Members(), want) {
				return false
			}
		}
		return true
	}, within, 10*time.Millisecond, "members never agreed on %v", want)
}

// Kill stops host i as a crash would: no leave, no goodbye; its store is closed
// but kept, and its driver's machines stay (as a dead host's would).
func (f *Fleet) Kill(i int) {
	f.T.Helper()
	h := f.Hosts[i]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(f.T, h.Member.Kill(ctx))
	require.NoError(f.T, h.Node.Stop(ctx))
	require.NoError(f.T, h.Store.Close())
	h.up = false
}

// Restart starts host i again, after Kill, on its data dir and gossip
// address, joining the running hosts.
func (f *Fleet) Restart(i int) {
	f.T.Helper()
	require.False(f.T, f.Hosts[i].up, "host %s is running", f.Hosts[i].Name)
	f.start(i)
}

// Partition cuts every link between the groups (host indexes).
func (f *Fleet) Partition(groups ...[]int) {
	var names [][]string
	for _, g := range groups {
		var ns []string
		for _, i := range g {
			ns = append(ns, f.Hosts[i].Name)
		}
		names = append(names, ns)
	}
	f.Net.Partition(names...)
}

// Heal restores every link.
func (f *Fleet) Heal() { f.Net.Heal() }

// Put creates obj through host i.
func (f *Fleet) Put(i int, obj types.Object) {
	f.T.Helper()
	require.NoError(f.T, obj.Validate())
	_, err := f.Hosts[i].Store.Put(obj, store.PutOptions{Create: true})
	require.NoError(f.T, err)
}

func (f *Fleet) stopAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, h := range f.Up() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.Node.Stop(ctx); err != nil {
				f.T.Errorf("stop node %s: %v", h.Name, err)
			}
			if err := h.Member.Stop(ctx); err != nil {
				f.T.Errorf("stop member %s: %v", h.Name, err)
			}
		}()
	}
	wg.Wait()
	for _, h := range f.Up() {
		_ = h.Store.Close()
		h.up = false
	}
}
