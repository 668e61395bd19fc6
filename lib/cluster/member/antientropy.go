package member

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/store"
)

// roundTimeout bounds an initiator's wait for the digest response.
const roundTimeout = 10 * time.Second

// inFlightGrace is how old a write must be before a periodic round moves it:
// younger ones are most likely still on their way by push, and sending them
// again would double the traffic of a write burst.
const inFlightGrace = time.Second

// joinSettle is how long the loop waits after a join (or another request for
// a round) before it acts, so that one push/pull reporting many members at
// once leads to one round.
const joinSettle = 50 * time.Millisecond

// maxAnswering bounds the digest and pull requests answered at once.
const maxAnswering = 4

// antiEntropy repairs what replication missed. A round, initiator A with
// responder B:
//
//	A -> B  digest request: A's NumBuckets bucket hashes
//	B -> A  digest response pages: the differing buckets and B's entries in
//	        them (buckets where A is empty are left out: B sends A those
//	        records at once)
//	A -> B  the records B lacks or holds older   (full rounds only)
//	A -> B  pull requests: the keys where B is newer or A has nothing
//	B -> A  pull responses: those records
//
// Periodic rounds (a random live peer every AntiEntropyInterval) and rounds
// asked for after lost pushes are full. A round after a join pulls only, from
// one of the members that just joined: every member pulls from the newcomers
// and the newcomers from one of them, which converges both sides of a healed
// partition without each pair sending everything twice.
type antiEntropy struct {
	m      *Member
	signal chan struct{}

	mu      sync.Mutex
	joins   map[string]bool // joined since the last round
	full    map[string]bool // need a full round
	all     bool            // every live peer needs a full round
	rounds  map[uint64]*round
	roundID uint64
	// streaming marks the peers an msgRecords stream (sendKeys) goes to.
	streaming map[string]bool

	snapMu sync.Mutex
	snap   *snapshot
	snapAt time.Time
}

// round is an initiator's state while it waits for the digest response.
type round struct {
	peer     string
	pages    map[int]digestResp
	done     chan struct{}
	complete bool
}

// target is one round to run.
type target struct {
	peer string
	// push: also send what the peer lacks (else only pull).
	push bool
	// periodic: leave writes younger than inFlightGrace alone.
	periodic bool
}

func newAntiEntropy(m *Member) *antiEntropy {
	return &antiEntropy{
		m:      m,
		signal: make(chan struct{}, 1),
		joins:  map[string]bool{},
		full:   map[string]bool{},
		rounds: map[uint64]*round{},

		streaming: map[string]bool{},
	}
}

// beginStream claims the one unasked-for record stream (msgRecords) to
// peer; false when one is under way. Pull answers are never held back: the
// peer asked for those keys, and a round after a join must finish at once.
// Rounds come every interval from both sides, and a new member's
// catch-up takes several: without this each of them would send the same
// records again while the first stream is still going (measured: 100,000
// objects took six times their size). What a skipped stream would have
// carried, the next round finds still missing.
func (a *antiEntropy) beginStream(peer string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.streaming[peer] {
		return false
	}
	a.streaming[peer] = true
	return true
}

func (a *antiEntropy) endStream(peer string) {
	a.mu.Lock()
	delete(a.streaming, peer)
	a.mu.Unlock()
}

func (a *antiEntropy) wake() {
	select {
	case a.signal <- struct{}{}:
	default:
	}
}

// joined asks for a pull round after name joined. It never blocks.
func (a *antiEntropy) joined(name string) {
	a.mu.Lock()
	a.joins[name] = true
	a.mu.Unlock()
	a.wake()
}

// want asks for a full round with peer. It never blocks.
func (a *antiEntropy) want(peer string) {
	a.mu.Lock()
	a.full[peer] = true
	a.mu.Unlock()
	a.wake()
}

// wantAll asks for a full round with every live peer. It never blocks.
func (a *antiEntropy) wantAll() {
	a.mu.Lock()
	a.all = true
	a.mu.Unlock()
	a.wake()
}

// take returns the rounds asked for and clears the requests.
func (a *antiEntropy) take(live []string) []target {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []target
	chosen := map[string]bool{}
	for _, p := range live {
		if a.all || a.full[p] {
			out = append(out, target{peer: p, push: true})
			chosen[p] = true
		}
	}
	var joins []string
	for _, p := range live {
		if a.joins[p] && !chosen[p] {
			joins = append(joins, p)
		}
	}
	if len(joins) > 0 {
		out = append(out, target{peer: joins[rand.IntN(len(joins))]})
	}
	a.all = false
	clear(a.full)
	clear(a.joins)
	return out
}

// loop runs the rounds: one full round with a random live peer every
// AntiEntropyInterval, and the rounds asked for.
func (a *antiEntropy) loop(ctx context.Context) {
	tick := time.NewTicker(a.m.cfg.AntiEntropyInterval)
	defer tick.Stop()
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	defer settle.Stop()
	var settling <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			if peers := a.m.table.peers(); len(peers) > 0 {
				a.run(ctx, target{peer: peers[rand.IntN(len(peers))], push: true, periodic: true})
			}
		case <-a.signal:
			if settling == nil {
				settle.Reset(joinSettle)
				settling = settle.C
			}
		case <-settling:
			settling = nil
			for _, t := range a.take(a.m.table.peers()) {
				if ctx.Err() != nil {
					return
				}
				a.run(ctx, t)
			}
		}
	}
}

// run is one round as initiator.
func (a *antiEntropy) run(ctx context.Context, t target) {
	m := a.m
	start := time.Now()
	snap, err := a.snapshot()
	if err != nil {
		m.log.Warn("anti-entropy digest", "err", err)
		return
	}
	id, r := a.open(t.peer)
	defer a.close(id)
	req := digestReq{Round: id, From: m.cfg.Name, Hashes: snap.digest.Hashes[:]}
	if t.periodic {
		req.InFlight = store.HLCFromTime(time.Now().Add(-inFlightGrace))
	}
	if err := m.sendNow(t.peer, classAntiEntropy, encodeDigestReq(req)); err != nil {
		m.metrics.rounds.WithLabelValues("failed").Inc()
		m.log.Debug("anti-entropy round failed", "peer", t.peer, "err", err)
		return
	}
	timer := time.NewTimer(roundTimeout)
	defer timer.Stop()
	select {
	case <-r.done:
	case <-ctx.Done():
		return
	case <-timer.C:
		m.metrics.rounds.WithLabelValues("failed").Inc()
		m.log.Debug("anti-entropy round timed out", "peer", t.peer)
		return
	}
	buckets, theirs := a.result(id)
	if len(buckets) == 0 {
		m.metrics.rounds.WithLabelValues("in_sync").Inc()
		m.log.Debug("anti-entropy round", "peer", t.peer, "buckets", 0, "took", time.Since(start))
		return
	}
	push, pull := reconcile(snap, buckets, theirs, req.InFlight)
	pushed := 0
	if t.push && len(push) > 0 {
		pushed, err = a.sendKeys(ctx, t.peer, msgRecords, snap, push)
		if err != nil {
			m.log.Debug("anti-entropy push failed", "peer", t.peer, "err", err)
		}
	}
	for _, page := range pageKeys(pull, batchBytes) {
		if err := m.sendNow(t.peer, classAntiEntropy, encodePullReq(pullReq{Round: id, From: m.cfg.Name, Keys: page})); err != nil {
			m.log.Debug("anti-entropy pull failed", "peer", t.peer, "err", err)
			break
		}
	}
	m.metrics.rounds.WithLabelValues("repaired").Inc()
	m.metrics.repaired.WithLabelValues("requested").Add(float64(len(pull)))
	m.log.Debug("anti-entropy round", "peer", t.peer, "buckets", len(buckets),
		"pushed", pushed, "pulled", len(pull), "took", time.Since(start))
}

// open registers a round waiting for peer's digest response.
func (a *antiEntropy) open(peer string) (uint64, *round) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.roundID++
	r := &round{peer: peer, pages: map[int]digestResp{}, done: make(chan struct{})}
	a.rounds[a.roundID] = r
	return a.roundID, r
}

func (a *antiEntropy) close(id uint64) {
	a.mu.Lock()
	delete(a.rounds, id)
	a.mu.Unlock()
}

// result returns a complete round's differing buckets and the peer's entries.
func (a *antiEntropy) result(id uint64) ([]int, []Entry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.rounds[id]
	if r == nil {
		return nil, nil
	}
	var buckets []int
	var entries []Entry
	for _, p := range r.pages {
		buckets = p.Buckets
		entries = append(entries, p.Entries...)
	}
	return buckets, entries
}

// deliver files one digest response page. It never blocks.
func (a *antiEntropy) deliver(resp digestResp) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.rounds[resp.Round]
	if r == nil || r.peer != resp.From || r.complete {
		return
	}
	r.pages[resp.Page] = resp
	if len(r.pages) >= resp.Pages {
		r.complete = true
		close(r.done)
	}
}

// snapshot returns the store's digest and entries, reusing the last scan
// while the store has not changed and it is younger than the interval
// (tombstone collection changes the store without moving its seq).
func (a *antiEntropy) snapshot() (*snapshot, error) {
	a.snapMu.Lock()
	defer a.snapMu.Unlock()
	if a.snap != nil && a.snap.seq == a.m.st.Seq() && time.Since(a.snapAt) < a.m.cfg.AntiEntropyInterval {
		return a.snap, nil
	}
	s, err := scanSnapshot(a.m.st)
	if err != nil {
		return nil, err
	}
	a.snap, a.snapAt = s, time.Now()
	return s, nil
}

// serve answers digest and pull requests, a few at a time.
func (a *antiEntropy) serve(ctx context.Context) {
	sem := make(chan struct{}, maxAnswering)
	for {
		select {
		case <-ctx.Done():
			return
		case <-a.m.aeQ.Wait():
		}
		for _, buf := range a.m.aeQ.Drain() {
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			if !a.m.spawnIO(func(ctx context.Context) {
				defer func() { <-sem }()
				a.answer(ctx, buf)
			}) {
				return
			}
		}
	}
}

// answer handles one request.
func (a *antiEntropy) answer(ctx context.Context, buf []byte) {
	m := a.m
	t, body, _ := splitType(buf)
	var err error
	switch t {
	case msgDigestReq:
		var req digestReq
		if req, err = decodeDigestReq(body); err == nil {
			err = a.answerDigest(ctx, req)
		}
	case msgPullReq:
		var req pullReq
		if req, err = decodePullReq(body); err == nil {
			var snap *snapshot
			if snap, err = a.snapshot(); err == nil {
				var n int
				n, err = a.sendKeys(ctx, req.From, msgPullResp, snap, req.Keys)
				m.log.Debug("pull answered", "peer", req.From, "asked", len(req.Keys), "sent", n)
			}
		}
	}
	if err != nil {
		m.log.Debug("anti-entropy request failed", "type", t, "err", err)
	}
}

// answerDigest sends the differing buckets and this node's entries in them,
// paged, then the records of the buckets where the initiator has nothing.
func (a *antiEntropy) answerDigest(ctx context.Context, req digestReq) error {
	m := a.m
	snap, err := a.snapshot()
	if err != nil {
		return err
	}
	buckets := differing(snap.digest.Hashes[:], req.Hashes)
	var entries []Entry
	var missing []Key // in the buckets where the initiator has nothing
	for _, b := range buckets {
		if req.Hashes[b] == 0 {
			for _, e := range snap.entries[b] {
				if req.InFlight == 0 || e.Version.HLC < req.InFlight {
					missing = append(missing, e.Key)
				}
			}
			continue
		}
		entries = append(entries, snap.entries[b]...)
	}
	pages := pageEntries(entries, batchBytes)
	for i, p := range pages {
		resp := digestResp{Round: req.Round, From: m.cfg.Name, Page: i, Pages: len(pages), Buckets: buckets, Entries: p}
		if err := m.sendNow(req.From, classAntiEntropy, encodeDigestResp(resp)); err != nil {
			return err
		}
	}
	if len(missing) == 0 {
		return nil
	}
	n, err := a.sendKeys(ctx, req.From, msgRecords, snap, missing)
	m.log.Debug("records sent for empty buckets", "peer", req.From, "records", n)
	return err
}

// sendKeys sends the records of keys to peer as t messages of at most
// batchBytes, one after the other (the stream's pace bounds the memory), and
// returns how many it sent; msgRecords are not sent while another such
// stream to peer is under way (beginStream). A live record is read back from the store (it may
// have changed since snap: then the newer version goes); a tombstone comes
// from snap unless a live record replaced it. A key deleted since snap is
// skipped: its tombstone is newer than snap and travels on its own.
func (a *antiEntropy) sendKeys(ctx context.Context, peer string, t msgType, snap *snapshot, keys []Key) (int, error) {
	m := a.m
	if len(keys) == 0 {
		return 0, nil
	}
	if t == msgRecords {
		if !a.beginStream(peer) {
			m.log.Debug("records not sent, a stream to the peer is under way", "peer", peer, "records", len(keys))
			return 0, nil
		}
		defer a.endStream(peer)
	}
	var (
		batch []store.Record
		size  int
		sent  int
	)
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := m.sendNow(peer, classAntiEntropy, encodeRecords(t, m.cfg.Name, batch)); err != nil {
			return err
		}
		sent += len(batch)
		m.metrics.repaired.WithLabelValues("sent").Add(float64(len(batch)))
		batch, size = batch[:0], 0
		return nil
	}
	for _, k := range keys {
		if err := ctx.Err(); err != nil {
			return sent, err
		}
		rec, err := m.st.Get(k.Kind, k.Name)
		switch {
		case err == nil:
		case errors.Is(err, store.ErrNotFound):
			tomb, ok := snap.tombs[k]
			if !ok {
				continue
			}
			rec = tomb
		default:
			return sent, err
		}
		batch = append(batch, rec)
		size += recordSize(&rec)
		if size >= batchBytes {
			if err := flush(); err != nil {
				return sent, err
			}
		}
	}
	return sent, flush()
}
