package member

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/hf-fleet/hf/lib/cluster/internal/queue"
	"github.com/hf-fleet/hf/lib/cluster/wire"
	"github.com/hf-fleet/hf/lib/internal/intern"
	"github.com/hf-fleet/hf/lib/store"
)

// Sentinel errors callers branch on.
var (
	// ErrNotMember: the addressee is not a live member.
	ErrNotMember = errors.New("not a live member")
	// ErrNotRunning: the member is not started, or stopped.
	ErrNotRunning = errors.New("member is not running")
)

// leaveTimeout bounds Stop's wait for memberlist's leave broadcast: ten
// gossip rounds, within [500ms, 5s]. The wait can only time out when every
// other member has left or died meanwhile (memberlist gossips to neither), so
// there is nobody to tell.
func leaveTimeout(gossip time.Duration) time.Duration {
	return min(max(10*gossip, 500*time.Millisecond), 5*time.Second)
}

// lifecycle of a Member.
const (
	stateNew = iota
	stateRunning
	stateStopping
	stateStopped
)

// Member is this node's membership in the cluster: memberlist gossip, direct
// messages for the election, and replication of the store (push of own writes
// plus anti-entropy). It implements cluster.Peers. A Member serves one
// Start/Stop; a restart builds a new one.
type Member struct {
	cfg   Config
	log   *slog.Logger
	st    *store.Store
	table *members

	// changed wakes the membership loop (OnMembership).
	changed chan struct{}
	inbox   *queue.Queue[wire.Message]
	applyQ  *queue.Queue[[]byte]
	aeQ     *queue.Queue[[]byte]
	ae      *antiEntropy
	senders *senders
	metrics *metrics
	// relayed are the pushed versions this member relayed (applyMessage).
	relayed relayedVersions
	// joined latches once this member has been part of a cluster (Joined).
	joined atomic.Bool
	// noLinks makes the member behave as one of the release before links
	// (tests of the mixed cluster of an upgrade): it offers none and uses
	// none. Set before Start.
	noLinks bool

	mu    sync.Mutex // guards the fields below and Adds to ioWG
	state int
	ml    *memberlist.Memberlist
	keys  *memberlist.Keyring
	addr  string
	// tr is memberlist's transport, which links share (linktransport.go);
	// links are the outgoing ones (links.go).
	tr    *linkTransport
	links *links
	// gossipInterval is the effective one, for the leave timeout.
	gossipInterval time.Duration

	// Loops (pusher, anti-entropy rounds, rejoin, membership) stop first, on
	// Stop; the I/O goroutines (senders, workers, answers) after the leave.
	loopCtx    context.Context
	loopCancel context.CancelFunc
	loopWG     sync.WaitGroup
	ioCtx      context.Context
	ioCancel   context.CancelFunc
	ioWG       sync.WaitGroup
	ioClosed   bool
}

// New builds a member; Start joins the cluster. st's NodeID must equal
// cfg.Name.
func New(cfg Config, log *slog.Logger, st *store.Store) (*Member, error) {
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.Default()
	}
	if st == nil {
		return nil, errors.New("member: store is required")
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("member: %w", err)
	}
	if st.NodeID() != cfg.Name {
		return nil, fmt.Errorf("member: name %q differs from the store's node id %q", cfg.Name, st.NodeID())
	}
	m := &Member{
		cfg:     cfg,
		log:     log.With("node", cfg.Name),
		st:      st,
		changed: make(chan struct{}, 1),
		inbox:   queue.New[wire.Message](),
		applyQ:  queue.New[[]byte](),
		aeQ:     queue.New[[]byte](),
	}
	m.metrics = newMetrics()
	m.ae = newAntiEntropy(m, newKeeper(st, m.log, cfg.AntiEntropyInterval))
	m.senders = newSenders(m)
	m.table = newMembers(cfg.Name, cfg.ForgetAfter, m.signalChanged, m.ae.joined, m.resetLinks)
	col := &tombCollector{st: st, log: m.log, self: cfg.Name, proofs: m.ae.proofs, known: m.table.states,
		forget: cfg.ForgetAfter, minAge: cfg.TombstoneMinAge}
	m.ae.keeper.collect = col.run
	return m, nil
}

// resetLinks closes the links to and from peer (see members.reset).
func (m *Member) resetLinks(peer string) {
	m.mu.Lock()
	ls := m.links
	m.mu.Unlock()
	if ls != nil {
		ls.reset(peer)
	}
}

func (m *Member) signalChanged() {
	select {
	case m.changed <- struct{}{}:
	default:
	}
}

// Start creates the memberlist on Bind (or the configured Transport), starts
// the replication, anti-entropy and rejoin loops and joins cfg.Join. A failed
// join is logged, not returned: the rejoin loop keeps trying, so members can
// start in any order. ctx bounds the first join.
func (m *Member) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.state != stateNew {
		m.mu.Unlock()
		return errors.New("start member: already started or stopped")
	}
	mc, err := m.cfg.memberlistConfig(m.log)
	if err != nil {
		m.mu.Unlock()
		return fmt.Errorf("start member: %w", err)
	}
	mc.Delegate = &delegate{m: m}
	mc.Events = &eventDelegate{t: m.table}
	inner := m.cfg.Transport
	if inner == nil {
		nt, err := netTransport(mc.BindAddr, mc.BindPort, m.log)
		if err != nil {
			m.mu.Unlock()
			return fmt.Errorf("start member: %w", err)
		}
		if mc.BindPort == 0 {
			mc.BindPort = nt.GetAutoBindPort()
			if m.cfg.Advertise == "" {
				mc.AdvertisePort = mc.BindPort
			}
		}
		inner = nt
	}
	m.tr = newLinkTransport(inner, m.log, mc.TCPTimeout, m.serveLink)
	mc.Transport = m.tr
	m.keys = mc.Keyring
	m.links = newLinks(m.cfg.Name, m.cfg.Label, mc.Keyring, m.tr, mc.TCPTimeout)
	ml, err := memberlist.Create(mc)
	if err != nil {
		m.keys = nil
		m.mu.Unlock()
		_ = m.tr.Shutdown()
		return fmt.Errorf("start member: %w", err)
	}
	m.ml = ml
	m.gossipInterval = mc.GossipInterval
	m.addr = ml.LocalNode().Address()
	m.state = stateRunning
	m.loopCtx, m.loopCancel = context.WithCancel(context.Background())
	m.ioCtx, m.ioCancel = context.WithCancel(context.Background())
	m.mu.Unlock()

	// The watch starts at the current seq: writes before it are the
	// anti-entropy round's after the join.
	events := m.st.Watch(m.loopCtx, m.st.Seq())
	m.spawnLoop(func(ctx context.Context) { m.pushLoop(ctx, events) })
	m.spawnLoop(m.ae.keeper.run)
	m.spawnLoop(m.ae.loop)
	m.spawnLoop(m.membershipLoop)
	m.spawnLoop(m.rejoinLoop)
	m.spawnIO(m.inboxLoop)
	m.spawnIO(m.applyLoop)
	m.spawnIO(m.ae.serve)
	m.log.Info("member started", "addr", m.addr, "label", m.cfg.Label, "encrypted", len(m.cfg.Key) > 0)

	if len(m.cfg.Join) > 0 {
		if n, err := m.Join(ctx, m.cfg.Join); err != nil {
			m.log.Warn("join failed, will retry", "addrs", m.cfg.Join, "err", err, "hint", joinHint(err))
		} else {
			m.log.Info("joined", "contacted", n)
		}
	}
	return nil
}

// spawnLoop runs f on a loop goroutine (stopped first on Stop).
func (m *Member) spawnLoop(f func(ctx context.Context)) {
	m.loopWG.Add(1)
	go func() {
		defer m.loopWG.Done()
		f(m.loopCtx)
	}()
}

// spawnIO runs f on an I/O goroutine; false once Stop has stopped them.
func (m *Member) spawnIO(f func(ctx context.Context)) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ioClosed || m.ioCtx == nil {
		return false
	}
	m.ioWG.Add(1)
	go func() {
		defer m.ioWG.Done()
		f(m.ioCtx)
	}()
	return true
}

// joinHint says what to do about a failed join whose cause is the gossip
// key (one side encrypts, or with another key).
func joinHint(err error) string {
	msg := err.Error()
	if strings.Contains(msg, "decrypt") || strings.Contains(msg, "encrypt") || strings.Contains(msg, "No installed keys") {
		return "the cluster's gossip key is not this node's: start it on a fresh data dir with --join-token (hf-cli cluster join-token on a member prints one), or give it the cluster's cluster.key"
	}
	return "check that a member listens at the address and that nothing blocks TCP and UDP to it"
}

// Keyring is the running member's gossip keyring, nil before Start or
// without encryption: AddKey, UseKey and RemoveKey change it at run time,
// for a rotation without downtime (every member adds the new key, then
// every member uses it, then every member removes the old one).
func (m *Member) Keyring() *memberlist.Keyring {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.keys
}

// memberlist returns the running memberlist.
func (m *Member) memberlist() (*memberlist.Memberlist, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state != stateRunning && m.state != stateStopping {
		return nil, ErrNotRunning
	}
	return m.ml, nil
}

// Join contacts addrs (host or host:port) and merges their membership; it
// returns how many it reached, and an error when none. Addresses of this
// member are skipped (joining oneself would count as success). ctx bounds the
// wait; a join under way finishes in the background.
func (m *Member) Join(ctx context.Context, addrs []string) (int, error) {
	ml, err := m.memberlist()
	if err != nil {
		return 0, fmt.Errorf("join: %w", err)
	}
	addrs = slices.DeleteFunc(slices.Clone(addrs), func(a string) bool { return a == m.addr || a == "" })
	if len(addrs) == 0 {
		return 0, errors.New("join: no address other than this member's")
	}
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	if !m.spawnIO(func(context.Context) {
		n, err := ml.Join(addrs)
		done <- result{n, err}
	}) {
		return 0, fmt.Errorf("join: %w", ErrNotRunning)
	}
	select {
	case r := <-done:
		if r.err != nil {
			return r.n, fmt.Errorf("join %v: %w", addrs, r.err)
		}
		if r.n > 0 {
			m.joined.Store(true)
		}
		return r.n, nil
	case <-ctx.Done():
		return 0, fmt.Errorf("join: %w", ctx.Err())
	}
}

// Stop leaves the cluster gracefully: it stops the loops (the pusher sends
// what it holds), waits for queued pushes, tells the peers it is leaving,
// broadcasts memberlist's leave (so the others see it left, not dead), shuts
// memberlist down and waits for every goroutine it started. ctx bounds the
// waits; past it Stop still shuts down and returns ctx's error.
func (m *Member) Stop(ctx context.Context) error {
	ml, ok := m.beginStop()
	if !ok {
		return nil
	}
	var errs []error
	m.loopCancel()
	if err := waitCtx(ctx, &m.loopWG); err != nil {
		errs = append(errs, err)
	}
	if err := m.senders.wait(ctx); err != nil {
		errs = append(errs, err)
	}
	m.sayLeaving(ctx, ml)
	timeout := leaveTimeout(m.gossipInterval)
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(min(timeout, time.Until(dl)), time.Millisecond)
	}
	if err := ml.Leave(timeout); err != nil {
		m.log.Info("leave broadcast not confirmed", "err", err)
	}
	if err := m.finish(ctx, ml); err != nil {
		errs = append(errs, err)
	}
	m.log.Info("member stopped")
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("stop member: %w", err)
	}
	return nil
}

// Kill stops the member without leaving, as a crash would: the others see it
// fail and declare it dead. For tests and drills; ctx bounds the wait for the
// goroutines.
func (m *Member) Kill(ctx context.Context) error {
	ml, ok := m.beginStop()
	if !ok {
		return nil
	}
	m.loopCancel()
	m.ioCancel()
	err := m.finish(ctx, ml)
	m.log.Info("member killed")
	if err != nil {
		return fmt.Errorf("kill member: %w", err)
	}
	return nil
}

// beginStop moves to stopping; false when there is nothing to stop (never
// started, or another Stop or Kill got there first).
func (m *Member) beginStop() (*memberlist.Memberlist, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch m.state {
	case stateRunning:
		m.state = stateStopping
		return m.ml, true
	case stateNew:
		m.state = stateStopped
	}
	return nil, false
}

// finish shuts memberlist down and waits for every goroutine.
func (m *Member) finish(ctx context.Context, ml *memberlist.Memberlist) error {
	m.loopCancel()
	m.links.close()
	if err := ml.Shutdown(); err != nil {
		m.log.Warn("memberlist shutdown", "err", err)
	}
	m.ioCancel()
	m.mu.Lock()
	m.ioClosed = true
	m.state = stateStopped
	m.mu.Unlock()
	return errors.Join(waitCtx(ctx, &m.loopWG), waitCtx(ctx, &m.ioWG))
}

// sayLeaving tells every live peer, in parallel, that this member is leaving,
// so they record it as left even if memberlist's leave gossip is what reaches
// them first.
func (m *Member) sayLeaving(ctx context.Context, ml *memberlist.Memberlist) {
	buf := encodeLeaving(leavingMsg{From: m.cfg.Name})
	var wg sync.WaitGroup
	for _, p := range m.table.peers() {
		node, ok := m.table.lookup(p)
		if !ok {
			continue
		}
		wg.Add(1)
		if !m.spawnIO(func(context.Context) {
			defer wg.Done()
			if err := m.deliver(ml, node, buf); err != nil {
				m.log.Debug("leaving note not sent", "peer", p, "err", err)
				return
			}
			m.metrics.sent(classLeaving, len(buf))
		}) {
			wg.Done()
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// waitCtx waits for wg or ctx.
func waitCtx(ctx context.Context, wg *sync.WaitGroup) error {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Cool gives back the room anti-entropy's tree keeps for records to come,
// and copies its entries out of the burst's heap, their names from tab
// (shared with the node's Cool: one copy of each name); for a node gone
// idle (its memory trimmer calls it).
func (m *Member) Cool(tab *intern.Table) { m.ae.keeper.trim(tab) }

// Addr is the gossip host:port other members reach this one at; empty before
// Start.
func (m *Member) Addr() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addr
}

// Self is this member's name.
func (m *Member) Self() string { return m.cfg.Name }

// Members returns the names of the live members, this one included, sorted.
// A suspected member counts as live until it is declared dead. The slice is
// shared until membership changes: callers must not modify it.
func (m *Member) Members() []string { return m.table.live() }

// Known returns the names of every member in MemberStates: the live ones
// and those dead or left within Config.ForgetAfter, sorted.
func (m *Member) Known() []string { return m.table.knownNames() }

// Ping checks that the live member name answers now, by direct probe
// (memberlist's ping, up to three tries of its probe timeout each); nil
// means it answered. Membership alone lags: a member on the far side of a
// partition stays live until it has been suspected and its suspicion has
// timed out, which happens to the far members one probe apart.
func (m *Member) Ping(ctx context.Context, name string) error {
	ml, err := m.memberlist()
	if err != nil {
		return fmt.Errorf("ping %s: %w", name, err)
	}
	if name == m.cfg.Name {
		return nil
	}
	node, ok := m.table.lookup(name)
	if !ok {
		return fmt.Errorf("ping %s: not a live member", name)
	}
	addr := &net.UDPAddr{IP: node.Addr, Port: int(node.Port)}
	for range 3 {
		if err = ctx.Err(); err != nil {
			break
		}
		if _, err = ml.Ping(name, addr); err == nil {
			return nil
		}
	}
	return fmt.Errorf("ping %s: %w", name, err)
}

// MemberStates returns every known member with its state and address, sorted
// by name; dead and left members stay for Config.ForgetAfter.
func (m *Member) MemberStates() []MemberState { return m.table.states() }

// Send delivers msg to msg.To by reliable stream. A message to this member
// goes to OnMessage from the inbox goroutine, never synchronously. ctx bounds
// the wait; a send under way finishes in the background.
func (m *Member) Send(ctx context.Context, msg wire.Message) error {
	if msg.To == m.cfg.Name {
		m.inbox.Push(msg)
		return nil
	}
	encode := encodeElection
	if node, ok := m.table.lookup(msg.To); ok && msg.Type.Binary() && !m.noLinks && hasCap(node.Meta, capElectionBinary) {
		encode = encodeElectionBinary
	}
	buf, err := encode(msg)
	if err != nil {
		return err
	}
	if err := m.sendTo(ctx, msg.To, classElection, buf); err != nil {
		return fmt.Errorf("send message %d to %s: %w", msg.Type, msg.To, err)
	}
	m.log.Debug("message sent", "peer", msg.To, "claim", msg.Claim, "round", msg.Round)
	return nil
}

// sendTo sends buf to the live member peer by reliable stream, with ctx
// bounding the wait: the send runs on an I/O goroutine and, when ctx ends
// first, finishes in the background.
func (m *Member) sendTo(ctx context.Context, peer, class string, buf []byte) error {
	if ctx.Done() == nil {
		return m.sendNow(peer, class, buf)
	}
	done := make(chan error, 1)
	if !m.spawnIO(func(context.Context) { done <- m.sendNow(peer, class, buf) }) {
		return ErrNotRunning
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// sendNow sends buf to the live member peer by reliable stream (its link),
// on the caller's goroutine, and counts it under class once sent.
func (m *Member) sendNow(peer, class string, buf []byte) error {
	ml, err := m.memberlist()
	if err != nil {
		return err
	}
	node, ok := m.table.lookup(peer)
	if !ok {
		return ErrNotMember
	}
	if err := m.deliver(ml, node, buf); err != nil {
		return err
	}
	m.metrics.sent(class, len(buf))
	return nil
}

// deliver sends buf to node: over the link to it when it serves links,
// else (a member of an earlier release) by memberlist's reliable send, one
// connection for the message.
func (m *Member) deliver(ml *memberlist.Memberlist, node *memberlist.Node, buf []byte) error {
	if !m.noLinks && hasCap(node.Meta, capLinks) {
		return m.links.send(node.Name, node.Address(), buf)
	}
	return ml.SendReliable(node, buf)
}

// inboxLoop hands election messages to OnMessage, one at a time.
func (m *Member) inboxLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.inbox.Wait():
		}
		for _, msg := range m.inbox.Drain() {
			if m.cfg.OnMessage == nil {
				m.log.Debug("message dropped", "type", msgElection, "err", "no handler")
				continue
			}
			m.cfg.OnMessage(msg)
		}
	}
}
