package membertest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/member"
	"github.com/hf-fleet/hf/lib/cluster/wire"
	"github.com/hf-fleet/hf/lib/store"
)

// FastConfig is a member config with test timings: anti-entropy every
// 200 ms, rejoin every 300 ms, and the LAN profile's failure detection (a
// dead member is declared in 1-3 s). Under the race detector, on a loaded
// 2-core box, 200 ms probe timeouts flap (UDP acks arrive late, members are
// wrongly declared dead), so there probes run every 500 ms with a 400 ms
// timeout (dead in 3-6 s).
func FastConfig() member.Config {
	cfg := member.Config{
		Profile:             member.ProfileLAN,
		RejoinInterval:      300 * time.Millisecond,
		AntiEntropyInterval: 200 * time.Millisecond,
	}
	if raceEnabled {
		cfg.GossipInterval = 50 * time.Millisecond
		cfg.ProbeInterval = 500 * time.Millisecond
		cfg.ProbeTimeout = 400 * time.Millisecond
	}
	return cfg
}

// Options configure a test cluster.
type Options struct {
	// Config is every member's base config (FastConfig when its Profile is
	// empty); Name,
	// Bind, Join, Transport, OnMessage and OnMembership are set per member.
	Config member.Config
	// InMemory keeps the stores in memory (faster; Restart then starts empty).
	InMemory bool
	// Net is the network to use; nil makes one (Cluster.Net).
	Net *Network
	// Prefix starts every member name (default "n": n0, n1, ...).
	Prefix string
	// Log receives every member's and store's log; nil discards.
	Log *slog.Logger
	// Settle bounds Start's wait for the members to see each other
	// (default 10s).
	Settle time.Duration
}

// Node is one member of a test cluster with its store.
type Node struct {
	Name   string
	Dir    string
	Store  *store.Store
	Member *member.Member
	// Addr is the member's gossip address (kept across restarts).
	Addr string

	running     bool
	mu          sync.Mutex
	messages    []wire.Message
	memberships atomic.Int64
}

// Messages returns the election messages the member received so far.
func (n *Node) Messages() []wire.Message {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]wire.Message(nil), n.messages...)
}

// MembershipCalls counts OnMembership calls, across restarts.
func (n *Node) MembershipCalls() int64 { return n.memberships.Load() }

// Cluster is a set of members in this process on 127.0.0.1, each with its own
// store under t.TempDir(). t.Cleanup stops them all. Its methods are for the
// test goroutine.
type Cluster struct {
	T testing.TB
	// Net cuts and heals the links between the members.
	Net *Network
	// Nodes are every member ever added, running or not, in order.
	Nodes []*Node
	opts  Options
	log   *slog.Logger
	dir   string
}

// Start starts n members, each joined to the first, and waits until every
// one sees all n.
func Start(t testing.TB, n int, opts Options) *Cluster {
	t.Helper()
	if opts.Config.Profile == "" {
		opts.Config = FastConfig()
	}
	if opts.Net == nil {
		opts.Net = NewNetwork()
	}
	if opts.Prefix == "" {
		opts.Prefix = "n"
	}
	log := opts.Log
	if log == nil && os.Getenv("HF_TEST_LOG") != "" {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Cluster{T: t, Net: opts.Net, opts: opts, log: log}
	// The data dirs live under one temp dir made before the cleanup is
	// registered, so that the stores close before the dirs are removed.
	c.dir = t.TempDir()
	t.Cleanup(c.stopAll)
	for range n {
		c.Add()
	}
	settle := opts.Settle
	if settle <= 0 {
		settle = 10 * time.Second
	}
	c.WaitMembers(settle)
	return c
}

// Add starts one more member, joined to the running ones, and returns it.
// It does not wait for the others to see it.
func (c *Cluster) Add() *Node {
	c.T.Helper()
	n := c.newNode()
	c.start(n)
	return n
}

// AddAlone starts one more member with no address to join, only known
// ones (Config.Known), and returns it.
func (c *Cluster) AddAlone(known ...string) *Node {
	c.T.Helper()
	n := c.newNode()
	c.startWith(n, nil, known)
	return n
}

// newNode makes the next member's data dir and adds it to Nodes.
func (c *Cluster) newNode() *Node {
	c.T.Helper()
	name := fmt.Sprintf("%s%d", c.opts.Prefix, len(c.Nodes))
	n := &Node{Name: name, Addr: "127.0.0.1:0"}
	if !c.opts.InMemory {
		n.Dir = filepath.Join(c.dir, name)
		require.NoError(c.T, os.MkdirAll(n.Dir, 0o755))
	}
	c.Nodes = append(c.Nodes, n)
	return n
}

// Index returns the position of the member named name.
func (c *Cluster) Index(name string) int {
	for i, n := range c.Nodes {
		if n.Name == name {
			return i
		}
	}
	c.T.Fatalf("no member %s", name)
	return -1
}

// Running returns the running members.
func (c *Cluster) Running() []*Node {
	var out []*Node
	for _, n := range c.Nodes {
		if n.running {
			out = append(out, n)
		}
	}
	return out
}

// RunningNames returns the running members' names, in order.
func (c *Cluster) RunningNames() []string {
	var out []string
	for _, n := range c.Running() {
		out = append(out, n.Name)
	}
	return out
}

// start opens n's store (when closed) and starts its member on n.Addr
// (falling back to a free port), joined to the first running member.
func (c *Cluster) start(n *Node) {
	c.T.Helper()
	var join []string
	if r := c.Running(); len(r) > 0 {
		join = []string{r[0].Addr}
	}
	c.startWith(n, join, nil)
}

// startWith is start with the member's Join and Known.
func (c *Cluster) startWith(n *Node, join, known []string) {
	c.T.Helper()
	if n.Store == nil {
		st, err := store.Open(store.Config{Dir: n.Dir, InMemory: c.opts.InMemory, NodeID: n.Name, GCInterval: -1}, c.log)
		require.NoError(c.T, err)
		n.Store = st
	}
	tr, err := c.Net.Transport(n.Name, n.Addr)
	if err != nil {
		tr, err = c.Net.Transport(n.Name, "127.0.0.1:0")
	}
	require.NoError(c.T, err)
	cfg := c.opts.Config
	cfg.Name = n.Name
	cfg.Bind = tr.Addr()
	cfg.Join, cfg.Known = join, known
	cfg.Transport = tr
	cfg.OnMessage = func(m wire.Message) {
		n.mu.Lock()
		n.messages = append(n.messages, m)
		n.mu.Unlock()
	}
	cfg.OnMembership = func() { n.memberships.Add(1) }
	m, err := member.New(cfg, c.log, n.Store)
	require.NoError(c.T, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(c.T, m.Start(ctx))
	n.Member, n.Addr, n.running = m, m.Addr(), true
	_, port, _ := net.SplitHostPort(n.Addr)
	n.Addr = net.JoinHostPort("127.0.0.1", port)
}

// Stop stops member i gracefully (it leaves); its store stays open.
func (c *Cluster) Stop(i int) {
	c.T.Helper()
	n := c.Nodes[i]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(c.T, n.Member.Stop(ctx))
	n.running = false
}

// Kill stops member i abruptly, without leaving, as a crash would.
func (c *Cluster) Kill(i int) {
	c.T.Helper()
	n := c.Nodes[i]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(c.T, n.Member.Kill(ctx))
	n.running = false
}

// Restart starts stopped member i again under the same name, on the same data
// dir (its store closed and reopened) and, when free, the same port.
func (c *Cluster) Restart(i int) *Node {
	c.T.Helper()
	n := c.reopen(i)
	c.start(n)
	return n
}

// reopen closes stopped member i's store, for a restart to open it again.
func (c *Cluster) reopen(i int) *Node {
	c.T.Helper()
	n := c.Nodes[i]
	require.False(c.T, n.running, "restart of running member %s", n.Name)
	require.NoError(c.T, n.Store.Close())
	n.Store = nil
	return n
}

// RestartAlone restarts stopped member i as Restart does, but with no
// address to join, only known ones (Config.Known): as hf-node restarts under
// its service, without --join.
func (c *Cluster) RestartAlone(i int, known ...string) *Node {
	c.T.Helper()
	n := c.reopen(i)
	c.startWith(n, nil, known)
	return n
}

// WaitMembers waits until every running member sees exactly the running
// members as live.
func (c *Cluster) WaitMembers(within time.Duration) {
	c.T.Helper()
	want := c.RunningNames()
	slices.Sort(want) // Members is sorted by name: n10 before n2
	var mu sync.Mutex
	var last []string // what the members saw at the last look
	ok := assert.Eventually(c.T, func() bool {
		var saw []string
		agreed := true
		for _, n := range c.Running() {
			got := n.Member.Members()
			saw = append(saw, fmt.Sprintf("%s sees %v", n.Name, got))
			agreed = agreed && slices.Equal(got, want)
		}
		mu.Lock()
		last = saw
		mu.Unlock()
		return agreed
	}, within, 10*time.Millisecond)
	if !ok {
		mu.Lock()
		defer mu.Unlock()
		c.T.Fatalf("members never agreed on %v within %s; at the last look: %s", want, within, strings.Join(last, "; "))
	}
}

// WaitConverged waits until every running member's store has the same
// digest, and returns it.
func (c *Cluster) WaitConverged(within time.Duration) member.Digest {
	c.T.Helper()
	var d member.Digest
	require.Eventually(c.T, func() bool {
		var ok bool
		d, ok = Converged(c.Running())
		return ok
	}, within, 20*time.Millisecond, "stores never converged")
	return d
}

// Converged reports whether every node's store has the same digest, and
// that digest.
func Converged(nodes []*Node) (member.Digest, bool) {
	stores := make([]*store.Store, 0, len(nodes))
	for _, n := range nodes {
		stores = append(stores, n.Store)
	}
	return SameDigest(stores...)
}

// SameDigest reports whether every store has the same digest, and that digest.
func SameDigest(stores ...*store.Store) (member.Digest, bool) {
	var first member.Digest
	for i, st := range stores {
		d, err := member.ComputeDigest(st)
		if err != nil {
			return first, false
		}
		if i == 0 {
			first = d
		} else if d != first {
			return first, false
		}
	}
	return first, true
}

// stopAll stops every running member in parallel and closes the stores.
func (c *Cluster) stopAll() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for _, n := range c.Nodes {
		if !n.running {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := n.Member.Stop(ctx); err != nil {
				c.T.Errorf("stop %s: %v", n.Name, err)
			}
		}()
	}
	wg.Wait()
	for _, n := range c.Nodes {
		n.running = false
		if n.Store != nil {
			_ = n.Store.Close()
		}
	}
}
