package scheduler

import (
	"container/heap"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// This file is an in-memory model of one elector and N candidate nodes, in
// the manner of etcd-io/raft's network tests: time is virtual, messages are
// events on a queue, and the network can delay, drop and kill. The elector is
// the real one; the nodes play a simplified candidate side (Reserve under
// their own "lock", persist a reservation, allocate on seeing the record)
// with reliable replication. It tests the elector's behaviour; the whole
// protocol, with the holder's pure decisions and faulty replication, is
// simulated in protocol_sim_test.go.

// simNet is the direct-message network between elector and nodes. Replicated
// writes (claim records, reports) do not go through it: the store repairs
// lost replication with anti-entropy, so they are modelled as reliable.
type simNet struct {
	delay    time.Duration // every message takes this long
	jitter   time.Duration // plus up to this much, at random
	dropRate float64       // chance that a direct message is lost
}

// simNode is one candidate node with one "test" driver.
type simNode struct {
	name     string
	cap      types.Capacity
	used     types.Resources
	reserved types.Resources
	resv     map[string]simResv // claim -> reservation
	machines map[string]uint64  // claim -> round allocated
	reported types.Capacity     // last capacity written to the store
	alive    bool               // the process runs
	down     bool               // membership declared it dead
	silent   bool               // swallows offers without answering
}

type simResv struct {
	round   uint64
	expires time.Time // the lease: released if no record names it by then
}

// simClaim is the store's view of one claim.
type simClaim struct {
	name     string
	req      Request
	deadline time.Time
	phase    types.ClaimPhase
	node     string
	round    uint64
	reason   string
	last     Action // the last action the elector emitted for it
	boundAt  time.Time
}

type simEvent struct {
	at  time.Time
	seq int
	fn  func()
}

type eventQueue []simEvent

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if !q[i].at.Equal(q[j].at) {
		return q[i].at.Before(q[j].at)
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(simEvent)) }
func (q *eventQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

// simStep is one input fed to the elector, with its time, for replay.
type simStep struct {
	now time.Time
	in  Input
}

type sim struct {
	t           *testing.T
	now         time.Time
	e           *Elector
	net         simNet
	rng         *rand.Rand
	detect      time.Duration // membership declares a killed node dead after this
	reportDelay time.Duration // a node's capacity change reaches the elector after this
	lease       time.Duration // unrecorded reservations are released after this
	nodes       []*simNode
	claims      map[string]*simClaim
	q           eventQueue
	seq         int
	reporting   bool
	steps       []simStep
	actions     []Action
}

// newSim builds a simulation of nodes with cpu CPUs each (RAM plentiful).
func newSim(t *testing.T, seed uint64, offerTimeout time.Duration, cpus ...float64) *sim {
	s := &sim{
		t: t, now: t0, e: NewElector(offerTimeout), rng: rand.New(rand.NewPCG(seed, 1)),
		net: simNet{delay: time.Millisecond}, detect: 50 * time.Millisecond,
		reportDelay: 5 * time.Millisecond, lease: 3 * offerTimeout, claims: map[string]*simClaim{},
	}
	for i, c := range cpus {
		n := &simNode{
			name: fmt.Sprintf("n%d", i+1), cap: HostCapacity(res(c, 1024, 0), Alter{}),
			resv: map[string]simResv{}, machines: map[string]uint64{}, alive: true,
		}
		n.reported = WithUsage(n.cap, n.used, n.reserved)
		s.nodes = append(s.nodes, n)
	}
	s.step(CandidatesChanged{Candidates: s.snapshot()})
	return s
}

func (s *sim) node(name string) *simNode {
	for _, n := range s.nodes {
		if n.name == name {
			return n
		}
	}
	s.t.Fatalf("unknown node %s", name)
	return nil
}

// at schedules fn at time t.
func (s *sim) at(t time.Time, fn func()) {
	s.seq++
	heap.Push(&s.q, simEvent{at: t, seq: s.seq, fn: fn})
}

// send delivers fn over the lossy direct network.
func (s *sim) send(fn func()) {
	if s.net.dropRate > 0 && s.rng.Float64() < s.net.dropRate {
		return
	}
	d := s.net.delay
	if s.net.jitter > 0 {
		d += time.Duration(s.rng.Int64N(int64(s.net.jitter)))
	}
	s.at(s.now.Add(d), fn)
}

// replicate delivers a store write to every node, reliably.
func (s *sim) replicate(fn func(n *simNode)) {
	for _, n := range s.nodes {
		s.at(s.now.Add(s.net.delay), func() { fn(n) })
	}
}

// step feeds one input to the elector and carries out its actions.
func (s *sim) step(in Input) {
	s.steps = append(s.steps, simStep{now: s.now, in: in})
	acts := s.e.Step(s.now, in)
	s.actions = append(s.actions, acts...)
	for _, a := range acts {
		s.do(a)
	}
}

func (s *sim) do(a Action) {
	switch a := a.(type) {
	case SendOffer:
		s.claims[a.Claim].last = a
		n := s.node(a.Node)
		s.send(func() { s.onOffer(n, a) })
	case RecordAccepted:
		c := s.claims[a.Claim]
		c.last, c.node, c.round = a, a.Node, a.Round
		s.replicate(func(n *simNode) { s.onRecord(n, a.Claim) })
	case Fail:
		c := s.claims[a.Claim]
		c.last, c.phase, c.reason = a, types.ClaimFailed, a.Reason
		s.replicate(func(n *simNode) { s.onRecord(n, a.Claim) })
		s.at(s.now, func() { s.step(ClaimGone{Claim: a.Claim}) })
	case Waiting:
		c := s.claims[a.Claim]
		c.last, c.reason = a, a.Reason
	}
}

// claim creates a claim for cpu CPUs that must bind within bindTimeout.
func (s *sim) claim(name string, cpu float64, bindTimeout time.Duration) {
	c := &simClaim{name: name, req: testReq(name, cpu, 1), deadline: s.now.Add(bindTimeout), phase: types.ClaimRequested}
	c.req.Template = "t"
	s.claims[name] = c
	s.step(ClaimRequested{Claim: name, Request: c.req, Deadline: c.deadline})
}

// deleteClaim deletes a claim; nodes release whatever they hold for it.
func (s *sim) deleteClaim(name string) {
	c := s.claims[name]
	wasRequested := c.phase == types.ClaimRequested
	c.phase = types.ClaimTerminated
	s.replicate(func(n *simNode) { s.onRecord(n, name) })
	if wasRequested {
		s.step(ClaimGone{Claim: name})
	}
}

// kill stops a node at once; membership notices after s.detect.
func (s *sim) kill(name string) {
	n := s.node(name)
	n.alive = false
	s.at(s.now.Add(s.detect), func() {
		n.down = true
		s.step(NodeDown{Node: name, Quorum: true})
	})
}

// onOffer is the candidate side: lock, check real free capacity minus
// reservations, persist a reservation and accept, or decline with fresh capacity.
func (s *sim) onOffer(n *simNode, o SendOffer) {
	c := s.claims[o.Claim]
	if !n.alive || n.silent || c == nil || c.phase != types.ClaimRequested {
		return
	}
	if r, ok := n.resv[o.Claim]; ok {
		if r.round >= o.Round {
			return // an old offer arriving late
		}
		s.release(n, o.Claim) // a newer round supersedes our reservation
	}
	ok, reason := Reserve(WithUsage(n.cap, n.used, n.reserved), c.req.Resources, c.req.AllowOverbook)
	if !ok {
		fresh := s.candidate(n, WithUsage(n.cap, n.used, n.reserved))
		s.send(func() {
			s.step(Declined{Claim: o.Claim, Node: n.name, Round: o.Round, Reason: reason, Fresh: &fresh})
		})
		return
	}
	n.reserved = n.reserved.Add(c.req.Resources)
	n.resv[o.Claim] = simResv{round: o.Round, expires: s.now.Add(s.lease)}
	s.check(n)
	s.at(s.now.Add(s.lease), func() { s.expireLease(n, o.Claim, o.Round) })
	s.send(func() { s.step(Accepted{Claim: o.Claim, Node: n.name, Driver: o.Driver, Round: o.Round}) })
	s.report()
}

// onRecord is a node seeing a replicated change of a claim.
func (s *sim) onRecord(n *simNode, claim string) {
	if !n.alive {
		return
	}
	c := s.claims[claim]
	r, has := n.resv[claim]
	mine := c.phase == types.ClaimRequested && c.node == n.name
	switch {
	case mine && has && r.round == c.round:
		s.release(n, claim)
		n.used = n.used.Add(c.req.Resources)
		n.machines[claim] = c.round
		c.phase, c.boundAt = types.ClaimBound, s.now
		s.at(s.now.Add(s.net.delay), func() { s.step(ClaimGone{Claim: claim}) })
	case mine && !has:
		// Our lease ran out before the record came: check again, or give back.
		if ok, _ := Reserve(WithUsage(n.cap, n.used, n.reserved), c.req.Resources, c.req.AllowOverbook); ok {
			n.used = n.used.Add(c.req.Resources)
			n.machines[claim] = c.round
			c.phase, c.boundAt = types.ClaimBound, s.now
			s.at(s.now.Add(s.net.delay), func() { s.step(ClaimGone{Claim: claim}) })
		} else {
			c.node, c.round = "", c.round+1
			s.at(s.now.Add(s.net.delay), func() {
				s.step(ClaimRequested{Claim: claim, Request: c.req, Round: c.round, Deadline: c.deadline})
			})
		}
	case has:
		s.release(n, claim) // fenced: recorded elsewhere, another round, failed or deleted
	}
	if round, ok := n.machines[claim]; ok && (c.phase == types.ClaimTerminated || c.node != n.name || c.round != round) {
		n.used = n.used.Sub(c.req.Resources)
		delete(n.machines, claim)
	}
	s.check(n)
	s.report()
}

func (s *sim) expireLease(n *simNode, claim string, round uint64) {
	if r, ok := n.resv[claim]; ok && r.round == round && n.alive {
		s.release(n, claim)
		s.report()
	}
}

func (s *sim) release(n *simNode, claim string) {
	if _, ok := n.resv[claim]; ok {
		delete(n.resv, claim)
		n.reserved = n.reserved.Sub(s.claims[claim].req.Resources)
	}
}

// check is the invariant every node keeps: never over-commit.
func (s *sim) check(n *simNode) {
	s.t.Helper()
	taken := n.used.Add(n.reserved)
	if taken.CPU > n.cap.Usable.CPU+1e-9 {
		s.t.Errorf("%s over-committed at %s: %.1f of %.1f CPUs", n.name, s.now.Sub(t0), taken.CPU, n.cap.Usable.CPU)
	}
	if n.reserved.CPU < -1e-9 || n.used.CPU < -1e-9 {
		s.t.Errorf("%s negative usage: used %.1f reserved %.1f", n.name, n.used.CPU, n.reserved.CPU)
	}
}

// report sends every node's capacity to the elector after reportDelay,
// coalescing changes that happen in between.
func (s *sim) report() {
	if s.reporting {
		return
	}
	s.reporting = true
	s.at(s.now.Add(s.reportDelay), func() {
		s.reporting = false
		s.step(CandidatesChanged{Candidates: s.snapshot()})
	})
}

func (s *sim) snapshot() []Candidate {
	out := make([]Candidate, 0, len(s.nodes))
	for _, n := range s.nodes {
		if n.alive {
			n.reported = WithUsage(n.cap, n.used, n.reserved)
		}
		out = append(out, s.candidate(n, n.reported))
	}
	return out
}

func (s *sim) candidate(n *simNode, c types.Capacity) Candidate {
	return Candidate{Node: n.name, Driver: "test", DriverType: "test", Alive: !n.down, Capacity: c}
}

// run processes events and elector timeouts up to until.
func (s *sim) run(until time.Time) {
	for i := 0; ; i++ {
		if i > 1_000_000 {
			s.t.Fatal("simulation does not settle")
		}
		dl, hasDL := s.e.NextDeadline()
		switch {
		case len(s.q) > 0 && !s.q[0].at.After(until) && (!hasDL || !s.q[0].at.After(dl)):
			ev := heap.Pop(&s.q).(simEvent)
			if ev.at.After(s.now) {
				s.now = ev.at
			}
			ev.fn()
		case hasDL && !dl.After(until):
			if dl.After(s.now) {
				s.now = dl
			}
			s.step(Timeout{})
		default:
			if until.After(s.now) {
				s.now = until
			}
			return
		}
	}
}

// count returns how many claims are in phase p.
func (s *sim) count(p types.ClaimPhase) int {
	n := 0
	for _, c := range s.claims {
		if c.phase == p {
			n++
		}
	}
	return n
}

// machines returns claim -> nodes holding a machine for it.
func (s *sim) machines() map[string][]string {
	out := map[string][]string{}
	for _, n := range s.nodes {
		for c := range n.machines {
			out[c] = append(out[c], n.name)
		}
	}
	return out
}
