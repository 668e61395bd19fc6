package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hf-fleet/hf/lib/cluster/cache"
	"github.com/hf-fleet/hf/lib/cluster/wire"
	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Message is a direct message of the claim election (see package wire).
type Message = wire.Message

// Config configures a Node.
type Config struct {
	// Name is the node's stable name (a DNS label).
	Name string
	// APIAddress and GossipAddress are published in the Node object.
	APIAddress    string
	GossipAddress string
	Labels        map[string]string
	// Placement is the default placement policy.
	Placement types.Placement
	// OfferTimeout is how long an elector waits for an answer to an offer.
	OfferTimeout time.Duration
	// ResyncInterval is kept for configuration compatibility; nothing lists
	// the store on a timer any more.
	ResyncInterval time.Duration
	// ReportInterval is how often the node refreshes its Node object.
	ReportInterval time.Duration
	// SoftwareVersion is published in the Node object.
	SoftwareVersion string
	// DownAfter is how long a member must be absent before its Node object is
	// marked Down (default 2s; memberlist has already declared it dead).
	DownAfter time.Duration
	// LostGrace is how long a dead node's machines are kept before they are
	// marked Lost and their claims re-bound or failed (default 30s).
	LostGrace time.Duration
	// StatusInterval is how often the drivers are asked how running machines
	// are (default 10s).
	StatusInterval time.Duration
	// PoolLimits are the machine-set reaping limits for sets that do not set
	// their own (zero fields: scheduler defaults; MaxIdle 0: no idle reaping).
	PoolLimits scheduler.PoolLimits
	// ActivityResolution is how stale a machine's recorded LastActivity may get
	// before a newer one is written (default 1m).
	ActivityResolution time.Duration
	// BindTimeout is the bind timeout of claims that do not set one (default
	// types.DefaultBindTimeout).
	BindTimeout time.Duration
	// Now is the clock (nil = time.Now).
	Now func() time.Time
	// MinMachine is the least a machine counts for in capacity, whatever
	// its template says (scheduler.min_cpu, min_ram_gb).
	MinMachine types.Resources
	// MaxRebinds is how many times a claim whose machine died is bound
	// again before it fails instead (scheduler.max_rebinds; 0: no cap).
	MaxRebinds int
	// MaxRefusedPasses fails a claim every node that fits refused in as
	// many passes in a row (scheduler.max_refused_passes; 0: it waits for
	// its bind timeout). See scheduler.NewElectorRefusing.
	MaxRefusedPasses int
	// AskTimeout bounds how long Ask waits for the owner's answer
	// (default 5s).
	AskTimeout time.Duration
	// OwnerSettle is how long a node must have owned a key before it
	// decides that key's asks (default 5s): what the last owner wrote
	// reaches it first. A node that knows no other member decides at once.
	OwnerSettle time.Duration
}

func (c *Config) defaults() {
	if c.Placement == "" {
		c.Placement = types.PlacementPack
	}
	if c.OfferTimeout <= 0 {
		c.OfferTimeout = 2 * time.Second
	}
	if c.ReportInterval <= 0 {
		c.ReportInterval = 10 * time.Second
	}
	if c.DownAfter <= 0 {
		c.DownAfter = 2 * time.Second
	}
	if c.LostGrace <= 0 {
		c.LostGrace = 30 * time.Second
	}
	if c.StatusInterval <= 0 {
		c.StatusInterval = 10 * time.Second
	}
	if c.ActivityResolution <= 0 {
		c.ActivityResolution = time.Minute
	}
	if c.BindTimeout <= 0 {
		c.BindTimeout = types.DefaultBindTimeout
	}
	if c.AskTimeout <= 0 {
		c.AskTimeout = 5 * time.Second
	}
	if c.OwnerSettle <= 0 {
		c.OwnerSettle = 5 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Instance is one prepared driver instance on this node.
type Instance struct {
	// Name is the instance name ("test", "test/big").
	Name string
	// Type is the driver type ("test", "docker").
	Type   string
	Driver drivers.Driver
}

// Node is one hf-node's part in the cluster. It is wiring only: an indexed
// cache of the store (package cache) feeds four reconcilers, each owning its
// state:
//
//   - the acceptor: this node's own machines (offers and reservations,
//     allocation, binding, release, health, activity, pauses);
//   - the elector: the claims this node elects (offers, takes of warm
//     machines, failures at the bind timeout, hand-backs of lost machines);
//   - the duties: what the rendezvous owner of a key looks after (machine
//     sets, scheduled events, sessions, members that are gone);
//   - the reporter: this node's Node object.
//
// See doc.go for the protocol.
type Node struct {
	cfg       Config
	log       *slog.Logger
	st        *store.Store
	peers     Peers
	instances map[string]Instance
	order     []string // instance names in config order

	cache   *cache.Cache
	view    *view
	acc     *acceptor
	el      *elector
	duties  *duties
	rep     *reporter
	asks    *asks
	metrics *metrics
	// refused logs the writes the store refuses that are tried again: the
	// acceptor's, and the report and last activity written on timers.
	refused *refusals
	// viewNotice tells NodeView's watchers that membership moved it.
	viewNotice notice
	// quorumNotice tells those waiting for the view's quorum (quorumWithin)
	// that a probe answered or membership moved.
	quorumNotice notice

	startedAt time.Time
	ready     atomic.Bool
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	tasks     chan func() // to a spawned goroutine waiting for its next function
}

// New builds a node. peers may be nil for a node that runs alone.
func New(cfg Config, log *slog.Logger, st *store.Store, instances []Instance, peers Peers) (*Node, error) {
	cfg.defaults()
	if err := types.ValidateName("name", cfg.Name); err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	if len(instances) == 0 {
		return nil, errors.New("node: no driver instances")
	}
	n := &Node{
		cfg:       cfg,
		log:       log.With("node", cfg.Name),
		st:        st,
		instances: map[string]Instance{},
		tasks:     make(chan func()),
	}
	for _, in := range instances {
		if _, dup := n.instances[in.Name]; dup {
			return nil, fmt.Errorf("node: duplicate driver instance %q", in.Name)
		}
		n.instances[in.Name] = in
		n.order = append(n.order, in.Name)
	}
	n.metrics = newMetrics(n.order)
	if peers == nil {
		peers = &localPeers{self: cfg.Name, deliver: n.Deliver}
	}
	n.peers = peers
	n.cache = newCache(st, n.log)
	n.refused = newRefusals(n.log, cfg.Now)
	n.view = &view{self: cfg.Name, peers: peers, cache: n.cache, now: cfg.Now, nodeDeleted: nodeDeletedIn(st)}
	n.acc = newAcceptor(n)
	n.el = newElector(n)
	n.duties = newDuties(n)
	n.rep = newReporter(n)
	n.asks = newAsks(n)
	n.cache.OnChange(n.onChange)
	return n, nil
}

// SetGossipAddress sets the gossip address published in the Node object (known
// only once membership has bound its port). Call it before Start.
func (n *Node) SetGossipAddress(addr string) { n.cfg.GossipAddress = addr }

// SetAPIAddress sets the API address published in the Node object, for an
// API that listens on every address (0.0.0.0:7700) and is reached at the
// gossip host. Call it before Start.
func (n *Node) SetAPIAddress(addr string) { n.cfg.APIAddress = addr }

// Deliver hands a message from another node (or this one) to this node. It
// never blocks.
func (n *Node) Deliver(m Message) {
	switch {
	case m.Type == wire.MsgOffer || m.Type == wire.MsgTake:
		n.acc.deliver(m)
	case m.Type == wire.MsgAccept || m.Type == wire.MsgDecline:
		n.el.deliver(m)
	case m.Type == wire.MsgAsk:
		n.asks.received(m)
	case m.Type == wire.MsgAnswer:
		n.asks.answered(m)
	default:
		n.log.Debug("message dropped", "type", m.Type, "from", m.From)
	}
}

// MembershipChanged tells the node that a member joined, left or died. It
// never blocks (memberlist's event callbacks call it).
func (n *Node) MembershipChanged() {
	n.view.membersChanged()
	n.el.membersChanged()
	n.duties.membersChanged()
	n.asks.membersChanged()
	n.quorumNotice.notify()
	n.rep.kick()
	// Last: the duties note who went absent, which NodeView reads.
	n.viewNotice.notify()
}

// lookAgain has the elector, the duties and asks waiting for a quorum look
// at membership again (a probe of the members has answered).
func (n *Node) lookAgain() {
	n.el.probed()
	n.duties.membersChanged()
	n.quorumNotice.notify()
}

// Name is the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// Ready returns nil once the node serves claims: its drivers are prepared
// (New takes prepared instances only), it has reconciled what they hold
// against the store (Start), and, when its peers know whether it joined the
// cluster it was told to join (Joiner), it has; and while its store takes
// new work (a disk nearly full makes it unready until there is room).
func (n *Node) Ready() error {
	if !n.ready.Load() {
		return errors.New("node is starting: reconciling what its drivers hold")
	}
	if j, ok := n.peers.(Joiner); ok {
		if err := j.Joined(); err != nil {
			return err
		}
	}
	if err := n.st.Admits(); err != nil {
		// Not the store's own words: /readyz answers anyone, and they
		// name the data dir. The log has them.
		return fmt.Errorf("%w: this node takes no new work until its operator frees space on its disk (its log says how much)", store.ErrNoSpace)
	}
	return nil
}

// Start reconciles the drivers' holdings against the store, publishes the Node
// object and starts the reconcilers. Stop ends them.
func (n *Node) Start(ctx context.Context) error {
	n.startedAt = n.cfg.Now()
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.view.start(n.ctx, n.lookAgain)
	if err := n.acc.reconcileStart(ctx); err != nil {
		n.cancel()
		return fmt.Errorf("start: %w", err)
	}
	if err := n.rep.report(types.NodeUp); err != nil {
		n.cancel()
		return fmt.Errorf("start: %w", err)
	}
	// The cache loads the store (its handlers queue every object for the
	// reconcilers) before they start, then follows the watch.
	if err := n.cache.Start(n.ctx); err != nil {
		n.cancel()
		return fmt.Errorf("start: %w", err)
	}
	n.spawn(n.cache.Wait)
	n.acc.start()
	n.el.start()
	n.duties.start()
	n.rep.start()
	n.ready.Store(true)
	n.log.Info("node started", "drivers", len(n.instances))
	return nil
}

// Stop ends the reconcilers and waits for allocations and releases under way
// (their driver calls see a cancelled context). The Node object is marked Down.
func (n *Node) Stop(ctx context.Context) error {
	if n.cancel == nil {
		return nil
	}
	n.ready.Store(false)
	n.cancel()
	n.acc.stop()
	n.el.stop()
	n.duties.stop()
	done := make(chan struct{})
	go func() { n.wg.Wait(); n.view.wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("stop: %w", ctx.Err())
	}
	if err := n.rep.report(types.NodeDown); err != nil && !errors.Is(err, store.ErrClosed) {
		return fmt.Errorf("stop: %w", err)
	}
	n.log.Info("node stopped")
	return nil
}

// spawn runs f on a goroutine Stop waits for. The goroutines are reused:
// one whose function returned waits up to spawnIdle for the next, until
// the node stops. A burst spawns an allocation and a message or two per
// claim, and each new goroutine grew its stack again on the way into the
// driver and the JSON encoder: copying stacks took ~6 % of a node's CPU.
func (n *Node) spawn(f func()) {
	select {
	case n.tasks <- f: // a waiting goroutine took it
		return
	default:
	}
	n.wg.Add(1)
	go n.worker(f)
}

// spawnIdle is how long a spawned goroutine waits for another function.
const spawnIdle = 5 * time.Second

func (n *Node) worker(f func()) {
	defer n.wg.Done()
	idle := time.NewTimer(spawnIdle)
	defer idle.Stop()
	for {
		f()
		idle.Reset(spawnIdle)
		select {
		case f = <-n.tasks:
		case <-idle.C:
			return
		case <-n.ctx.Done():
			return
		}
	}
}

// onChange hands every change the cache sees to the reconcilers that care.
// It runs on the cache's goroutine and never blocks.
func (n *Node) onChange(kind, name string, old, obj types.Object) {
	n.acc.changed(kind, name, old, obj)
	n.el.changed(kind, name, old, obj)
	n.duties.changed(kind, name, old, obj)
	if kind == types.KindNode {
		if old == nil || obj == nil {
			n.view.nodesChanged()
			n.viewNotice.notify() // the known count moved
		}
		n.el.refresh()
		if self, ok := obj.(*types.Node); ok && name == n.cfg.Name && self.DownHolds() {
			n.rep.answer()
		}
	}
}

// bindTimeout is the claim's bind timeout, or this node's default.
func (n *Node) bindTimeout(c *types.MachineClaim) time.Duration {
	if c.Spec.BindTimeout.Duration > 0 {
		return c.Spec.BindTimeout.Duration
	}
	return n.cfg.BindTimeout
}

// claimState is scheduler.ClaimStateOf with this node's default bind timeout.
func (n *Node) claimState(c *types.MachineClaim) scheduler.ClaimState {
	if c == nil {
		return scheduler.ClaimState{}
	}
	return scheduler.ClaimStateOf(c, n.bindTimeout(c))
}

// template returns the template of name from the cache.
func (n *Node) template(name string) (*types.MachineTemplate, bool) {
	return cache.Typed[types.MachineTemplate](n.cache, types.KindMachineTemplate, name)
}

// claim returns the claim of name from the cache.
func (n *Node) claim(name string) (*types.MachineClaim, bool) {
	return cache.Typed[types.MachineClaim](n.cache, types.KindMachineClaim, name)
}

// machine returns the machine of name from the cache.
func (n *Node) machine(name string) (*types.Machine, bool) {
	return cache.Typed[types.Machine](n.cache, types.KindMachine, name)
}

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }
