package scheduler

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// This file simulates the whole claim protocol as lib/cluster runs it, with
// the same pure decisions: every node has a replica of the claims' facets, a
// ledger of its machines and its own Elector; the elector side follows
// DecideClaim and the Elector's actions, the holder side DecideMachine and
// DecideOrphan. Replication of facet writes and the direct offer messages
// go over a network that delays, reorders, drops and duplicates, and that
// partitions; anti-entropy repairs what replication lost. Facets merge as
// the store merges them: the higher epoch wins (a claim's election by round,
// its binding by types.BindingEpoch), then the newer version; a write below
// the stored epoch is refused (fenced).
//
// Simplifications, named: membership follows the partition after a fixed
// detection delay (memberlist's suspicion); quorum is what a probe would
// find (the nodes in the same partition group); capacity is plentiful
// (capacity and declines are the elector's own tests); drivers allocate
// after a short delay and never fail; no node is declared lost (partitions
// are shorter than a lost grace).

const (
	psimOfferTimeout = 200 * time.Millisecond
	psimDetect       = 150 * time.Millisecond
	psimAntiEntropy  = 300 * time.Millisecond
	psimBindTimeout  = time.Minute
)

// pfacet is one facet copy: its value, epoch and version (hlc, node).
type pfacet struct {
	epoch uint64
	hlc   uint64
	node  string
	el    *types.ClaimElection
	b     *types.ClaimBinding
}

func (f *pfacet) newer(o *pfacet) bool {
	switch {
	case o == nil:
		return true
	case f.epoch != o.epoch:
		return f.epoch > o.epoch
	case f.hlc != o.hlc:
		return f.hlc > o.hlc
	}
	return f.node > o.node
}

// pclaim is one node's replica of a claim.
type pclaim struct {
	created  time.Time
	election *pfacet
	binding  *pfacet
}

func (c *pclaim) clone() *pclaim { x := *c; return &x }

// object is the claim as the store would assemble it (phase derived).
func (c *pclaim) object(name string) *types.MachineClaim {
	o := &types.MachineClaim{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
		Metadata: types.ObjectMeta{Name: name, CreatedAt: c.created},
		Spec:     types.MachineClaimSpec{MachineTemplate: "t"},
	}
	if c.election != nil {
		e := *c.election.el
		o.Status.Election = &e
	}
	if c.binding != nil {
		b := *c.binding.b
		o.Status.Binding = &b
	}
	o.Derive()
	return o
}

// pnode is one node: replica, ledger, driver holdings and elector.
type pnode struct {
	name    string
	rep     map[string]*pclaim
	ledger  map[string]*Held // by machine
	driver  map[string]bool  // machines the driver holds
	e       *Elector
	issued  map[string]uint64
	members []string // its membership view (sorted)
	due     time.Time
	seq     int
}

type psim struct {
	t      *testing.T
	rng    *rand.Rand
	now    time.Time
	q      eventQueue
	seq    int
	hlc    uint64
	nodes  []*pnode
	groups map[string]int // partition group of each node
	loss   float64        // chance a message is dropped
	dup    float64        // chance a message is delivered twice
	jitter time.Duration
	claims []string
	// firstBound is the first machine each claim was bound to, anywhere.
	firstBound map[string]string
	stats      struct{ offers, writes, fenced, messages, dropped int }
	// trace is what happened to each claim, for failure messages.
	trace map[string][]string
}

func (s *psim) logf(claim, format string, args ...any) {
	s.trace[claim] = append(s.trace[claim], fmt.Sprintf("%6s ", s.now.Sub(t0).Round(time.Millisecond))+fmt.Sprintf(format, args...))
}

func newPsim(t *testing.T, seed uint64, n int) *psim {
	s := &psim{t: t, rng: rand.New(rand.NewPCG(seed, 7)), now: t0, groups: map[string]int{}, firstBound: map[string]string{}, trace: map[string][]string{}}
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		s.nodes = append(s.nodes, &pnode{name: name, rep: map[string]*pclaim{}, ledger: map[string]*Held{}, driver: map[string]bool{},
			e: NewElector(psimOfferTimeout), issued: map[string]uint64{}})
		s.groups[name] = 0
	}
	for _, nd := range s.nodes {
		nd.members = s.reachableFrom(nd)
		s.stepElector(nd, CandidatesChanged{Candidates: s.candidates(nd), Quorum: true})
	}
	for _, nd := range s.nodes {
		s.antiEntropyLoop(nd)
	}
	return s
}

func (s *psim) at(t time.Time, fn func()) {
	s.seq++
	heap.Push(&s.q, simEvent{at: t, seq: s.seq, fn: fn})
}

func (s *psim) after(d time.Duration, fn func()) { s.at(s.now.Add(d), fn) }

// runUntil processes events up to t.
func (s *psim) runUntil(t time.Time) {
	for s.q.Len() > 0 {
		ev := s.q[0]
		if ev.at.After(t) {
			break
		}
		heap.Pop(&s.q)
		s.now = ev.at
		ev.fn()
	}
	s.now = t
}

func (s *psim) node(name string) *pnode {
	for _, n := range s.nodes {
		if n.name == name {
			return n
		}
	}
	s.t.Fatalf("no node %s", name)
	return nil
}

// reachableFrom is the nodes in nd's partition group, sorted.
func (s *psim) reachableFrom(nd *pnode) []string {
	var out []string
	for _, o := range s.nodes {
		if s.groups[o.name] == s.groups[nd.name] {
			out = append(out, o.name)
		}
	}
	return out
}

// deliver sends fn from one node to another over the faulty network: lost
// across a partition or at random, else after a random delay, sometimes twice.
func (s *psim) deliver(from, to string, fn func()) {
	s.stats.messages++
	if from == to {
		s.after(0, fn)
		return
	}
	times := 1
	if s.rng.Float64() < s.dup {
		times = 2
	}
	for range times {
		if s.rng.Float64() < s.loss {
			s.stats.dropped++
			continue
		}
		d := time.Millisecond + time.Duration(s.rng.Int64N(int64(s.jitter)+1))
		s.after(d, func() {
			if s.groups[from] != s.groups[to] {
				s.stats.dropped++
				return // cut off while in flight
			}
			fn()
		})
	}
}

// quorum is view.quorum: true when nobody is absent from nd's membership,
// else what a probe finds.
func (s *psim) quorum(nd *pnode) bool {
	if len(nd.members) == len(s.nodes) {
		return true
	}
	return s.confirmQuorum(nd)
}

// confirmQuorum is what a probe of the members finds now.
func (s *psim) confirmQuorum(nd *pnode) bool {
	return 2*len(s.reachableFrom(nd)) > len(s.nodes)
}

func (s *psim) candidates(nd *pnode) []Candidate {
	var out []Candidate
	for _, o := range s.nodes {
		c := cand(o.name, 1000, 1000, 0, 0)
		c.Alive = slices.Contains(nd.members, o.name)
		out = append(out, c)
	}
	return out
}

// --- replicas and writes ---

// write stores a facet written by nd (refused below the stored epoch) and
// replicates it; it reports whether it was stored.
func (s *psim) write(nd *pnode, claim string, f *pfacet) bool {
	c := nd.rep[claim]
	if c == nil {
		return false
	}
	cur := c.election
	if f.b != nil || (f.el == nil && f.b == nil) {
		cur = c.binding
	}
	if cur != nil && cur.epoch > f.epoch {
		s.stats.fenced++
		s.logf(claim, "%s: write fenced", nd.name)
		return false
	}
	s.hlc++
	f.hlc, f.node = s.hlc, nd.name
	if f.el != nil {
		c.election = f
	} else {
		c.binding = f
	}
	s.stats.writes++
	if f.el != nil {
		s.logf(claim, "%s writes election %+v", nd.name, *f.el)
	} else {
		s.logf(claim, "%s writes binding %+v", nd.name, *f.b)
	}
	snap := c.clone()
	for _, o := range s.nodes {
		if o != nd {
			s.deliver(nd.name, o.name, func() { s.merge(o, claim, snap) })
		}
	}
	s.changed(nd, claim)
	return true
}

// merge applies another node's copy of a claim facet by facet.
func (s *psim) merge(nd *pnode, claim string, in *pclaim) {
	c := nd.rep[claim]
	changed := false
	if c == nil {
		c = &pclaim{created: in.created}
		nd.rep[claim] = c
		changed = true
	}
	if in.election != nil && in.election.newer(c.election) {
		c.election, changed = in.election, true
	}
	if in.binding != nil && in.binding.newer(c.binding) {
		c.binding, changed = in.binding, true
	}
	if changed {
		s.changed(nd, claim)
	}
}

func (s *psim) antiEntropyLoop(nd *pnode) {
	s.after(psimAntiEntropy, func() {
		peers := s.reachableFrom(nd)
		if len(peers) > 1 {
			peer := peers[s.rng.IntN(len(peers))]
			if peer != nd.name {
				o := s.node(peer)
				for _, name := range sortedKeys(nd.rep) {
					snap := nd.rep[name].clone()
					s.deliver(nd.name, peer, func() { s.merge(o, name, snap) })
				}
			}
		}
		s.antiEntropyLoop(nd)
	})
}

// create makes a claim through nd's API.
func (s *psim) create(nd *pnode, name string) {
	s.claims = append(s.claims, name)
	nd.rep[name] = &pclaim{created: s.now}
	snap := nd.rep[name].clone()
	for _, o := range s.nodes {
		if o != nd {
			s.deliver(nd.name, o.name, func() { s.merge(o, name, snap) })
		}
	}
	s.changed(nd, name)
}

// changed runs both sides' reconcile of a claim on nd (as the cache's
// handlers queue them).
func (s *psim) changed(nd *pnode, claim string) {
	s.after(0, func() {
		s.reconcileElector(nd, claim)
		s.reconcileHolder(nd, claim)
	})
}

func (s *psim) state(nd *pnode, claim string) (*types.MachineClaim, ClaimState) {
	c := nd.rep[claim]
	if c == nil {
		return nil, ClaimState{}
	}
	o := c.object(claim)
	return o, ClaimStateOf(o, psimBindTimeout)
}

// --- the elector side (lib/cluster/elector.go) ---

func (s *psim) reconcileElector(nd *pnode, claim string) {
	o, cs := s.state(nd, claim)
	if o == nil {
		return
	}
	if nd.issued[claim] <= cs.Round() {
		delete(nd.issued, claim)
	}
	alive := func(n string) bool { return slices.Contains(nd.members, n) }
	d := DecideClaim(cs, o.Status.Phase, "", types.LostRebind, alive, s.quorum(nd))
	switch d.Action {
	case Forget, Wait:
		if d.Action == Forget && d.AcceptedBy != "" {
			s.stepElector(nd, ClaimAccepted{Claim: claim, Node: d.AcceptedBy, Round: d.Round})
			return
		}
		s.stepElector(nd, ClaimGone{Claim: claim})
	case Elect:
		if node := d.Exclude + d.AcceptedBy; node != "" {
			s.stepElector(nd, GaveBack{Claim: claim, Node: node, Round: d.Round, Reason: d.Reason})
		}
		if Owner(claim, nd.members) != nd.name {
			return
		}
		req := testReq(claim, 1, 1)
		if d.Exclude != "" {
			req.Exclude = map[string]bool{d.Exclude: true}
		}
		s.stepElector(nd, ClaimRequested{Claim: claim, Request: req, Round: max(d.Round, nd.issued[claim]), Deadline: cs.Deadline, AcceptedBy: d.AcceptedBy, Reason: d.Reason})
	}
}

func (s *psim) stepElector(nd *pnode, in Input) {
	for _, a := range nd.e.Step(s.now, in) {
		s.execute(nd, a)
	}
	s.arm(nd)
}

func (s *psim) execute(nd *pnode, a Action) {
	_, cs := s.state(nd, actionClaim(a))
	switch a := a.(type) {
	case SendOffer:
		s.stats.offers++
		s.logf(a.Claim, "%s offers round %d to %s", nd.name, a.Round, a.Node)
		nd.issued[a.Claim] = max(nd.issued[a.Claim], a.Round)
		snap := nd.rep[a.Claim].clone()
		to := s.node(a.Node)
		s.deliver(nd.name, a.Node, func() { s.onOffer(to, nd.name, a, snap) })
	case RecordAccepted:
		s.write(nd, a.Claim, &pfacet{epoch: a.Round, el: &types.ClaimElection{Round: a.Round, Node: a.Node, Driver: a.Driver, At: s.now}})
	case Fail:
		s.write(nd, a.Claim, &pfacet{epoch: cs.Round(), el: &types.ClaimElection{Round: cs.Round(), Failed: true, Reason: a.Reason, At: s.now}})
	case Waiting:
		// (the reason shown; not modelled)
	}
}

func actionClaim(a Action) string {
	switch a := a.(type) {
	case SendOffer:
		return a.Claim
	case RecordAccepted:
		return a.Claim
	case Fail:
		return a.Claim
	case Waiting:
		return a.Claim
	}
	return ""
}

// arm schedules the elector's next timeout, which gives an unanswered offer
// up only with a majority confirmed by a probe.
func (s *psim) arm(nd *pnode) {
	d, ok := nd.e.NextDeadline()
	if !ok || (!nd.due.IsZero() && !d.Before(nd.due)) {
		return
	}
	nd.due = d
	s.at(d, func() {
		nd.due = time.Time{}
		quorum := true
		if nd.e.OffersExpired(s.now) {
			quorum = s.confirmQuorum(nd)
		}
		s.stepElector(nd, Timeout{NoQuorum: !quorum})
	})
}

// onAnswer is the elector receiving an accept or decline with the
// candidate's copy of the claim.
func (s *psim) onAnswer(nd *pnode, from string, a SendOffer, accepted bool, reason string, snap *pclaim) {
	if snap != nil {
		s.merge(nd, a.Claim, snap)
	}
	s.logf(a.Claim, "%s gets %s's answer to round %d: accepted %v %s", nd.name, from, a.Round, accepted, reason)
	if accepted {
		s.stepElector(nd, Accepted{Claim: a.Claim, Node: from, Driver: a.Driver, Round: a.Round})
		return
	}
	if o, _ := s.state(nd, a.Claim); o != nil && o.Status.Phase != types.ClaimRequested {
		s.reconcileElector(nd, a.Claim)
		return
	}
	s.stepElector(nd, Declined{Claim: a.Claim, Node: from, Round: a.Round, Reason: reason})
}

// --- the holder side (lib/cluster/acceptor.go) ---

func (s *psim) onOffer(nd *pnode, elector string, a SendOffer, snap *pclaim) {
	s.merge(nd, a.Claim, snap)
	el := s.node(elector)
	reply := func(ok bool, reason string) {
		var back *pclaim
		if c := nd.rep[a.Claim]; c != nil {
			back = c.clone()
		}
		s.deliver(nd.name, elector, func() { s.onAnswer(el, nd.name, a, ok, reason, back) })
	}
	o, cs := s.state(nd, a.Claim)
	switch {
	case o == nil || o.Status.Phase != types.ClaimRequested:
		reply(false, "claim is settled")
		return
	case cs.Round() >= a.Round:
		reply(false, "claim is at a later round")
		return
	}
	for _, h := range nd.ledger {
		if h.Claim == a.Claim && h.Round == a.Round {
			reply(true, "")
			return
		}
	}
	nd.seq++
	m := fmt.Sprintf("m-%s-%d", nd.name, nd.seq)
	nd.ledger[m] = &Held{Machine: m, Claim: a.Claim, Round: a.Round, Phase: types.MachinePending}
	reply(true, "")
	s.changed(nd, a.Claim)
}

func (s *psim) reconcileHolder(nd *pnode, claim string) {
	o, cs := s.state(nd, claim)
	var held []Held
	for _, name := range sortedKeys(nd.ledger) {
		h := nd.ledger[name]
		if h.Claim != claim {
			continue
		}
		d := DecideMachine(s.now, nd.name, *h, cs)
		switch d.Action {
		case Allocate:
			h.Busy = true
			s.after(time.Duration(1+s.rng.IntN(20))*time.Millisecond, func() {
				h.Busy = false
				if nd.ledger[h.Machine] == h {
					nd.driver[h.Machine] = true
					h.Phase = types.MachineRunning
				}
				s.changed(nd, claim)
			})
		case Bind:
			b := &types.ClaimBinding{Round: h.Round, Node: nd.name, Driver: "test", Machine: h.Machine, Phase: types.BindingBound, At: s.now}
			s.setBinding(nd, claim, o, b)
		case Release:
			s.release(nd, h)
		case GiveBack:
			s.setBinding(nd, claim, o, &types.ClaimBinding{Round: h.Round, Node: nd.name, Driver: "test", Phase: types.BindingReleased, Reason: d.Reason, At: s.now})
			s.release(nd, h)
		}
		if nd.ledger[name] != nil {
			held = append(held, *nd.ledger[name])
		}
	}
	if o == nil {
		return
	}
	if orphan, ok := DecideOrphan(nd.name, o.Status.Phase, cs, held); ok {
		b := &types.ClaimBinding{Round: orphan.Round, Node: nd.name, Driver: "test", Phase: types.BindingReleased, Reason: orphan.Reason, At: s.now}
		if orphan.Lost {
			// As the acceptor's bindingGone: the bound binding, Lost.
			lost := *o.Status.Binding
			lost.Phase, lost.Reason, lost.At = types.BindingLost, orphan.Reason, s.now
			b = &lost
		}
		s.setBinding(nd, claim, o, b)
	}
}

func (s *psim) setBinding(nd *pnode, claim string, o *types.MachineClaim, b *types.ClaimBinding) {
	o.SetBinding(*b, s.now)
	nb := *o.Status.Binding
	if s.write(nd, claim, &pfacet{epoch: types.BindingEpoch(&nb), b: &nb}) && nb.Phase == types.BindingBound {
		if _, ok := s.firstBound[claim]; !ok {
			s.firstBound[claim] = nb.Machine
		}
	} else {
		s.changed(nd, claim) // fenced: decide again (release)
	}
}

func (s *psim) release(nd *pnode, h *Held) {
	s.logf(h.Claim, "%s releases %s (round %d)", nd.name, h.Machine, h.Round)
	delete(nd.driver, h.Machine)
	delete(nd.ledger, h.Machine)
}

// --- faults ---

// partition puts the named nodes in a group of their own; heal ends every
// partition. Each node's membership follows after the detection delay.
func (s *psim) partition(names ...string) {
	g := 1 + s.rng.IntN(1000)
	for _, n := range names {
		s.groups[n] = g
	}
	s.membership()
}

func (s *psim) heal() {
	for n := range s.groups {
		s.groups[n] = 0
	}
	s.membership()
}

func (s *psim) membership() {
	s.after(psimDetect, func() {
		for _, nd := range s.nodes {
			next := s.reachableFrom(nd)
			if slices.Equal(next, nd.members) {
				continue
			}
			gone := slices.DeleteFunc(slices.Clone(nd.members), func(m string) bool { return slices.Contains(next, m) })
			nd.members = next
			q := s.quorum(nd)
			for _, m := range gone {
				s.stepElector(nd, NodeDown{Node: m, Quorum: q})
			}
			s.stepElector(nd, CandidatesChanged{Candidates: s.candidates(nd), Quorum: q})
			for _, name := range sortedKeys(nd.rep) {
				s.changed(nd, name)
			}
		}
	})
}

// --- checks ---

// settled checks the end state once the network is whole and quiet: every
// replica alike; every claim Bound on exactly one held, running machine of
// the node its binding names, or Failed with a reason; no machine held for
// anything else; no driver resource without its ledger entry.
func (s *psim) settled(t *testing.T) {
	t.Helper()
	ref := s.nodes[0]
	for _, nd := range s.nodes[1:] {
		for _, name := range s.claims {
			a, b := ref.rep[name], nd.rep[name]
			require.NotNil(t, a, "claim %s missing on %s", name, ref.name)
			require.NotNil(t, b, "claim %s missing on %s", name, nd.name)
			assert.Equal(t, a.election, b.election, "claim %s: election on %s and %s", name, ref.name, nd.name)
			assert.Equal(t, a.binding, b.binding, "claim %s: binding on %s and %s", name, ref.name, nd.name)
		}
	}
	holders := map[string][]string{} // claim -> machines held anywhere
	for _, nd := range s.nodes {
		for m, h := range nd.ledger {
			holders[h.Claim] = append(holders[h.Claim], nd.name+"/"+m)
		}
		for m := range nd.driver {
			assert.Contains(t, nd.ledger, m, "%s's driver holds %s without a ledger entry", nd.name, m)
		}
	}
	for _, name := range s.claims {
		o, _ := s.state(ref, name)
		switch o.Status.Phase {
		case types.ClaimBound:
			holder := s.node(o.Status.Node)
			h := holder.ledger[o.Status.Machine]
			if assert.NotNil(t, h, "claim %s bound to %s/%s, which holds nothing", name, o.Status.Node, o.Status.Machine) {
				assert.Equal(t, types.MachineRunning, h.Phase)
				assert.True(t, holder.driver[h.Machine])
			}
			assert.Equal(t, []string{o.Status.Node + "/" + o.Status.Machine}, holders[name], "claim %s: machines held", name)
		case types.ClaimFailed:
			assert.NotEmpty(t, o.Status.Reason, "claim %s failed without a reason", name)
			assert.Empty(t, holders[name], "failed claim %s still holds machines", name)
		default:
			assert.Fail(t, "claim not settled", "claim %s is %s (%s) on %s", name, o.Status.Phase, o.Status.Reason, ref.name)
		}
	}
	for claim, ms := range holders {
		assert.Contains(t, s.claims, claim, "machines %v held for unknown claim %s", ms, claim)
	}
}

// replaced counts the claims whose final machine is not the first they were
// bound to.
func (s *psim) replaced() int {
	n := 0
	for _, name := range s.claims {
		o, _ := s.state(s.nodes[0], name)
		if first, ok := s.firstBound[name]; ok && o.Status.Machine != first {
			n++
		}
	}
	return n
}

func (s *psim) dumpReplaced(t *testing.T) {
	for _, name := range s.claims {
		o, _ := s.state(s.nodes[0], name)
		if first, ok := s.firstBound[name]; ok && o.Status.Machine != first {
			t.Logf("claim %s:\n  %s", name, strings.Join(s.trace[name], "\n  "))
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// --- scenarios ---

// runFaulty creates claims at random nodes over the first two seconds while
// the network loses, duplicates and reorders messages and random
// partitions come and go, then heals, quiets the network and lets the
// cluster settle.
func runFaulty(t *testing.T, seed uint64, claims int, partitions bool) *psim {
	s := newPsim(t, seed, 3)
	s.loss, s.dup, s.jitter = 0.05, 0.05, 30*time.Millisecond
	for i := range claims {
		at := time.Duration(s.rng.Int64N(int64(2 * time.Second)))
		nd := s.nodes[s.rng.IntN(len(s.nodes))]
		name := fmt.Sprintf("c%03d", i)
		s.at(t0.Add(at), func() { s.create(nd, name) })
	}
	if partitions {
		for at := 100 * time.Millisecond; at < 2500*time.Millisecond; at += time.Duration(300+s.rng.IntN(700)) * time.Millisecond {
			s.at(t0.Add(at), func() {
				if s.rng.IntN(3) == 0 {
					s.heal()
					return
				}
				s.partition(s.nodes[s.rng.IntN(len(s.nodes))].name)
			})
		}
	}
	s.runUntil(t0.Add(3 * time.Second))
	s.heal()
	s.loss, s.dup = 0, 0
	s.runUntil(t0.Add(20 * time.Second))
	return s
}

// TestProtocolSimLossyNetwork: loss, duplicates and reordering, no
// partitions: every claim binds once, no machine is ever replaced (an
// unanswered offer is sent again before the claim moves on).
func TestProtocolSimLossyNetwork(t *testing.T) {
	for seed := range uint64(200) {
		s := runFaulty(t, seed, 40, false)
		s.settled(t)
		if !assert.Zero(t, s.replaced(), "seed %d: machines replaced without a partition", seed) {
			s.dumpReplaced(t)
		}
		if t.Failed() {
			t.Fatalf("seed %d failed (stats %+v)", seed, s.stats)
		}
	}
}

// TestProtocolSimPartitions: random partitions of one node on top of the
// faulty network. Machines may be replaced: a claim bound on both sides
// while they were cut off keeps the binding of the higher round (the
// majority re-elects a claim accepted by a node as soon as it leaves the
// membership), and the other side deallocates its machine at the heal. Every
// invariant holds once the network heals.
func TestProtocolSimPartitions(t *testing.T) {
	replaced, claims := 0, 0
	for seed := range uint64(40) {
		s := runFaulty(t, seed, 40, true)
		s.settled(t)
		replaced += s.replaced()
		claims += len(s.claims)
		if t.Failed() {
			t.Fatalf("seed %d failed (stats %+v)", seed, s.stats)
		}
	}
	t.Logf("%d of %d claims had their machine replaced over 40 runs with partitions", replaced, claims)
}

// TestProtocolSimDeterministic: a seed replays exactly.
func TestProtocolSimDeterministic(t *testing.T) {
	a, b := runFaulty(t, 7, 30, true), runFaulty(t, 7, 30, true)
	assert.Equal(t, a.stats, b.stats)
	assert.Equal(t, a.firstBound, b.firstBound)
}
