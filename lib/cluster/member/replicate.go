package member

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/store"
)

// coalesceWindow is how long the pusher waits for more writes before it
// sends a batch: long enough to fold a burst into one message per peer,
// short against the ~10 ms a fan-out to 50 peers takes.
const coalesceWindow = time.Millisecond

// batchBytes caps a replication batch; the rest of maxMessageBytes is
// headroom for the encoding.
const batchBytes = maxMessageBytes - 16<<10

// maxPendingBytes caps what waits to be sent to one peer. Past it the queue
// is dropped and anti-entropy repairs the peer: a slow or unreachable peer
// costs memory once, not forever.
const maxPendingBytes = 16 << 20

// pushLoop watches the store and pushes this node's own writes to every live
// peer in batches. Records this node received are not pushed again: their
// writer pushed them, and anti-entropy repairs what it missed. On
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
			for {
				select {
				case ev, ok := <-events:
					if ok {
						add(ev)
						continue
					}
				default:
				}
				break
			}
			flush()
			return
		}
	}
}

// broadcast encodes batch once and queues it for every live peer.
func (m *Member) broadcast(batch []store.Record) {
	peers := m.table.peers()
	if len(peers) == 0 {
		return
	}
	buf := encodeRecords(msgRecords, m.cfg.Name, batch)
	for _, p := range peers {
		m.senders.enqueue(p, buf)
	}
	m.log.Debug("records pushed", "records", len(batch), "bytes", len(buf), "peers", len(peers))
}

// senders keeps one queue per peer and one goroutine per non-empty queue, so
// a slow peer delays only itself.
type senders struct {
	m *Member

	mu      sync.Mutex
	byPeer  map[string]*peerQueue
	running int
	idle    chan struct{} // closed while running == 0
}

type peerQueue struct {
	bufs  [][]byte
	bytes int
}

func newSenders(m *Member) *senders {
	idle := make(chan struct{})
	close(idle)
	return &senders{m: m, byPeer: map[string]*peerQueue{}, idle: idle}
}

// enqueue queues buf (shared, read-only) for peer and starts its sender.
func (s *senders) enqueue(peer string, buf []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q, ok := s.byPeer[peer]
	if !ok {
		q = &peerQueue{}
		if !s.m.spawnIO(func(ctx context.Context) { s.run(ctx, peer, q) }) {
			return
		}
		s.byPeer[peer] = q
		if s.running == 0 {
			s.idle = make(chan struct{})
		}
		s.running++
	}
	if q.bytes+len(buf) > maxPendingBytes {
		s.m.log.Warn("replication queue overflow, peer left to anti-entropy", "peer", peer, "bytes", q.bytes)
		q.bufs, q.bytes = nil, 0
		s.m.ae.want(peer)
	}
	q.bufs = append(q.bufs, buf)
	q.bytes += len(buf)
}

// run sends peer's queue until it is empty, then exits. On a failed send it
// drops the queue and asks anti-entropy to repair the peer.
func (s *senders) run(ctx context.Context, peer string, q *peerQueue) {
	for {
		s.mu.Lock()
		if len(q.bufs) == 0 || ctx.Err() != nil {
			q.bufs, q.bytes = nil, 0
			delete(s.byPeer, peer)
			s.running--
			if s.running == 0 {
				close(s.idle)
			}
			s.mu.Unlock()
			return
		}
		buf := q.bufs[0]
		q.bufs[0] = nil
		q.bufs = q.bufs[1:]
		q.bytes -= len(buf)
		s.mu.Unlock()

		if err := s.m.sendNow(peer, buf); err != nil {
			s.mu.Lock()
			dropped := len(q.bufs)
			q.bufs, q.bytes = nil, 0
			s.mu.Unlock()
			s.m.log.Debug("push failed, peer left to anti-entropy", "peer", peer, "dropped", dropped+1, "err", err)
			if !errors.Is(err, ErrNotMember) {
				s.m.ae.want(peer)
			}
		}
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
	for _, r := range msg.Records {
		ok, err := m.st.Apply(r)
		switch {
		case errors.Is(err, store.ErrClosed):
			return
		case err != nil:
			m.log.Warn("apply record", "peer", msg.From, "kind", r.Kind, "name", r.Name, "err", err)
		case ok:
			applied++
		}
	}
	m.log.Debug("records received", "type", t, "peer", msg.From, "records", len(msg.Records), "applied", applied)
}
