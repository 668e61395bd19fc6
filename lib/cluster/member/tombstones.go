package member

import (
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/store"
)

// Early tombstone collection: a member collects a tombstone before the
// store's TombstoneTTL once every member it counts has been shown to hold it.
//
// The evidence comes from anti-entropy. When one level of a round finds a
// node of the two trees equal (or finds that this member holds nothing
// under it), the peer held, at that moment, every record this member held
// beneath it when it read its tree: in particular every record whose local
// Seq is at most the tree's lastSeq read before the hashes (the keeper
// applies the store's commits in Seq order). A store only ever replaces a
// record by a newer version, so a peer that held a tombstone holds it or
// something newer from then on, or has collected it by the same rule. proofs
// keeps per peer and leaf the highest such Seq; both the initiator (from the
// answers) and the responder (from the requests) learn one.
//
// A member counts every member of MemberStates (live, suspected, dead and
// left ones not yet forgotten, so one that comes back with its data dir finds
// its deletes still there) and, across its own restarts, the members it
// remembers (persisted in the store's meta) for ForgetAfter after it last
// saw them: a restarted member hears from memberlist only of the live
// members. A member that counts nobody keeps the TTL: it cannot tell being
// alone from not having heard of its peers yet, and single nodes run no
// Member.
//
// A collected tombstone is not sent back: a round that finds a peer lacking
// a tombstone this member holds and that the peer was shown to hold
// (proofs.covers) leaves it alone, since the peer can only lack it because it
// collected it. Without this a member that collects first would get the
// tombstone back from one that has not yet, with a new Seq, and the waves
// would go on. proofs of a member are dropped when it joins again (a restart
// with a wiped data dir must not be taken for one that collected).

// metaPeers is the store meta name of the members a tombCollector remembers.
const metaPeers = "member/peers"

// proofs is, per peer and leaf, the highest local Seq at which the peer was
// shown to hold every record this member held in that leaf (proofs is 32 KB
// per peer). Safe for concurrent use.
type proofs struct {
	mu     sync.Mutex
	byPeer map[string]*[NumLeaves]uint64
}

func newProofs() *proofs { return &proofs{byPeer: map[string]*[NumLeaves]uint64{}} }

// prove records that peer held, at seq, what this member held under node i
// of level l.
func (p *proofs) prove(peer string, l, i int, seq uint64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.byPeer[peer]
	if h == nil {
		h = new([NumLeaves]uint64)
		p.byPeer[peer] = h
	}
	from, to := leafRange(l, i)
	for b := from; b < to; b++ {
		h[b] = max(h[b], seq)
	}
}

// forget drops what peer was shown to hold.
func (p *proofs) forget(peer string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.byPeer, peer)
}

// covers reports whether peer was shown to hold the record of leaf whose
// local Seq is seq.
func (p *proofs) covers(peer string, leaf int, seq uint64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.byPeer[peer]
	return h != nil && seq != 0 && seq <= h[leaf]
}

// floor is, per leaf, the lowest horizon over peers (zero for a peer
// without proofs).
func (p *proofs) floor(peers []string) *[NumLeaves]uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := new([NumLeaves]uint64)
	for i, name := range peers {
		h := p.byPeer[name]
		if h == nil {
			return new([NumLeaves]uint64)
		}
		if i == 0 {
			*out = *h
			continue
		}
		for b := range out {
			out[b] = min(out[b], h[b])
		}
	}
	return out
}

// proveLevel records what one level of a round showed about peer: it held
// what this member held at seq under the children of parents on level l
// that are not in unproven.
func (p *proofs) proveLevel(peer string, l int, parents []int, seq uint64, unproven ...[]int) {
	for _, parent := range parents {
		for c := parent * treeFanout; c < (parent+1)*treeFanout; c++ {
			if !inAny(c, unproven) {
				p.prove(peer, l, c, seq)
			}
		}
	}
}

func inAny(x int, lists [][]int) bool {
	for _, l := range lists {
		if slices.Contains(l, x) {
			return true
		}
	}
	return false
}

// collectible returns the tombstones of t (Deleted records with a Tomb)
// deleted before olderThan whose Seq every counted peer has been shown to
// hold (floor), in no particular order.
func collectible(t *hashTree, floor *[NumLeaves]uint64, olderThan time.Time) []store.Tombstone {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []store.Tombstone
	for k, r := range t.tombs {
		if !r.deletedBefore(olderThan) || r.seq == 0 || r.seq > floor[leafOf(k)] {
			continue
		}
		out = append(out, store.Tombstone{Kind: k.Kind, Name: k.Name, Version: r.version})
	}
	return out
}

// counted returns the peers a collection needs proofs from: every known
// member but self, and the remembered ones seen within forget. It also
// returns remembered brought up to date (known members seen now, or when
// they went; the others dropped after forget) and whether its names
// changed.
func counted(self string, known []MemberState, remembered map[string]time.Time, now time.Time, forget time.Duration) ([]string, map[string]time.Time, bool) {
	next := map[string]time.Time{}
	for name, seen := range remembered {
		if now.Sub(seen) <= forget {
			next[name] = seen
		}
	}
	for _, s := range known {
		if s.Name == self {
			continue
		}
		seen := now
		if s.State != StateAlive {
			seen = s.Since
		}
		if seen.After(next[s.Name]) {
			next[s.Name] = seen
		}
	}
	changed := !slices.Equal(slices.Sorted(maps.Keys(next)), slices.Sorted(maps.Keys(remembered)))
	return slices.Sorted(maps.Keys(next)), next, changed
}

// tombCollector collects, for the keeper, what every counted member has been
// shown to hold. It runs on the keeper's goroutine only.
type tombCollector struct {
	st     *store.Store
	log    *slog.Logger
	self   string
	proofs *proofs
	known  func() []MemberState
	forget time.Duration
	// minAge: a tombstone is kept at least this long whatever the proofs
	// (resumed event streams replay the deletes of api.resume_window);
	// negative turns early collection off.
	minAge time.Duration

	remembered map[string]time.Time // nil until loaded from the store
	persisted  time.Time            // when remembered was last written
}

// load reads the remembered members once.
func (c *tombCollector) load() {
	if c.remembered != nil {
		return
	}
	c.remembered = map[string]time.Time{}
	buf, err := c.st.Meta(metaPeers)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		c.log.Warn("remembered members not read", "err", err)
	default:
		if err := json.Unmarshal(buf, &c.remembered); err != nil {
			c.log.Warn("remembered members not read", "err", err)
		}
	}
}

// run collects from t, the published tree, the tombstones every counted
// member has been shown to hold, removes them from t and returns how many
// the store removed.
func (c *tombCollector) run(t *hashTree) (int, error) {
	if c.minAge < 0 {
		return 0, nil
	}
	c.load()
	now := c.st.Now()
	peers, next, changed := counted(c.self, c.known(), c.remembered, now, c.forget)
	if changed || now.Sub(c.persisted) > c.forget/8 {
		// Written before it is relied on: a restart must still count them.
		buf, _ := json.Marshal(next)
		if err := c.st.PutMeta(metaPeers, buf); err != nil {
			return 0, err
		}
		c.persisted = now
	}
	c.remembered = next
	if len(peers) == 0 {
		return 0, nil
	}
	ts := collectible(t, c.proofs.floor(peers), now.Add(-c.minAge))
	if len(ts) == 0 {
		return 0, nil
	}
	n, err := c.st.CollectTombstoneList(ts)
	// Each one is gone from the store, or was replaced there by a record
	// whose commit comes after the tree's Seq: its event will file it.
	for _, ts := range ts {
		t.remove(Key{Kind: ts.Kind, Name: ts.Name}, ts.Version)
	}
	t.collected += uint64(n)
	return n, err
}
