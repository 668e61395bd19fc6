package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hf-fleet/hf/lib/cluster/internal/queue"
	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

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
	// ResyncInterval is how often the level-triggered reconcile runs.
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
}

func (c *Config) defaults() {
	if c.Placement == "" {
		c.Placement = types.PlacementPack
	}
	if c.OfferTimeout <= 0 {
		c.OfferTimeout = 2 * time.Second
	}
	if c.ResyncInterval <= 0 {
		c.ResyncInterval = 30 * time.Second
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

// Node runs one hf-node's duties: it answers offers from electors by reserving
// its own capacity, allocates and releases machines through its drivers, elects
// serving nodes for the claims it owns, and keeps its Node object fresh.
type Node struct {
	cfg       Config
	log       *slog.Logger
	st        *store.Store
	peers     Peers
	instances map[string]Instance
	order     []string // instance names in config order

	ledger  *ledger
	inbox   *queue.Queue[Message]
	elect   *queue.Queue[electEvent]
	reportQ chan struct{}
	memberQ chan struct{}

	startedAt time.Time
	ready     atomic.Bool
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup

	// busy tracks machines with an allocation or release under way.
	busyMu sync.Mutex
	busy   map[string]bool
	// failures counts failed allocations per claim, for back-off.
	failures map[string]int
	// unassigned is when each Requested claim was first seen without a node.
	unassigned map[string]time.Time
	pool       pool
	setQ       chan struct{}
	metrics    *metrics
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
		inbox:     queue.New[Message](),
		elect:     queue.New[electEvent](),
		reportQ:   make(chan struct{}, 1),
		memberQ:   make(chan struct{}, 1),
		setQ:      make(chan struct{}, 1),
		pool:      pool{takes: map[string]string{}, onDemand: map[string]string{}, capped: map[string]string{}, waiting: map[string]bool{}},
		busy:      map[string]bool{},
		metrics:   newMetrics(),
	}
	for _, in := range instances {
		if _, dup := n.instances[in.Name]; dup {
			return nil, fmt.Errorf("node: duplicate driver instance %q", in.Name)
		}
		n.instances[in.Name] = in
		n.order = append(n.order, in.Name)
	}
	if peers == nil {
		peers = &localPeers{self: cfg.Name, inbox: n.inbox}
	}
	n.peers = peers
	n.ledger = newLedger(n.capacityChanged)
	return n, nil
}

// SetGossipAddress sets the gossip address published in the Node object (known
// only once membership has bound its port). Call it before Start.
func (n *Node) SetGossipAddress(addr string) { n.cfg.GossipAddress = addr }

// Deliver hands a message from another node to this node. It never blocks.
func (n *Node) Deliver(m Message) { n.inbox.Push(m) }

// Name is the node's name.
func (n *Node) Name() string { return n.cfg.Name }

// Ready returns nil once the node has reconciled and serves claims.
func (n *Node) Ready() error {
	if !n.ready.Load() {
		return errors.New("node is starting")
	}
	return nil
}

// Start reconciles the drivers' holdings against the store, publishes the Node
// object and starts the node's loops. Stop ends them.
func (n *Node) Start(ctx context.Context) error {
	n.startedAt = n.cfg.Now()
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if err := n.reconcileStart(ctx); err != nil {
		n.cancel()
		return fmt.Errorf("start: %w", err)
	}
	if err := n.report(types.NodeUp); err != nil {
		n.cancel()
		return fmt.Errorf("start: %w", err)
	}
	// The watch starts from the current sequence; everything before it is
	// covered by the initial resync the watch loop does first.
	from := n.st.Seq()
	events := n.st.Watch(n.ctx, from)
	n.spawn(func() { n.watchLoop(events) })
	n.spawn(n.inboxLoop)
	n.spawn(n.electLoop)
	n.spawn(n.reportLoop)
	n.spawn(n.memberLoop)
	n.spawn(n.healthLoop)
	n.spawn(n.setLoop)
	n.resync()
	n.ready.Store(true)
	n.log.Info("node started", "drivers", len(n.instances))
	return nil
}

// Stop ends the node's loops and waits for allocations and releases under way
// (their driver calls see a cancelled context). The Node object is marked Down.
func (n *Node) Stop(ctx context.Context) error {
	if n.cancel == nil {
		return nil
	}
	n.ready.Store(false)
	n.cancel()
	done := make(chan struct{})
	go func() { n.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return fmt.Errorf("stop: %w", ctx.Err())
	}
	if err := n.report(types.NodeDown); err != nil && !errors.Is(err, store.ErrClosed) {
		return fmt.Errorf("stop: %w", err)
	}
	n.log.Info("node stopped")
	return nil
}

func (n *Node) spawn(f func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		f()
	}()
}

// claimBusy marks a machine as having work under way; false if it already had.
func (n *Node) claimBusy(machine string) bool {
	n.busyMu.Lock()
	defer n.busyMu.Unlock()
	if n.busy[machine] {
		return false
	}
	n.busy[machine] = true
	return true
}

func (n *Node) doneBusy(machine string) {
	n.busyMu.Lock()
	delete(n.busy, machine)
	n.busyMu.Unlock()
}

// capacityChanged is called after every ledger change: wake waiting claims and
// refresh the Node object soon.
func (n *Node) capacityChanged() {
	select {
	case n.reportQ <- struct{}{}:
	default:
	}
	n.elect.Push(electEvent{refresh: true})
}
