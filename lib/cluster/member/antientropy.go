package member

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/store"
)

// roundTimeout bounds an initiator's wait for the answers of one round.
const roundTimeout = 10 * time.Second

// inFlightGrace is how old a write must be before a periodic round moves it:
// younger ones are most likely still on their way by push, and sending them
// again would double the traffic of a write burst.
const inFlightGrace = time.Second

// joinSettle is how long the loop waits after a join (or another request for
// a round) before it acts, so that one push/pull reporting many members at
// once leads to one round.
const joinSettle = 50 * time.Millisecond

// joinPulls is how many of the members that joined since the last round a
// member pulls from. One was too few: two members that join an established
// one at once each see the other two join, and a pull from the other
// newcomer brings nothing (seen: a node without the cluster's admin token
// until the next periodic round, 30 s later, in half of the three-node
// starts). A pull from a member in sync costs one level of the tree.
const joinPulls = 3

// retryDelay is how long a requested round that failed waits to run again.
const retryDelay = time.Second

// awaitMemberPoll is how often awaitMember looks for a member not yet known.
const awaitMemberPoll = 20 * time.Millisecond

// maxAnswering bounds the tree and pull requests answered at once.
const maxAnswering = 4

// antiEntropy repairs what replication missed. A round, initiator A with
// responder B, descends both hash trees (hashtree.go) from the root to the
// leaves that differ:
//
//	A -> B  tree request, level 1: A's 16 hashes under the root
//	B -> A  the level-1 nodes that differ (and those where either side
//	        holds nothing: where A has nothing, B sends the records at once)
//	A -> B  level 2: A's 16 hashes under each node that differs
//	B -> A  the level-2 nodes that differ
//	A -> B  level 3 (the leaves): A's 16 hashes under each of those
//	B -> A  answer pages: the differing leaves and B's entries in them
//	A -> B  the records B lacks or holds older   (full rounds only)
//	A -> B  pull requests: the keys where B is newer or A has nothing
//	B -> A  pull responses: those records
//
// An in-sync round stops after the first answer. The responder keeps no
// state between the steps: each request carries what it needs.
//
// Periodic rounds (a random live peer every AntiEntropyInterval) and rounds
// asked for after lost pushes are full. A round after a join pulls only, from
// one of the members that just joined: every member pulls from the newcomers
// and the newcomers from one of them, which converges both sides of a healed
// partition without each pair sending everything twice.
type antiEntropy struct {
	m      *Member
	keeper *keeper
	signal chan struct{}
	// proofs is what the rounds showed each peer to hold (tombstones.go).
	proofs *proofs

	mu      sync.Mutex
	joins   map[string]bool // joined since the last round
	full    map[string]bool // need a full round
	all     bool            // every live peer needs a full round
	rounds  map[uint64]*round
	roundID uint64
	// streaming holds, per peer an msgRecords stream (sendKeys) goes to,
	// the round it belongs to and how many of its streams run.
	streaming map[string]stream
}

// round is an initiator's state while it waits for the answer to one level.
type round struct {
	peer     string
	level    int
	pages    map[int]treeResp
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

func newAntiEntropy(m *Member, k *keeper) *antiEntropy {
	return &antiEntropy{
		m:      m,
		keeper: k,
		signal: make(chan struct{}, 1),
		proofs: newProofs(),
		joins:  map[string]bool{},
		full:   map[string]bool{},
		rounds: map[uint64]*round{},

		streaming: map[string]stream{},
	}
}

// roundKey names a round across members: its initiator and its number there.
type roundKey struct {
	initiator string
	id        uint64
}

// stream is the round that owns the record streams to one peer.
type stream struct {
	round roundKey
	n     int
}

// beginStream claims the unasked-for record stream (msgRecords) to peer for
// round; false when another round's is under way. Streams of one round may
// run side by side: each level of its descent sends the subtrees it found
// empty on the peer, which are disjoint. Pull answers are never held back:
// the peer asked for those keys, and a round after a join must finish at
// once. Rounds come every interval from both sides, and a new member's
// catch-up takes several: without this each of them would send the same
// records again while the first stream is still going (measured: 100,000
// objects took six times their size). What a skipped stream would have
// carried, the next round finds still missing.
func (a *antiEntropy) beginStream(peer string, round roundKey) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	s, ok := a.streaming[peer]
	if ok && s.round != round {
		return false
	}
	a.streaming[peer] = stream{round: round, n: s.n + 1}
	return true
}

func (a *antiEntropy) endStream(peer string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.streaming[peer]
	if s.n <= 1 {
		delete(a.streaming, peer)
		return
	}
	s.n--
	a.streaming[peer] = s
}

func (a *antiEntropy) wake() {
	select {
	case a.signal <- struct{}{}:
	default:
	}
}

// joined asks for a pull round after name joined, and forgets what name was
// shown to hold (it may come back with another data dir). It never blocks.
func (a *antiEntropy) joined(name string) {
	a.proofs.forget(name)
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
	rand.Shuffle(len(joins), func(i, j int) { joins[i], joins[j] = joins[j], joins[i] })
	for _, p := range joins[:min(len(joins), joinPulls)] {
		out = append(out, target{peer: p})
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
	// A requested round that failed (its peer unreachable for a moment,
	// or its answers lost) is asked for again after retryDelay: the next
	// periodic round may be long, and may go to another peer.
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	defer retry.Stop()
	var (
		failed   []target
		retrying <-chan time.Time
	)
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
		case <-retrying:
			retrying = nil
			a.ask(failed)
			failed = nil
		case <-settling:
			settling = nil
			for _, t := range a.take(a.m.table.peers()) {
				if ctx.Err() != nil {
					return
				}
				if !a.run(ctx, t) {
					failed = append(failed, t)
				}
			}
			if len(failed) > 0 && retrying == nil {
				retry.Reset(retryDelay)
				retrying = retry.C
			}
		}
	}
}

// ask asks for targets again: full rounds as want does, pull rounds as
// after a join.
func (a *antiEntropy) ask(targets []target) {
	a.mu.Lock()
	for _, t := range targets {
		if t.push {
			a.full[t.peer] = true
		} else {
			a.joins[t.peer] = true
		}
	}
	a.mu.Unlock()
	a.wake()
}

// subtree names one node of the tree.
type subtree struct{ level, index int }

// run is one round as initiator; false when it failed (a request could not
// be sent, or its answer did not come).
func (a *antiEntropy) run(ctx context.Context, t target) bool {
	m := a.m
	start := time.Now()
	// The timeout bounds the descent, not the records sent after it.
	wait, cancel := context.WithTimeout(ctx, roundTimeout)
	defer cancel()
	tree := a.keeper.current(wait)
	if tree == nil {
		return false
	}
	id := a.open(t.peer)
	defer a.close(id)
	var inFlight uint64
	if t.periodic {
		inFlight = store.HLCFromTime(time.Now().Add(-inFlightGrace))
	}
	var (
		parents = []int{0}
		empty   []subtree // the peer holds nothing there
		sent    int       // nodes the peer sends all of
		leaves  []int     // the leaves that differ
		theirs  []leafEntry
	)
	for level := 1; level <= treeDepth && len(parents) > 0; level++ {
		// Read before the hashes: what the tree held at seq, they hold.
		seq := tree.lastSeq()
		req := treeReq{Round: id, From: m.cfg.Name, InFlight: inFlight, Level: level, Parents: parents, Hashes: tree.children(level, parents)}
		done := a.expect(id, level)
		if err := m.sendNow(t.peer, classAntiEntropy, encodeTreeReq(req)); err != nil {
			m.metrics.rounds.WithLabelValues("failed").Inc()
			m.log.Debug("anti-entropy round failed", "peer", t.peer, "level", level, "err", err)
			return false
		}
		select {
		case <-done:
		case <-wait.Done():
			if ctx.Err() == nil {
				m.metrics.rounds.WithLabelValues("failed").Inc()
				m.log.Debug("anti-entropy round timed out", "peer", t.peer, "level", level)
			}
			return false
		}
		resp, entries := a.result(id)
		// Equal nodes, and those where this tree holds nothing: the peer
		// holds what this tree held at seq.
		a.proofs.proveLevel(t.peer, level, parents, seq, resp.Differ, resp.Empty)
		for _, i := range resp.Empty {
			empty = append(empty, subtree{level, i})
		}
		sent += len(resp.Sent)
		parents = resp.Differ
		if level == treeDepth {
			leaves, theirs = resp.Differ, entries
		}
	}
	if len(leaves) == 0 && len(empty) == 0 && sent == 0 {
		m.metrics.rounds.WithLabelValues("in_sync").Inc()
		m.log.Debug("anti-entropy round", "peer", t.peer, "leaves", 0, "took", time.Since(start))
		return true
	}
	push, pull := reconcile(tree.entries(leaves), leaves, theirs, inFlight)
	pushed := 0
	if t.push {
		for _, s := range empty {
			push = append(push, tree.under(s.level, s.index, inFlight)...)
		}
		var err error
		if pushed, err = a.sendKeys(ctx, t.peer, roundKey{m.cfg.Name, id}, msgRecords, push); err != nil {
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
	m.log.Debug("anti-entropy round", "peer", t.peer, "leaves", len(leaves), "empty", len(empty), "sent", sent,
		"pushed", pushed, "pulled", len(pull), "took", time.Since(start))
	return true
}

// open registers a round with peer.
func (a *antiEntropy) open(peer string) uint64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.roundID++
	a.rounds[a.roundID] = &round{peer: peer}
	return a.roundID
}

func (a *antiEntropy) close(id uint64) {
	a.mu.Lock()
	delete(a.rounds, id)
	a.mu.Unlock()
}

// expect readies round id for the answer to level and returns the channel
// closed once every page of it has arrived.
func (a *antiEntropy) expect(id uint64, level int) <-chan struct{} {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.rounds[id]
	r.level, r.pages, r.complete = level, map[int]treeResp{}, false
	r.done = make(chan struct{})
	return r.done
}

// result returns a complete answer: its lists (from any page) and the
// entries of all its pages.
func (a *antiEntropy) result(id uint64) (treeResp, []leafEntry) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var resp treeResp
	var entries []leafEntry
	r := a.rounds[id]
	if r == nil {
		return resp, nil
	}
	for _, p := range r.pages {
		resp = p
		entries = append(entries, p.Entries...)
	}
	return resp, entries
}

// deliver files one answer page. It never blocks.
func (a *antiEntropy) deliver(resp treeResp) {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := a.rounds[resp.Round]
	if r == nil || r.peer != resp.From || r.level != resp.Level || r.complete {
		return
	}
	r.pages[resp.Page] = resp
	if len(r.pages) >= resp.Pages {
		r.complete = true
		close(r.done)
	}
}

// serve answers tree and pull requests, a few at a time.
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
	case msgTreeReq:
		var req treeReq
		if req, err = decodeTreeReq(body); err == nil {
			if err = a.awaitMember(ctx, req.From); err == nil {
				err = a.answerTree(ctx, req)
			}
		}
	case msgPullReq:
		var req pullReq
		if req, err = decodePullReq(body); err == nil {
			if err = a.awaitMember(ctx, req.From); err != nil {
				break
			}
			if tree := a.keeper.current(ctx); tree != nil {
				var n int
				n, err = a.sendKeys(ctx, req.From, roundKey{req.From, req.Round}, msgPullResp, req.Keys)
				m.log.Debug("pull answered", "peer", req.From, "asked", len(req.Keys), "sent", n)
			}
		}
	}
	if err != nil {
		m.log.Debug("anti-entropy request failed", "type", t, "err", err)
	}
}

// awaitMember returns once peer is in the member table, so that an answer
// can be sent to it, or after roundTimeout. A member that joined through
// another asks for its first round at once, often before the gossip of its
// join has reached the member it asks; an answer dropped then would leave it
// without the cluster's records until its round times out and a periodic
// round comes.
func (a *antiEntropy) awaitMember(ctx context.Context, peer string) error {
	if _, ok := a.m.table.lookup(peer); ok {
		return nil
	}
	wait, cancel := context.WithTimeout(ctx, roundTimeout)
	defer cancel()
	tick := time.NewTicker(awaitMemberPoll)
	defer tick.Stop()
	for {
		select {
		case <-wait.Done():
			return fmt.Errorf("answer to %s: %w", peer, ErrNotMember)
		case <-tick.C:
			if _, ok := a.m.table.lookup(peer); ok {
				return nil
			}
		}
	}
}

// answerTree compares one level of the initiator's tree with this node's and
// says which nodes differ; at the leaves it adds this node's entries in the
// differing ones, paged. Then it sends the records under the nodes where the
// initiator holds nothing.
func (a *antiEntropy) answerTree(ctx context.Context, req treeReq) error {
	m := a.m
	tree := a.keeper.current(ctx)
	if tree == nil {
		return ctx.Err()
	}
	seq := tree.lastSeq()
	d := tree.compare(req.Level, req.Parents, req.Hashes)
	// The initiator held, when it read its tree, what this one holds at
	// seq under the equal nodes and those where this one holds nothing.
	a.proofs.proveLevel(req.From, req.Level, req.Parents, seq, d.Differ, d.Missing)
	var entries []leafEntry
	if req.Level == treeDepth {
		for _, e := range tree.entries(d.Differ) {
			entries = append(entries, leafEntry{Key: e.Key, Hash: e.hash, Settled: settled(e.Version, req.InFlight)})
		}
	}
	pages := pageEntries(entries, batchBytes)
	for i, p := range pages {
		resp := treeResp{Round: req.Round, From: m.cfg.Name, Level: req.Level, Page: i, Pages: len(pages),
			Differ: d.Differ, Empty: d.Empty, Sent: d.Missing, Entries: p}
		if err := m.sendNow(req.From, classAntiEntropy, encodeTreeResp(resp)); err != nil {
			return err
		}
	}
	var missing []Key
	for _, i := range d.Missing {
		missing = append(missing, tree.under(req.Level, i, req.InFlight)...)
	}
	if len(missing) == 0 {
		return nil
	}
	n, err := a.sendKeys(ctx, req.From, roundKey{req.From, req.Round}, msgRecords, missing)
	m.log.Debug("records sent for empty subtrees", "peer", req.From, "records", n)
	return err
}

// sendKeys sends the records of keys to peer as t messages of at most
// batchBytes, one after the other (the stream's pace bounds the memory), and
// returns how many it sent; msgRecords are not sent while another round's
// stream to peer is under way (beginStream). A live record is read from the
// store (it may have changed since the tree saw it: then the newer version
// goes), and so is a tombstone. A key the store no longer holds is skipped.
func (a *antiEntropy) sendKeys(ctx context.Context, peer string, round roundKey, t msgType, keys []Key) (int, error) {
	m := a.m
	if len(keys) == 0 {
		return 0, nil
	}
	if t == msgRecords {
		if !a.beginStream(peer, round) {
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
		rec, ok, err := m.st.Lookup(k.Kind, k.Name)
		switch {
		case err != nil:
			return sent, err
		case !ok:
			continue
		case rec.Deleted && a.proofs.covers(peer, leafOf(k), rec.Seq):
			// The peer held it: it lacks it because it collected it.
			continue
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
