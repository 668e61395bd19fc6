package member

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/cluster/member/internal/fanout"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// coalesceWindow is how long the pusher waits for more writes before it
// sends a batch: long enough to fold a burst into one message per peer,
// short against the ~10 ms a fan-out to 50 peers takes.
const coalesceWindow = 5 * time.Millisecond

// batchBytes caps a replication batch; the rest of maxMessageBytes is
// headroom for the encoding.
const batchBytes = maxMessageBytes - 16<<10

// maxPendingBytes caps what waits to be sent to one peer. Past it the queue
// is dropped and anti-entropy repairs the peer: a slow or unreachable peer
// costs memory once, not forever.
const maxPendingBytes = 16 << 20

// pushLoop watches the store and pushes this node's own writes to its
// children in its dissemination tree (broadcast), in batches. Records this
// node received are not pushed from here: applyMessage relays those that
// came by push and were new (relay), and anti-entropy repairs what the tree
// missed. On
// EventResync (the watch fell behind and dropped events) it asks for an
// anti-entropy round with every peer, so no write is lost silently. When ctx
// ends it sends what it holds and what the watch has already delivered.
func (m *Member) pushLoop(ctx context.Context, events <-chan store.Event) {
	var (
		batch []store.Record
		size  int
		timer = time.NewTimer(time.Hour)
		wait  <-chan time.Time
	)
	timer.Stop()
	defer timer.Stop()
	flush := func() {
		if len(batch) > 0 {
			m.broadcast(batch)
		}
		batch, size = nil, 0
		if wait != nil {
			timer.Stop()
			wait = nil
		}
	}
	add := func(ev store.Event) {
		switch {
		case ev.Type == store.EventResync:
			m.log.Info("replication watch fell behind, repairing with every peer")
			m.ae.wantAll()
			return
		case ev.Record.Version.Node != m.cfg.Name:
			return
		}
		batch = append(batch, ev.Record)
		size += recordSize(&ev.Record)
		if size >= batchBytes {
			flush()
		}
	}
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				flush()
				return
			}
			add(ev)
			if len(batch) > 0 && wait == nil {
				timer.Reset(coalesceWindow)
				wait = timer.C
			}
		case <-wait:
			wait = nil
			flush()
		case <-ctx.Done():
			// The watch closes its channel on the same ctx; take what it has
			// delivered already.
		drain:
			for {
				select {
				case ev, ok := <-events:
					if !ok {
						break drain
					}
					add(ev)
				default:
					break drain
				}
			}
			flush()
			return
		}
	}
}

// broadcast queues batch, this node's own writes, for its children in its
// own dissemination tree (every live peer when Fanout is negative).
func (m *Member) broadcast(batch []store.Record) {
	peers := m.table.view().Broadcast(m.cfg.Name, m.cfg.Fanout)
	for _, p := range peers {
		m.senders.enqueue(p, batch)
	}
	m.log.Debug("records queued", "records", len(batch), "peers", len(peers))
}

// bypass queues records that could not be sent to peer for peer's children
// in each record's writer's tree (fanout.Bypass), so that one unreachable
// member does not cut its subtree off until anti-entropy.
func (m *Member) bypass(peer string, recs []store.Record) {
	if m.cfg.Fanout <= 0 || len(recs) == 0 {
		return
	}
	for _, s := range fanout.Bypass(m.table.view(), m.cfg.Name, peer, m.cfg.Fanout, recs, writerOf) {
		m.senders.enqueue(s.Peer, s.Recs)
	}
}

// relay queues pushed records for this node's children in each one's
// writer's tree (fanout.Relay); applyMessage picks them (each version
// once, see relayedVersions).
func (m *Member) relay(from string, recs []store.Record) {
	if m.cfg.Fanout <= 0 || len(recs) == 0 {
		return
	}
	for _, s := range fanout.Relay(m.table.view(), m.cfg.Name, from, m.cfg.Fanout, recs, writerOf) {
		m.senders.enqueue(s.Peer, s.Recs)
		m.metrics.relayed.Add(float64(len(s.Recs)))
	}
}

// senders keeps one queue of records per peer and one goroutine per
// non-empty queue, so a slow peer delays only itself. A sender sends all
// that queued up while its previous message was in flight as one message (up
// to batchBytes): under load, batches grow instead of queues.
type senders struct {
	m *Member

	mu      sync.Mutex
	byPeer  map[string]*peerQueue
	running int
	idle    chan struct{} // closed while running == 0
}

func newSenders(m *Member) *senders {
	idle := make(chan struct{})
	close(idle)
	return &senders{m: m, byPeer: map[string]*peerQueue{}, idle: idle}
}

// enqueue queues recs for peer and starts its sender.
func (s *senders) enqueue(peer string, recs []store.Record) {
	size := 0
	for i := range recs {
		size += recordSize(&recs[i])
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.byPeer[peer]
	if !ok {
		q = newPeerQueue()
		if !s.m.spawnIO(func(ctx context.Context) { s.run(ctx, peer, q) }) {
			return
		}
		s.byPeer[peer] = q
		if s.running == 0 {
			s.idle = make(chan struct{})
		}
		s.running++
	}
	if q.Bytes()+size > maxPendingBytes {
		s.m.log.Warn("replication queue overflow, peer left to anti-entropy", "peer", peer, "bytes", q.Bytes())
		q.Reset()
		s.m.ae.want(peer)
	}
	before := q.Len()
	for _, r := range recs {
		q.Add(r)
	}
	s.m.metrics.coalesced.Add(float64(len(recs) - (q.Len() - before)))
}

// next takes up to batchBytes of q's records; nil when q is empty or ctx is
// done, after which the sender has exited the books.
func (s *senders) next(ctx context.Context, peer string, q *peerQueue) []store.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	if q.Len() == 0 || ctx.Err() != nil {
		q.Reset()
		delete(s.byPeer, peer)
		s.running--
		if s.running == 0 {
			close(s.idle)
		}
		return nil
	}
	return q.Take(batchBytes)
}

// run sends peer's queue until it is empty, then exits. On a failed send it
// drops the queue and asks anti-entropy to repair the peer.
func (s *senders) run(ctx context.Context, peer string, q *peerQueue) {
	for {
		batch := s.next(ctx, peer, q)
		if batch == nil {
			return
		}
		buf := encodeRecords(msgPush, s.m.cfg.Name, batch)
		err := s.m.sendNow(peer, classPush, buf)
		if err == nil {
			s.m.metrics.pushed.Add(float64(len(batch)))
			s.m.log.Debug("records pushed", "peer", peer, "records", len(batch), "bytes", len(buf))
			continue
		}
		s.m.metrics.pushFailed.Inc()
		s.mu.Lock()
		lost := append(batch, q.Drain()...)
		s.mu.Unlock()
		s.m.log.Debug("push failed, peer left to anti-entropy", "peer", peer, "dropped", len(lost), "err", err)
		if !errors.Is(err, ErrNotMember) {
			s.m.ae.want(peer)
		}
		s.m.bypass(peer, lost)
	}
}

// wait returns when no sender runs, or with ctx's error.
func (s *senders) wait(ctx context.Context) error {
	s.mu.Lock()
	idle := s.idle
	s.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// applyLoop applies received records (pushes and pull answers) to the store;
// Apply keeps the higher version, so order and duplicates do not matter.
func (m *Member) applyLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.applyQ.Wait():
		}
		for _, buf := range m.applyQ.Drain() {
			if ctx.Err() != nil {
				return
			}
			m.applyMessage(buf)
		}
	}
}

// applyMessage decodes and applies one batch.
func (m *Member) applyMessage(buf []byte) {
	t, body, _ := splitType(buf)
	msg, err := decodeRecords(t, body)
	if err != nil {
		m.log.Debug("message dropped", "type", t, "err", err)
		return
	}
	applied := 0
	var fresh []store.Record // pushed records to relay
	relays := m.relaysFor()
	// One batch: the message's records share a commit.
	for i, res := range m.st.ApplyBatch(msg.Records) {
		r := msg.Records[i]
		switch {
		case errors.Is(res.Err, store.ErrClosed):
			return
		case res.Err != nil:
			m.log.Warn("apply record", "peer", msg.From, "kind", r.Kind, "name", r.Name, "err", res.Err)
			continue
		case res.Changed:
			applied++
		}
		// A push is relayed when it was new here, and also when this node
		// held it already without having relayed it: an anti-entropy round
		// brought it first (a join's pull round runs while writes are on
		// their way), and the members below this one in its writer's tree
		// would otherwise wait for a periodic round. Each version is
		// relayed once, so copies that meet again stop here.
		if t == msgPush && (res.Changed || res.Held) && writerOf(&r) != m.cfg.Name && relays(writerOf(&r)) && m.relayed.first(r.Kind, r.Name, r.Version) {
			fresh = append(fresh, r)
		}
	}
	m.relay(msg.From, fresh)
	m.metrics.received.Add(float64(len(msg.Records)))
	m.metrics.applied.Add(float64(applied))
	m.log.Debug("records received", "type", t, "peer", msg.From, "records", len(msg.Records), "applied", applied)
}

// relaysFor returns whether this member has children in a writer's
// dissemination tree, as its view shows it now (built on the first ask,
// once per writer): a member with none relays nothing of that writer's, and
// need not remember which versions it relayed (in a cluster of up to
// Fanout+1 members, every push).
func (m *Member) relaysFor() func(writer string) bool {
	var (
		view fanout.View
		made bool
		has  map[string]bool
	)
	return func(writer string) bool {
		if m.cfg.Fanout <= 0 {
			return false
		}
		r, ok := has[writer]
		if !ok {
			if !made {
				view, made, has = m.table.view(), true, map[string]bool{}
			}
			r = len(view.Children(writer, m.cfg.Name, m.cfg.Fanout)) > 0
			has[writer] = r
		}
		return r
	}
}

// relayedVersions remembers the last record versions this member relayed,
// so it relays each at most once: a push it receives twice (two parents
// during a change of membership, or anti-entropy's copy and then the push)
// goes down its subtree once. A version older than the last relayedKeep is
// forgotten; should it come again, it is relayed again, which costs
// messages, not correctness.
type relayedVersions struct {
	mu   sync.Mutex
	seen map[relayedKey]struct{}
	ring []relayedKey
	next int
}

type relayedKey struct {
	kind, name string
	v          types.Version
}

// relayedKeep is how many versions are remembered: over a second of a
// burst of 2,000 claims a second (five writes each).
const relayedKeep = 16384

// first records kind/name at v and reports whether it was not there yet.
func (r *relayedVersions) first(kind, name string, v types.Version) bool {
	k := relayedKey{kind, name, v}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.seen[k]; ok {
		return false
	}
	if r.seen == nil {
		r.seen = make(map[relayedKey]struct{}, relayedKeep)
		r.ring = make([]relayedKey, relayedKeep)
	}
	if old := r.ring[r.next]; old != (relayedKey{}) {
		delete(r.seen, old)
	}
	r.ring[r.next] = k
	r.next = (r.next + 1) % relayedKeep
	r.seen[k] = struct{}{}
	return true
}
