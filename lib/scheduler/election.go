package scheduler

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hf-fleet/hf/lib/internal/intern"
	"github.com/hf-fleet/hf/lib/types"
)

// DefaultOfferTimeout is used when NewElector gets no positive timeout. An offer
// is a direct send plus one small persisted write on the candidate: well under
// 100 ms on a LAN, so two seconds only trips on a node that is really stuck.
const DefaultOfferTimeout = 2 * time.Second

// phase is where one claim is in its election.
type phase int

const (
	// phaseOffering: one offer is out and unanswered.
	phaseOffering phase = iota
	// phaseWaiting: nothing fits; waiting for CandidatesChanged or the deadline.
	phaseWaiting
	// phaseAccepted: a node accepted; it allocates and binds, or gives up.
	phaseAccepted
	// phaseFailed: Fail was emitted; kept until ClaimGone so echoes stay quiet.
	phaseFailed
)

// offer is the claim's current offer (phaseOffering) or acceptance (phaseAccepted).
type offer struct {
	node, driver string
	round        uint64
	expires      time.Time
	// resent counts the times the offer was sent again, unanswered.
	resent int
}

// offerResends is how many times an unanswered offer is sent again, to a
// node still alive, before the claim moves on to another node at the next
// round. The candidate answers a repeated offer as it did the first (it
// holds the reservation already), so a lost offer or answer costs a resend,
// not a machine: moving on would replace one the candidate had bound.
const offerResends = 2

// claimState is everything the elector knows about one claim.
type claimState struct {
	name     string
	req      Request
	deadline time.Time
	// round is the highest round known or used; the next offer uses round+1.
	round uint64
	phase phase
	offer offer
	// tried holds nodes that declined, did not answer or gave the claim back
	// since the claim last waited; CandidatesChanged clears it for waiting
	// claims. lastDecline is what became of the last of those tries.
	tried       map[string]bool
	lastDecline string
	// triedOnce holds every node tried since the elector took the claim up,
	// for its reason: tried is cleared for a new pass, and a node tried in
	// an earlier pass has been offered the claim.
	triedOnce map[string]bool
	// refused holds the nodes of this pass that declined the claim or gave
	// it back (not those that did not answer, or left: they may have
	// accepted it); cleared with tried. refusedPasses counts the passes in
	// a row that ended with every node that fits among them, the first of
	// them ending at refusedSince.
	refused       map[string]bool
	refusedPasses int
	refusedSince  time.Time
}

// try notes that node declined, did not answer or gave the claim back.
func (st *claimState) try(node string) {
	st.tried[node] = true
	if st.triedOnce == nil {
		st.triedOnce = map[string]bool{}
	}
	st.triedOnce[node] = true
}

// hold is capacity the elector counts against a candidate on top of its last
// report: a pending offer, or an acceptance the report may not show yet.
type hold struct {
	key      string
	node     string
	res      types.Resources
	accepted bool
}

// Elector is the per-claim offer/accept state machine of the node that elects
// a set of claims (see doc.go). It does no I/O and reads no clock: the shell
// feeds inputs with the current time and carries out the actions returned, in
// order. Two electors fed the same inputs return the same actions. An Elector
// is not safe for concurrent use; the shell serialises Step calls.
type Elector struct {
	offerTimeout time.Duration
	// refusedPasses fails a claim that every node that fits refused in as
	// many passes in a row, over MinRefusedSpan at least (0: never; it
	// waits for its bind deadline).
	refusedPasses int
	claims        map[string]*claimState
	cands         []Candidate
	// holds: claim -> capacity held for it; extra: candidate key -> sum of holds.
	holds map[string]hold
	extra map[string]extraRes
	// freed is set when a pending hold is released during a Step.
	freed bool
}

// extraRes is the sum of holds on one candidate; n lets it be dropped (and any
// float residue with it) when the last hold goes.
type extraRes struct {
	res types.Resources
	n   int
}

// NewElector returns an empty Elector whose offers expire after offerTimeout
// (DefaultOfferTimeout when offerTimeout is not positive).
func NewElector(offerTimeout time.Duration) *Elector {
	return NewElectorRefusing(offerTimeout, 0)
}

// MinRefusedSpan is the least time over which every node that fits must
// have refused a claim, pass after pass, before the elector fails it: a
// node whose allocations fail for a moment (its container engine
// restarting) is given that long to recover.
const MinRefusedSpan = time.Minute

// DefaultRefusedPasses is scheduler.max_refused_passes' default.
const DefaultRefusedPasses = 3

// NewElectorRefusing is NewElector whose claims fail once every node that
// fits has declined them or given them back (an image missing from every
// engine, a configuration no driver takes) in refusedPasses passes in a
// row over MinRefusedSpan, rather than wait for their bind deadline (5
// minutes by default, up to 24 h) to say so. 0 turns that off.
func NewElectorRefusing(offerTimeout time.Duration, refusedPasses int) *Elector {
	if offerTimeout <= 0 {
		offerTimeout = DefaultOfferTimeout
	}
	return &Elector{
		offerTimeout:  offerTimeout,
		refusedPasses: max(refusedPasses, 0),
		claims:        map[string]*claimState{},
		holds:         map[string]hold{},
		extra:         map[string]extraRes{},
	}
}

// Step applies one input at time now and returns the actions to carry out.
func (e *Elector) Step(now time.Time, in Input) []Action {
	e.freed = false
	var out []Action
	switch in := in.(type) {
	case ClaimRequested:
		out = e.requested(now, in)
	case CandidatesChanged:
		out = e.candidatesChanged(now, in)
	case Accepted:
		out = e.accepted(in)
	case Declined:
		out = e.declined(now, in)
	case GaveBack:
		if st, ok := e.claims[in.Claim]; ok && st.phase == phaseAccepted && st.offer.node == in.Node && st.offer.round == in.Round {
			out = e.giveUp(now, st, in.Reason, true)
		}
	case Timeout:
		out = e.timeout(now, in)
	case NodeDown:
		out = e.nodeDown(now, in)
	case ClaimGone:
		e.gone(in.Claim)
	case ClaimAccepted:
		if st, ok := e.claims[in.Claim]; ok && (st.phase != phaseAccepted || st.offer.node != in.Node || st.offer.round != in.Round) {
			e.gone(in.Claim)
		}
	}
	// Waking only offers or waits, it never releases, so this runs once.
	if e.freed {
		e.freed = false
		out = append(out, e.wake(now)...)
	}
	return out
}

// NextDeadline is the earliest time at which Step(now, Timeout{}) has work: an
// offer expiring or a claim's bind deadline. The shell arms one timer for it.
func (e *Elector) NextDeadline() (time.Time, bool) {
	var next time.Time
	found := false
	consider := func(t time.Time) {
		if !t.IsZero() && (!found || t.Before(next)) {
			next, found = t, true
		}
	}
	for _, st := range e.claims {
		switch st.phase {
		case phaseOffering:
			consider(st.offer.expires)
			consider(st.deadline)
		case phaseWaiting:
			consider(st.deadline)
		}
	}
	return next, found
}

// Compact remakes the elector's maps at the size of what they hold (see
// intern.Shrunk): after a burst they keep the room of every claim that was
// in flight at once. Nothing it decides changes.
func (e *Elector) Compact() {
	e.claims, e.holds, e.extra = intern.Shrunk(e.claims), intern.Shrunk(e.holds), intern.Shrunk(e.extra)
}

// Pending returns the claims the elector is working on (offering, waiting, or
// accepted and not yet bound), sorted.
func (e *Elector) Pending() []string {
	var out []string
	for name, st := range e.claims {
		if st.phase != phaseFailed {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func (e *Elector) requested(now time.Time, in ClaimRequested) []Action {
	st, ok := e.claims[in.Claim]
	if !ok {
		st = &claimState{name: in.Claim, req: in.Request, deadline: in.Deadline, round: in.Round, tried: map[string]bool{},
			lastDecline: in.Reason}
		for node := range in.Request.Exclude {
			st.try(node)
		}
		e.claims[in.Claim] = st
		return e.resume(now, st, in.AcceptedBy)
	}
	if st.phase == phaseFailed {
		return nil
	}
	st.req, st.deadline = in.Request, in.Deadline
	if in.Round <= st.round {
		return nil // an echo of what we did, or older news
	}
	// Someone moved the claim to a higher round without us: another elector
	// during a membership change, or the serving node gave the claim back.
	st.round = in.Round
	e.release(st.name)
	if st.phase == phaseAccepted && in.AcceptedBy == "" {
		st.try(st.offer.node)
		st.lastDecline = in.Reason
		if st.lastDecline == "" {
			st.lastDecline = fmt.Sprintf("node %s gave the claim back", st.offer.node)
		}
	}
	return e.resume(now, st, in.AcceptedBy)
}

// resume continues a claim whose status names acceptedBy (or nobody): a live
// recorded node goes on with it, otherwise the claim is elected again.
func (e *Elector) resume(now time.Time, st *claimState, acceptedBy string) []Action {
	if acceptedBy != "" {
		if e.nodeAlive(acceptedBy) {
			st.phase = phaseAccepted
			st.offer = offer{node: acceptedBy, round: st.round}
			return nil
		}
		st.try(acceptedBy)
		st.lastDecline = fmt.Sprintf("node %s accepted round %d but is gone", acceptedBy, st.round)
	}
	// No offer is out; phaseOffering makes next emit Waiting if nothing fits.
	st.phase, st.offer = phaseOffering, offer{}
	return e.next(now, st)
}

func (e *Elector) candidatesChanged(now time.Time, in CandidatesChanged) []Action {
	e.cands = slices.Clone(in.Candidates)
	// A fresh report counts every reservation its node accepted.
	for _, name := range slices.Sorted(maps.Keys(e.holds)) {
		if e.holds[name].accepted {
			e.unhold(name)
		}
	}
	var out []Action
	for _, st := range e.sorted() {
		switch st.phase {
		case phaseOffering:
			if !e.nodeAlive(st.offer.node) && in.Quorum {
				out = append(out, e.giveUp(now, st, fmt.Sprintf("node %s left with the offer unanswered", st.offer.node), false)...)
			}
		case phaseWaiting:
			clear(st.tried)
			clear(st.refused)
			out = append(out, e.next(now, st)...)
		}
	}
	return out
}

func (e *Elector) accepted(in Accepted) []Action {
	st := e.matching(in.Claim, in.Node, in.Round)
	if st == nil || (in.Driver != "" && in.Driver != st.offer.driver) {
		return nil
	}
	st.phase = phaseAccepted
	if h, ok := e.holds[st.name]; ok {
		h.accepted = true
		e.holds[st.name] = h
	}
	return []Action{RecordAccepted{Claim: st.name, Node: st.offer.node, Driver: st.offer.driver, Round: st.offer.round}}
}

func (e *Elector) declined(now time.Time, in Declined) []Action {
	st := e.matching(in.Claim, in.Node, in.Round)
	if st == nil {
		return nil
	}
	if in.Fresh != nil {
		e.refresh(*in.Fresh)
	}
	reason := in.Reason
	if reason == "" {
		reason = "no reason given"
	}
	return e.giveUp(now, st, fmt.Sprintf("node %s declined: %s", in.Node, reason), true)
}

func (e *Elector) timeout(now time.Time, in Timeout) []Action {
	var out []Action
	for _, st := range e.sorted() {
		if st.phase != phaseOffering && st.phase != phaseWaiting {
			continue
		}
		if e.expired(now, st) {
			out = append(out, e.fail(st)...)
			continue
		}
		if st.phase == phaseOffering && !now.Before(st.offer.expires) {
			if in.NoQuorum {
				st.offer.expires = now.Add(e.offerTimeout)
				out = append(out, Waiting{Claim: st.name, Reason: fmt.Sprintf(
					"offer to node %s (round %d) is unanswered, and without a majority of the cluster this node cannot tell it was not accepted",
					st.offer.node, st.offer.round)})
				continue
			}
			if st.offer.resent < offerResends && e.nodeAlive(st.offer.node) {
				st.offer.resent++
				st.offer.expires = now.Add(e.offerTimeout)
				out = append(out, SendOffer{Claim: st.name, Node: st.offer.node, Driver: st.offer.driver, Round: st.offer.round})
				continue
			}
			why := fmt.Sprintf("node %s did not answer the offer in %d tries of %s", st.offer.node, offerResends+1, e.offerTimeout)
			out = append(out, e.giveUp(now, st, why, false)...)
		}
	}
	return out
}

// OffersExpired reports whether an offer is unanswered past its timeout at
// now (Timeout would give it up, given a quorum).
func (e *Elector) OffersExpired(now time.Time) bool {
	for _, st := range e.claims {
		if st.phase == phaseOffering && !now.Before(st.offer.expires) {
			return true
		}
	}
	return false
}

func (e *Elector) nodeDown(now time.Time, in NodeDown) []Action {
	for i := range e.cands {
		if e.cands[i].Node == in.Node {
			e.cands[i].Alive = false
		}
	}
	var out []Action
	for _, st := range e.sorted() {
		if st.offer.node != in.Node {
			continue
		}
		switch st.phase {
		case phaseOffering:
			if in.Quorum {
				out = append(out, e.giveUp(now, st, fmt.Sprintf("node %s went down with the offer unanswered", in.Node), false)...)
			}
		case phaseAccepted:
			if in.Quorum {
				out = append(out, e.giveUp(now, st, fmt.Sprintf("node %s went down before binding the claim", in.Node), false)...)
			}
		}
	}
	// Whatever else the dead node held is gone with it.
	for _, name := range slices.Sorted(maps.Keys(e.holds)) {
		if e.holds[name].node == in.Node {
			e.unhold(name)
		}
	}
	return out
}

func (e *Elector) gone(claim string) {
	if _, ok := e.claims[claim]; !ok {
		return
	}
	delete(e.claims, claim)
	// An accepted claim keeps using its node's capacity (now as a machine)
	// until the next report shows it; a pending offer is dropped.
	e.release(claim)
}

// matching returns the claim when (node, round) is its pending offer, else nil:
// answers to older offers are stale and change nothing.
func (e *Elector) matching(claim, node string, round uint64) *claimState {
	st, ok := e.claims[claim]
	if !ok || st.phase != phaseOffering || st.offer.node != node || st.offer.round != round {
		return nil
	}
	return st
}

// giveUp excludes the claim's offered (or accepting) node and elects again;
// refused says the node declined the claim or gave it back.
func (e *Elector) giveUp(now time.Time, st *claimState, why string, refused bool) []Action {
	st.try(st.offer.node)
	if refused {
		if st.refused == nil {
			st.refused = map[string]bool{}
		}
		st.refused[st.offer.node] = true
	}
	st.lastDecline = why
	e.release(st.name)
	st.phase, st.offer = phaseOffering, offer{}
	return e.next(now, st)
}

// next offers the claim to the best candidate not tried yet, or makes it wait,
// or fails it when its deadline has passed.
func (e *Elector) next(now time.Time, st *claimState) []Action {
	if e.expired(now, st) {
		return e.fail(st)
	}
	req := st.req
	req.Exclude = st.tried
	ranked := Rank(req, e.view())
	if len(ranked) == 0 {
		if st.phase == phaseWaiting {
			return nil
		}
		if out := e.passRefused(now, st); out != nil {
			return out
		}
		st.phase = phaseWaiting
		return []Action{Waiting{Claim: st.name, Reason: e.reason(st)}}
	}
	best := ranked[0]
	st.round++
	st.phase = phaseOffering
	st.offer = offer{node: best.Node, driver: best.Driver, round: st.round, expires: now.Add(e.offerTimeout)}
	e.hold(st.name, hold{key: best.key(), node: best.Node, res: req.Resources})
	return []Action{SendOffer{Claim: st.name, Node: best.Node, Driver: best.Driver, Round: st.round}}
}

func (e *Elector) expired(now time.Time, st *claimState) bool {
	return !st.deadline.IsZero() && !now.Before(st.deadline)
}

func (e *Elector) fail(st *claimState) []Action {
	return e.failWith(st, "not bound within its bind timeout: "+e.reason(st))
}

func (e *Elector) failWith(st *claimState, reason string) []Action {
	st.phase = phaseFailed
	e.release(st.name)
	return []Action{Fail{Claim: st.name, Reason: reason}}
}

// passRefused ends a pass over the nodes (every one tried): when every node
// that fits declined the claim or gave it back, it counts the pass, and
// fails the claim once refusedPasses such passes in a row took
// MinRefusedSpan at least. A pass with a node that did not answer, or one
// that fits and was not offered the claim, starts the count again.
func (e *Elector) passRefused(now time.Time, st *claimState) []Action {
	if e.refusedPasses == 0 {
		return nil
	}
	fits := e.fitNodes(st)
	if len(fits) == 0 || slices.ContainsFunc(fits, func(n string) bool { return !st.refused[n] }) {
		st.refusedPasses = 0
		return nil
	}
	if st.refusedPasses == 0 {
		st.refusedSince = now
	}
	st.refusedPasses++
	span := now.Sub(st.refusedSince)
	if st.refusedPasses < e.refusedPasses || span < MinRefusedSpan {
		return nil
	}
	return e.failWith(st, fmt.Sprintf("every node that fits (%s) refused it, %d times in a row over %s; last: %s",
		nodeList(fits), st.refusedPasses, span.Round(time.Second), st.lastDecline))
}

// fitNodes are the nodes that fit the claim by the reports, tried or not,
// sorted.
func (e *Elector) fitNodes(st *claimState) []string {
	req := st.req
	req.Exclude = nil
	ranked := Rank(req, e.view())
	// A node fits once per driver of it that does.
	fits := make([]string, 0, len(ranked))
	for _, r := range ranked {
		fits = append(fits, r.Node)
	}
	slices.Sort(fits)
	return slices.Compact(fits)
}

// reason explains why the claim is not placed: what stops every candidate by
// the reports, else what became of it on the nodes that fit (the last
// decline, unanswered offer or give-back, which says what failed there).
func (e *Elector) reason(st *claimState) string {
	if st.phase == phaseOffering && st.offer.node != "" {
		return fmt.Sprintf("offer to node %s (round %d) is unanswered", st.offer.node, st.offer.round)
	}
	fits := e.fitNodes(st)
	if len(fits) == 0 {
		req := st.req
		req.Exclude = nil
		return NoFitReason(req, e.view())
	}
	var untried []string
	for _, node := range fits {
		if !st.triedOnce[node] {
			untried = append(untried, node)
		}
	}
	switch {
	case len(untried) > 0 && st.lastDecline != "":
		// Its deadline came before it went on to the others.
		return fmt.Sprintf("%s; not yet offered to %s", st.lastDecline, nodeList(untried))
	case len(untried) > 0:
		return "not yet offered to " + nodeList(untried)
	case st.lastDecline != "":
		return fmt.Sprintf("every node that fits (%s) was tried; last: %s", nodeList(fits), st.lastDecline)
	}
	return fmt.Sprintf("every node that fits (%s) was tried", nodeList(fits))
}

// nodeList names nodes for a reason: a few, then how many more.
func nodeList(nodes []string) string {
	const shown = 3
	if len(nodes) <= shown {
		return strings.Join(nodes, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(nodes[:shown], ", "), len(nodes)-shown)
}

// view is the candidates with the elector's holds added to their reservations.
func (e *Elector) view() []Candidate {
	out := slices.Clone(e.cands)
	for i, c := range out {
		if x, ok := e.extra[c.key()]; ok {
			out[i].Capacity = WithUsage(c.Capacity, c.Capacity.Used, c.Capacity.Reserved.Add(x.res))
		}
	}
	return out
}

// refresh replaces one candidate with the node's own fresh view of it; that view
// counts the node's accepted reservations, so the elector's holds on it go.
func (e *Elector) refresh(c Candidate) {
	i := slices.IndexFunc(e.cands, func(o Candidate) bool { return o.key() == c.key() })
	if i < 0 {
		e.cands = append(e.cands, c)
	} else {
		e.cands[i] = c
	}
	for _, name := range slices.Sorted(maps.Keys(e.holds)) {
		if h := e.holds[name]; h.accepted && h.key == c.key() {
			e.unhold(name)
		}
	}
}

func (e *Elector) hold(claim string, h hold) {
	e.unhold(claim)
	e.holds[claim] = h
	x := e.extra[h.key]
	x.res, x.n = x.res.Add(h.res), x.n+1
	e.extra[h.key] = x
}

func (e *Elector) unhold(claim string) {
	h, ok := e.holds[claim]
	if !ok {
		return
	}
	delete(e.holds, claim)
	x := e.extra[h.key]
	x.res, x.n = x.res.Sub(h.res), x.n-1
	if x.n <= 0 {
		delete(e.extra, h.key)
		return
	}
	e.extra[h.key] = x
}

// release drops the claim's pending hold; an acceptance is kept until a report
// shows it, since the node goes on holding that capacity.
// Capacity freed that way may fit a waiting claim, so Step wakes them.
func (e *Elector) release(claim string) {
	if h, ok := e.holds[claim]; ok && !h.accepted {
		e.unhold(claim)
		e.freed = true
	}
}

// wake retries waiting claims after the elector released capacity it held for
// an offer that came to nothing. Unlike CandidatesChanged it keeps each claim's
// exclusions, so a node that never answers is tried once per claim, not in a
// loop. Without it, an offer lost on the wire would leave its room idle until
// the next report, and a quiet node sends none.
func (e *Elector) wake(now time.Time) []Action {
	var out []Action
	for _, st := range e.sorted() {
		if st.phase == phaseWaiting {
			out = append(out, e.next(now, st)...)
		}
	}
	return out
}

func (e *Elector) nodeAlive(node string) bool {
	return slices.ContainsFunc(e.cands, func(c Candidate) bool { return c.Node == node && c.Alive })
}

// sorted returns the claims in name order, so that actions come out the same
// on every run.
func (e *Elector) sorted() []*claimState {
	names := slices.Sorted(maps.Keys(e.claims))
	out := make([]*claimState, len(names))
	for i, n := range names {
		out[i] = e.claims[n]
	}
	return out
}
