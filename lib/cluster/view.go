package cluster

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hf-fleet/hf/lib/cluster/cache"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// view is the node's reading of membership: who is alive (memberlist), who
// is known (every Node object in the store, stopped ones included), whether
// this node reaches a majority of the known members, and who owns a key by
// rendezvous. Safe for concurrent use.
type view struct {
	self  string
	peers Peers
	cache *cache.Cache
	now   func() time.Time
	// nodeDeleted reports whether the store holds the tombstone of node's
	// Node object (hf-cli node delete); nil: none is. Memberlist goes on
	// listing a member that died or left for ForgetAfter (24 h), so without
	// it a deleted node still counted as known for that long.
	nodeDeleted func(node string) bool
	// ctx ends the probes; reprobe is called when a probe has an answer,
	// to look again at what waited for it.
	ctx     context.Context
	reprobe func()

	// probes are the probe goroutines under way (Stop waits for them).
	probes sync.WaitGroup

	mu sync.Mutex
	// gen counts membership changes; a probe answers for the gen it
	// started in, for reachFresh.
	gen     uint64
	probing bool
	reach   reachProbe
	// quorate is the last quorum this node was sure of; regained is when
	// it last went from none to a majority (see since).
	quorate  bool
	regained time.Time
	// known is members' count; nodes counts Node objects that came or went.
	known knownCount
	nodes atomic.Uint64
}

// reachProbe is the answer of a probe of the live members.
type reachProbe struct {
	gen       uint64
	at        time.Time
	reachable int
}

// reachFresh is how long a probe's answer stands.
const reachFresh = 2 * time.Second

// live returns the live members, sorted.
func (v *view) live() []string { return v.peers.Members() }

// alive reports whether node is a live member.
func (v *view) alive(node string) bool {
	_, ok := slices.BinarySearch(v.live(), node)
	return ok
}

// start lets quorum probe until ctx ends.
func (v *view) start(ctx context.Context, reprobe func()) {
	v.mu.Lock()
	v.ctx, v.reprobe = ctx, reprobe
	v.mu.Unlock()
}

// wait returns when no probe is under way.
func (v *view) wait() { v.probes.Wait() }

// membersChanged makes earlier probes stale, and notes a majority lost.
func (v *view) membersChanged() {
	live, known := v.members()
	v.mu.Lock()
	v.gen++
	if 2*len(live) <= known {
		v.noteLocked(false)
	}
	v.mu.Unlock()
}

// noteLocked records a quorum this node is sure of. v.mu is held.
func (v *view) noteLocked(q bool) {
	if q && !v.quorate {
		v.regained = v.now()
	}
	v.quorate = q
}

// since is t, or when this node last regained a majority if that is later:
// how long a member has been absent counts only from then. A node on the
// smaller side of a partition sees the far members absent from the start,
// and as it heals it may reach a majority one member before the last one
// is back; the time it spent cut off is no evidence that that member is
// gone.
func (v *view) since(t time.Time) time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.regained.After(t) {
		return v.regained
	}
	return t
}

// quorum reports whether this node reaches a majority of the members it
// knows (see members). A node cut
// off from the others (or on the smaller side of a partition) has none: it
// passes no verdict on the nodes it cannot see, whose machines may run fine
// on the other side. Known members are forgotten only when their Node
// object is deleted (hf-cli node delete).
//
// Membership lags a partition: the far members are declared dead one
// probe apart, and in between a node cut off alone still counts some of
// them live. So while a known member is absent (the only time a verdict is
// due) the live ones must answer a direct probe, started after the last
// membership change; until one has answered, quorum is false and reprobe
// is called when it has.
func (v *view) quorum() bool {
	q, _ := v.quorumAnswered()
	return q
}

// quorumAnswered is quorum, and whether it is an answer: false while the
// probe it waits for is under way (quorum is then false).
func (v *view) quorumAnswered() (quorum, answered bool) {
	live, known := v.members()
	switch {
	case 2*len(live) <= known:
		v.note(false)
		return false, true
	case len(live) == known:
		v.note(true)
		return true, true // nobody is absent: no verdict to pass
	}
	return v.confirmQuorum(reachFresh)
}

// note records a quorum this node is sure of.
func (v *view) note(q bool) {
	v.mu.Lock()
	v.noteLocked(q)
	v.mu.Unlock()
}

// confirmQuorum is quorum as a probe that started at most maxAge ago found
// it, whoever is absent: for a verdict on a member that membership still
// lists as live (an offer it did not answer). answered is false while no
// such probe has answered; one is then under way, and reprobe is called
// when it has.
func (v *view) confirmQuorum(maxAge time.Duration) (quorum, answered bool) {
	live, known := v.members()
	v.mu.Lock()
	defer v.mu.Unlock()
	if 2*len(live) <= known {
		v.noteLocked(false)
		return false, true
	}
	if r := v.reach; r.gen == v.gen && time.Since(r.at) <= maxAge {
		q := 2*r.reachable > known
		v.noteLocked(q)
		return q, true
	}
	if !v.probing && v.ctx != nil && v.ctx.Err() == nil {
		v.probing = true
		v.probes.Add(1)
		ctx, reprobe, gen := v.ctx, v.reprobe, v.gen
		go func() {
			defer v.probes.Done()
			v.probe(ctx, reprobe, gen, live)
		}()
	}
	return false, false
}

// members returns the live members and how many members this node knows:
// every node with a Node object and every member memberlist has seen
// lately (a node just joined may not have every Node object yet), but not
// one that is gone and whose Node object was deleted: a node stopped for
// good and deleted (hf-cli node delete) no longer counts towards the
// majority, so the nodes left can pass the verdicts on its machines.
func (v *view) members() (live []string, known int) {
	live = v.live()
	gen := v.nodes.Load()
	v.mu.Lock()
	m := v.known
	v.mu.Unlock()
	// The count holds while the live members' slice is the same one (Peers
	// keeps it until membership changes) and no Node object came or went:
	// the elector asks for it for every claim.
	if m.ok && m.nodes == gen && len(m.live) == len(live) && (len(live) == 0 || &m.live[0] == &live[0]) {
		return live, m.count
	}
	names := map[string]bool{}
	for _, m := range live {
		names[m] = true
	}
	for _, m := range v.peers.Known() {
		if !names[m] && v.nodeDeleted != nil && v.nodeDeleted(m) {
			continue // gone, and deleted by an operator
		}
		names[m] = true
	}
	for _, o := range v.cache.List(types.KindNode) {
		names[o.Meta().Name] = true
	}
	v.mu.Lock()
	v.known = knownCount{ok: true, live: live, nodes: gen, count: len(names)}
	v.mu.Unlock()
	return live, len(names)
}

// nodeDeletedIn is view.nodeDeleted reading st's tombstones.
func nodeDeletedIn(st *store.Store) func(node string) bool {
	return func(node string) bool {
		deleted, err := st.Deleted(types.KindNode, node)
		return err == nil && deleted
	}
}

// nodesChanged is told that a Node object came or went: members counts
// again.
func (v *view) nodesChanged() { v.nodes.Add(1) }

// knownCount is members' last count of the known members, with what it
// was counted from.
type knownCount struct {
	ok    bool
	live  []string
	nodes uint64
	count int
}

// probe pings the live members and records how many answered.
func (v *view) probe(ctx context.Context, reprobe func(), gen uint64, live []string) {
	start := time.Now()
	var answered atomic.Int32
	var wg sync.WaitGroup
	for _, m := range live {
		wg.Go(func() {
			if v.peers.Ping(ctx, m) == nil {
				answered.Add(1)
			}
		})
	}
	wg.Wait()
	v.mu.Lock()
	v.probing = false
	v.reach = reachProbe{gen: gen, at: start, reachable: int(answered.Load())}
	v.mu.Unlock()
	if ctx.Err() == nil {
		reprobe()
	}
}

// owner is the rendezvous owner of key among the live members.
func (v *view) owner(key string) string { return scheduler.Owner(key, v.live()) }

// mine reports whether this node owns key.
func (v *view) mine(key string) bool { return v.owner(key) == v.self }
