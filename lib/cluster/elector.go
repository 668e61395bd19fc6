package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/cluster/internal/queue"
	"github.com/hf-fleet/hf/lib/cluster/internal/workqueue"
	"github.com/hf-fleet/hf/lib/cluster/wire"
	"github.com/hf-fleet/hf/lib/internal/intern"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Special work keys of the elector; claim names never start with '!'.
const (
	keyAnswers   = "!answers"   // offers and takes answered
	keyRefresh   = "!refresh"   // candidates' capacity changed
	keyMembers   = "!members"   // membership changed
	keyTimeout   = "!timeout"   // the pure elector's next deadline
	keyRequested = "!requested" // look at every Requested claim again
	keyTemplate  = "!template/" // + template: claims of it may route differently now
	keyRetry     = "!retry"     // write again what the store refused
	keyCompact   = "!compact"   // the node is idle: hand back the burst's room
)

// elector elects the serving node of the claims this node is the elector of:
// the claim's rendezvous owner, or for a claim of an OnDemand set or under an
// environment's cap, the set's or environment's owner (so that one node
// counts what is under way). It owns a scheduler.Elector, fed and carried
// out on one goroutine (the workqueue's worker): claim keys go through
// scheduler.DecideClaim and the routing of pools; offers' answers and the
// elector's deadlines are its other keys.
type elector struct {
	n       *Node
	q       *workqueue.Queue
	answers *queue.Queue[Message]

	// The rest belongs to the worker goroutine.
	e        *scheduler.Elector
	members  map[string]bool
	takes    map[string]string // claim -> warm machine asked for
	onDemand map[string]string // claim -> OnDemand set it is elected for
	capped   map[string]string // claim -> environment cap key it counts against
	waiting  map[string]string // claim -> template, for claims waiting for a set
	// issued is the highest round this node has used for a claim (in a
	// take or an offer): an answer lost on the way leaves the replica at
	// the older round, and a round must never be asked of two nodes.
	issued map[string]uint64
	// accepted are the acceptances one handle recorded: their election
	// facets are written together when it ends (flushAccepted), so they
	// share the store's group commits instead of waiting for one each.
	accepted []acceptedWrite
	// failed are the election writes the store refused (its disk full,
	// say), the last of each claim, written again every electionRetry
	// until they land or a later write of the claim takes their place:
	// the pure elector goes on from what it decided, so a write lost
	// here left the claim Requested until its deadline (and a lost
	// Failed, for ever). Set by writes that run side by side.
	failedMu sync.Mutex
	failed   map[string]failedWrite
	due      time.Time // when keyTimeout is asked for
	// awaitProbe: keyTimeout waits for a probe of the members to answer.
	awaitProbe bool
}

func newElector(n *Node) *elector {
	return &elector{
		n: n, q: workqueue.New(nil), answers: queue.New[Message](),
		e:     scheduler.NewElectorRefusing(n.cfg.OfferTimeout, n.cfg.MaxRefusedPasses),
		takes: map[string]string{}, onDemand: map[string]string{}, capped: map[string]string{}, waiting: map[string]string{},
		issued: map[string]uint64{}, failed: map[string]failedWrite{},
	}
}

// electionRetry is how long a refused election write waits to be tried again.
const electionRetry = time.Second

func (el *elector) start() {
	el.members = map[string]bool{}
	for _, m := range el.n.view.live() {
		el.members[m] = true
	}
	el.q.Add(keyRefresh)
	el.n.spawn(el.workLoop)
}

func (el *elector) stop() { el.q.ShutDown() }

// deliver takes an answer to an offer or a take. It never blocks.
func (el *elector) deliver(m Message) {
	el.answers.Push(m)
	el.q.Add(keyAnswers)
}

// refresh asks for the candidates to be read again. It never blocks.
func (el *elector) refresh() { el.q.Add(keyRefresh) }

// offerProbeAge is how old a probe may be for the elector to give up an
// unanswered offer on it: younger than the offer, so a partition that began
// after the offer went out shows.
const offerProbeAge = 500 * time.Millisecond

// probed is called when a probe of the members has answered.
func (el *elector) probed() {
	el.q.Add(keyTimeout)
	el.q.Add(keyMembers)
}

// membersChanged never blocks.
func (el *elector) membersChanged() { el.q.Add(keyMembers) }

// changed queues what a change concerns. It never blocks.
func (el *elector) changed(kind, name string, old, obj types.Object) {
	switch kind {
	case types.KindMachineClaim:
		el.q.Add(name)
	case types.KindMachine:
		for _, o := range []types.Object{old, obj} {
			if m, ok := o.(*types.Machine); ok {
				if m.Spec.Claim != "" {
					el.q.Add(m.Spec.Claim)
				}
				if m.Spec.MachineSet != "" || m.Spec.Environment != "" {
					el.q.Add(keyTemplate + m.Spec.MachineTemplate)
				}
			}
		}
	case types.KindMachineTemplate:
		// Only claims already here can route differently; one that comes
		// later queues itself. (A node loading a million templates queues
		// none for the few with claims.)
		if el.n.cache.Count(idxClaimTemplate, name) > 0 {
			el.q.Add(keyTemplate + name)
		}
	case types.KindMachineSet:
		for _, o := range []types.Object{old, obj} {
			if s, ok := o.(*types.MachineSet); ok {
				el.q.Add(keyTemplate + s.Spec.MachineTemplate)
			}
		}
	case types.KindEnvironment, types.KindScheduledEvent:
		el.q.Add(keyRequested)
	}
}

func (el *elector) workLoop() {
	for {
		key, ok := el.q.Get()
		if !ok {
			return
		}
		el.handle(key)
		el.flushAccepted()
		el.q.Done(key)
		el.arm()
	}
}

func (el *elector) handle(key string) {
	now := el.n.cfg.Now()
	switch {
	case key == keyAnswers:
		for _, m := range el.answers.Drain() {
			el.answered(now, m)
		}
	case key == keyRefresh:
		el.execute(el.e.Step(now, scheduler.CandidatesChanged{Candidates: el.candidates(), Quorum: el.n.view.quorum()}))
	case key == keyMembers:
		el.membership(now)
	case key == keyTimeout:
		el.due, el.awaitProbe = time.Time{}, false
		// Giving up an unanswered offer is a verdict on the node it went
		// to: it needs a majority confirmed now (the probe's answer queues
		// keyTimeout again).
		quorum := true
		if el.e.OffersExpired(now) {
			var answered bool
			if quorum, answered = el.n.view.confirmQuorum(offerProbeAge); !answered {
				el.awaitProbe = true
				return
			}
		}
		el.execute(el.e.Step(now, scheduler.Timeout{NoQuorum: !quorum}))
	case key == keyRetry:
		el.retryFailed()
	case key == keyCompact:
		el.compact()
	case key == keyRequested:
		// By name: a packed claim is not decoded to be queued.
		for _, name := range el.n.cache.Names(idxClaimPhase, string(types.ClaimRequested)) {
			el.q.Add(name)
		}
	case strings.HasPrefix(key, keyTemplate):
		tmpl := strings.TrimPrefix(key, keyTemplate)
		for _, name := range el.n.cache.Intersect(idxClaimTemplate, tmpl, idxClaimPhase, string(types.ClaimRequested)) {
			el.q.Add(name)
		}
	default:
		el.reconcile(now, key)
	}
}

// arm asks for keyTimeout at the pure elector's next deadline.
func (el *elector) arm() {
	d, ok := el.e.NextDeadline()
	if !ok || el.awaitProbe || (!el.due.IsZero() && !d.Before(el.due)) {
		return
	}
	el.due = d
	el.q.AddAfter(keyTimeout, d.Sub(el.n.cfg.Now()))
}

// membership tells the pure elector which members went, and looks at every
// Requested claim again: some have another elector now, some wait for a
// majority.
func (el *elector) membership(now time.Time) {
	cur := map[string]bool{}
	for _, m := range el.n.view.live() {
		cur[m] = true
	}
	quorum := el.n.view.quorum()
	for m := range el.members {
		if !cur[m] {
			el.n.log.Info("member gone", "member", m, "quorum", quorum)
			el.execute(el.e.Step(now, scheduler.NodeDown{Node: m, Quorum: quorum}))
		}
	}
	for m := range cur {
		if !el.members[m] {
			el.n.log.Info("member joined", "member", m)
		}
	}
	el.members = cur
	el.execute(el.e.Step(now, scheduler.CandidatesChanged{Candidates: el.candidates(), Quorum: quorum}))
	el.q.Add(keyRequested)
}

// forget drops the elector's interest in a claim.
func (el *elector) forget(now time.Time, name string) {
	el.execute(el.e.Step(now, scheduler.ClaimGone{Claim: name}))
	delete(el.waiting, name)
}

// reconcile decides about one claim (scheduler.DecideClaim) and acts.
func (el *elector) reconcile(now time.Time, name string) {
	c, ok := el.n.claim(name)
	if !ok {
		el.forget(now, name)
		delete(el.takes, name)
		delete(el.onDemand, name)
		delete(el.capped, name)
		delete(el.issued, name)
		return
	}
	cs := el.n.claimState(c)
	if el.issued[name] <= cs.Round() {
		delete(el.issued, name) // the replica has caught up
	}
	lost := ""
	if c.Status.Phase == types.ClaimBound {
		if m, ok := el.n.machine(c.Status.Machine); ok && m.LostHolds() {
			lost = m.Status.Lost.Reason
		}
	}
	policy := types.LostRebind
	if t, ok := el.n.template(c.Spec.MachineTemplate); ok && t.Spec.OnNodeLoss != "" {
		policy = t.Spec.OnNodeLoss
	}
	capped := policy == types.LostRebind && el.n.cfg.MaxRebinds > 0 && cs.Election.Rebinds >= el.n.cfg.MaxRebinds
	if capped {
		policy = types.LostFail
	}
	d := scheduler.DecideClaim(cs, c.Status.Phase, lost, policy, el.n.view.alive, el.n.view.quorum())
	if capped && d.Action == scheduler.FailLost {
		d.Reason += fmt.Sprintf("; bound again %d times after its machine died, hf gives up (scheduler.max_rebinds)", cs.Election.Rebinds)
	}
	el.n.log.Debug("claim decision", "claim", name, "phase", c.Status.Phase, "action", d.Action, "round", d.Round, "exclude", d.Exclude, "accepted_by", d.AcceptedBy)
	switch d.Action {
	case scheduler.Forget, scheduler.Wait:
		if d.Action == scheduler.Forget && d.AcceptedBy != "" {
			// Accepted by a live node that works on it: the pure elector
			// keeps the nodes it tried, so that a give-back goes on to one
			// not tried yet (forgotten, it would start over excluding only
			// the last: two nodes whose allocations fail took turns until
			// the bind timeout while a third could serve the claim).
			el.execute(el.e.Step(now, scheduler.ClaimAccepted{Claim: name, Node: d.AcceptedBy, Round: d.Round}))
			delete(el.waiting, name)
			break
		}
		el.forget(now, name)
		if c.Status.Phase != types.ClaimRequested {
			delete(el.onDemand, name)
			delete(el.capped, name)
		}
	case scheduler.Rebind, scheduler.FailLost:
		el.forget(now, name)
		if el.n.view.mine(name) {
			e := types.ClaimElection{Round: d.Round, Failed: d.Action == scheduler.FailLost, Reason: d.Reason, At: now}
			if d.Action == scheduler.Rebind {
				e.Rebinds, e.RebindAt = cs.Election.Rebinds+1, now
			}
			el.writeElection(name, e)
			el.n.log.Info("claim handed back", "claim", name, "round", d.Round, "failed", d.Action == scheduler.FailLost, "reason", d.Reason)
		}
	case scheduler.Elect:
		if node := d.Exclude + d.AcceptedBy; node != "" {
			// The round's node gave it back or is gone: if the elector
			// still waits for it, it elects again (else this is old news).
			el.execute(el.e.Step(now, scheduler.GaveBack{Claim: name, Node: node, Round: d.Round, Reason: d.Reason}))
		}
		el.route(now, c, cs, d)
	}
}

// request is the pure elector's request for a claim.
func (el *elector) request(c *types.MachineClaim) scheduler.Request {
	req := scheduler.Request{Claim: c.Metadata.Name, Template: c.Spec.MachineTemplate, Placement: el.n.cfg.Placement}
	t, ok := el.n.template(c.Spec.MachineTemplate)
	req.NoTemplate = !ok
	if ok {
		req.Resources = t.Spec.Resources.AtLeast(el.n.cfg.MinMachine)
		req.AllowOverbook = t.Spec.AllowOverbook
		for p := range t.Spec.ProviderConfiguration {
			req.Providers = append(req.Providers, p)
		}
		slices.Sort(req.Providers)
	}
	if c.Spec.Environment != "" {
		if o, ok := el.n.cache.Get(types.KindEnvironment, c.Spec.Environment); ok {
			env := o.(*types.Environment)
			req.NodeSelector = env.Spec.NodeSelector
			if env.Spec.Placement != "" {
				req.Placement = env.Spec.Placement
			}
		}
	}
	return req
}

// feed hands a claim to the pure elector.
func (el *elector) feed(now time.Time, c *types.MachineClaim, cs scheduler.ClaimState, d scheduler.ClaimDecision) {
	req := el.request(c)
	if d.Exclude != "" {
		req.Exclude = map[string]bool{d.Exclude: true}
	}
	el.execute(el.e.Step(now, scheduler.ClaimRequested{
		Claim: c.Metadata.Name, Request: req, Round: max(d.Round, el.issued[c.Metadata.Name]), Deadline: cs.Deadline, AcceptedBy: d.AcceptedBy,
		Reason: d.Reason,
	}))
}

// execute carries out the pure elector's actions, in order. Offers go out on
// goroutines of their own.
func (el *elector) execute(actions []scheduler.Action) {
	now := el.n.cfg.Now()
	for _, a := range actions {
		switch a := a.(type) {
		case scheduler.SendOffer:
			el.issued[a.Claim] = max(el.issued[a.Claim], a.Round)
			m := Message{Type: wire.MsgOffer, From: el.n.cfg.Name, To: a.Node, Claim: a.Claim, Node: a.Node, Driver: a.Driver, Round: a.Round,
				Set: el.onDemand[a.Claim]}
			if a.Node != el.n.cfg.Name {
				m.Records = el.records(a.Claim)
			}
			el.n.log.Debug("offer", "claim", a.Claim, "to", a.Node, "driver", a.Driver, "round", a.Round)
			el.n.spawn(func() { el.n.send(m) })
		case scheduler.RecordAccepted:
			el.accepted = append(el.accepted, acceptedWrite{a.Claim, types.ClaimElection{Round: a.Round, Node: a.Node, Driver: a.Driver, At: now}})
		case scheduler.Fail:
			el.fail(a.Claim, a.Reason)
		case scheduler.Waiting:
			el.setWaiting(a.Claim, a.Reason)
		}
	}
}

// answered feeds an answer to an offer, or ends a take.
func (el *elector) answered(now time.Time, m Message) {
	for _, rec := range m.Records {
		if rec.Kind != types.KindMachineClaim || rec.Name != m.Claim {
			continue
		}
		if _, err := el.n.st.Apply(rec); err != nil {
			el.n.log.Debug("apply answered record", "claim", m.Claim, "err", err)
		}
	}
	if m.Type == wire.MsgDecline {
		// A decline from a node whose replica shows the claim settled (bound
		// elsewhere, over) ends the offering: the claim is looked at again,
		// and forgotten, instead of offered to the next candidate.
		if c, err := store.Get[types.MachineClaim](el.n.st, types.KindMachineClaim, m.Claim); err == nil && c.Status.Phase != types.ClaimRequested {
			el.q.Add(m.Claim)
			if m.Machine != "" {
				delete(el.takes, m.Claim)
			}
			return
		}
	}
	if m.Machine != "" {
		el.takeAnswered(m)
		return
	}
	if m.Type == wire.MsgAccept {
		el.execute(el.e.Step(now, scheduler.Accepted{Claim: m.Claim, Node: m.Node, Driver: m.Driver, Round: m.Round}))
		return
	}
	var fresh *scheduler.Candidate
	if m.Fresh != nil {
		fresh = &scheduler.Candidate{Node: m.Node, Driver: m.Driver, Alive: true, Capacity: *m.Fresh}
		if in, ok := el.n.instances[m.Driver]; ok && m.Node == el.n.cfg.Name {
			fresh.DriverType = in.Type
		}
	}
	el.execute(el.e.Step(now, scheduler.Declined{Claim: m.Claim, Node: m.Node, Round: m.Round, Reason: m.Reason, Fresh: fresh}))
}

// carryRebinds keeps the claim's count of rebinds, and when it was last
// handed back, in a new election facet that does not set its own.
func carryRebinds(c *types.MachineClaim, e *types.ClaimElection) {
	cur := c.Status.Election
	if cur == nil {
		return
	}
	if e.Rebinds < cur.Rebinds {
		e.Rebinds = cur.Rebinds
	}
	if e.RebindAt.Before(cur.RebindAt) {
		e.RebindAt = cur.RebindAt
	}
}

// carryGaveBack keeps, in an acceptance of a later round, why the round
// before was given back: the binding that said so is no longer the claim's
// current one, and without it a claim whose every allocation fails (a
// machine that exits at once, an image that is not there) showed no reason
// at all until it failed at its bind timeout.
func carryGaveBack(c *types.MachineClaim, e *types.ClaimElection) {
	b := c.Status.Binding
	if e.Node == "" || e.Reason != "" || e.Failed || b == nil || b.Round >= e.Round || b.Phase != types.BindingReleased || b.Reason == "" {
		return
	}
	e.Reason = fmt.Sprintf("node %s gave round %d back: %s; round %d is node %s's", b.Node, b.Round, b.Reason, e.Round, e.Node)
}

// acceptedWrite is an election facet recording an acceptance, to be written.
type acceptedWrite struct {
	claim string
	e     types.ClaimElection
}

// flushAccepted writes the acceptances recorded so far: each claim's in
// order, the claims side by side. Every other write of the elector, and an
// offer carrying a claim's record, flushes them first, so the elector's
// writes of one claim land in the order it made them.
func (el *elector) flushAccepted() {
	w := el.accepted
	el.accepted = nil
	byKey(el.n.spawn, w, func(a acceptedWrite) string { return a.claim }, func(a acceptedWrite) { el.putElection(a.claim, a.e) })
}

// writeElection writes a claim's election facet.
func (el *elector) writeElection(claim string, e types.ClaimElection) {
	el.flushAccepted()
	el.putElection(claim, e)
}

// putElection writes a claim's election facet now.
func (el *elector) putElection(claim string, e types.ClaimElection) {
	el.write(claim, "write election", func() error {
		_, err := store.UpdateFacet(el.n.st, types.KindMachineClaim, claim, types.FacetElection, func(c *types.MachineClaim) error {
			e := e
			carryRebinds(c, &e)
			carryGaveBack(c, &e)
			if cur := c.Status.Election; cur != nil && *cur == e {
				return store.ErrNoChange
			}
			c.Status.Election = &e
			return nil
		})
		return err
	})
}

// write runs a write of claim's election facet. One the store refuses is
// logged (what as the message; once, not at each retry) and kept to be
// tried again, in place of an older one of the claim; one that lands, or
// that a gone claim or a later round makes moot, drops it.
func (el *elector) write(claim, what string, fn func() error) {
	err := fn()
	if err != nil && (isNotFound(err) || errors.Is(err, store.ErrFenced)) {
		err = nil
	}
	el.failedMu.Lock()
	defer el.failedMu.Unlock()
	if err == nil {
		delete(el.failed, claim)
		return
	}
	if _, again := el.failed[claim]; !again {
		el.n.log.Warn(what, "claim", claim, "err", err, "retry_in", electionRetry)
		if len(el.failed) == 0 {
			el.q.AddAfter(keyRetry, electionRetry)
		}
	}
	el.failed[claim] = failedWrite{what: what, fn: fn}
}

// failedWrite is an election write the store refused.
type failedWrite struct {
	what string
	fn   func() error
}

// compact remakes the elector's maps and its queue's at the size of what
// they hold (see intern.Shrunk); the node's Cool asks for it (keyCompact).
func (el *elector) compact() {
	el.e.Compact()
	el.members, el.takes, el.onDemand = intern.Shrunk(el.members), intern.Shrunk(el.takes), intern.Shrunk(el.onDemand)
	el.capped, el.waiting, el.issued = intern.Shrunk(el.capped), intern.Shrunk(el.waiting), intern.Shrunk(el.issued)
	el.failedMu.Lock()
	el.failed = intern.Shrunk(el.failed)
	el.failedMu.Unlock()
	el.q.Compact()
}

// retryFailed writes again what the store refused (see failed), and asks
// to run again while some of it still fails.
func (el *elector) retryFailed() {
	el.failedMu.Lock()
	again := maps.Clone(el.failed)
	el.failedMu.Unlock()
	for claim, w := range again {
		el.write(claim, w.what, w.fn)
	}
	el.failedMu.Lock()
	defer el.failedMu.Unlock()
	if len(el.failed) > 0 {
		el.q.AddAfter(keyRetry, electionRetry)
	}
}

// fail marks a claim Failed at its current round, keeping what went wrong
// last (it is usually what a person needs to act on).
func (el *elector) fail(name, reason string) {
	el.flushAccepted()
	now := el.n.cfg.Now()
	el.write(name, "fail claim", func() error {
		failed := reason
		_, err := store.UpdateFacet(el.n.st, types.KindMachineClaim, name, types.FacetElection, func(c *types.MachineClaim) error {
			if c.Status.Phase != types.ClaimRequested {
				return store.ErrNoChange
			}
			failed = reason
			if last := c.Status.Reason; last != "" && !strings.Contains(reason, last) {
				failed += "; last: " + last
			}
			e := types.ClaimElection{Round: el.n.claimState(c).Round(), Failed: true, Reason: failed, At: now}
			carryRebinds(c, &e)
			c.Status.Election = &e
			return nil
		})
		if err == nil {
			el.n.log.Info("claim failed", "claim", name, "reason", failed)
		}
		return err
	})
}

// setWaiting shows why a claim waits, so a person can act on it.
func (el *elector) setWaiting(name, reason string) {
	el.flushAccepted()
	el.write(name, "claim reason", func() error {
		_, err := store.UpdateFacet(el.n.st, types.KindMachineClaim, name, types.FacetElection, func(c *types.MachineClaim) error {
			if c.Status.Phase != types.ClaimRequested || c.Status.Reason == reason {
				return store.ErrNoChange
			}
			e := types.ClaimElection{Round: el.n.claimState(c).Round(), Reason: reason, At: el.n.cfg.Now()}
			carryRebinds(c, &e)
			c.Status.Election = &e
			return nil
		})
		return err
	})
}

// records are the claim's and its template's records as this node has them,
// sent with an offer or take.
func (el *elector) records(claim string) []store.Record {
	if slices.ContainsFunc(el.accepted, func(a acceptedWrite) bool { return a.claim == claim }) {
		el.flushAccepted()
	}
	rec, err := el.n.st.Get(types.KindMachineClaim, claim)
	if err != nil {
		return nil
	}
	out := []store.Record{rec}
	if c, ok := el.n.claim(claim); ok {
		// The template as the elector judged it: from the cache, which
		// keeps templates packed in the store's form.
		if t, ok := el.n.cache.Record(types.KindMachineTemplate, c.Spec.MachineTemplate); ok {
			out = append(out, t)
		} else if t, err := el.n.st.Get(types.KindMachineTemplate, c.Spec.MachineTemplate); err == nil {
			out = append(out, t)
		}
	}
	return out
}

// candidates lists every driver instance of every live member with its
// capacity: this node's from its own ledger, the others' from their Node
// objects.
func (el *elector) candidates() []scheduler.Candidate {
	n := el.n
	var out []scheduler.Candidate
	self, _ := cacheNode(n, n.cfg.Name)
	maint := self != nil && self.Spec.Maintenance
	for _, name := range n.order {
		in := n.instances[name]
		capa, _ := n.acc.capacityOf(in)
		out = append(out, scheduler.Candidate{
			Node: n.cfg.Name, Driver: in.Name, DriverType: in.Type, Remote: in.Driver.IsRemote(),
			Labels: n.cfg.Labels, Maintenance: maint, Alive: true, Capacity: capa,
		})
	}
	for _, m := range n.view.live() {
		if m == n.cfg.Name {
			continue
		}
		node, ok := cacheNode(n, m)
		if !ok {
			continue
		}
		for _, d := range node.Spec.Drivers {
			out = append(out, scheduler.Candidate{
				Node: m, Driver: d.Name, DriverType: d.Driver, Remote: d.Remote,
				Labels: node.Metadata.Labels, Maintenance: node.Spec.Maintenance, Alive: true, Capacity: d.Capacity,
			})
		}
	}
	return out
}

// send delivers m, turning a failed offer into a decline for the elector.
func (n *Node) send(m Message) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.OfferTimeout)
	defer cancel()
	if err := n.peers.Send(ctx, m); err != nil {
		// A send still under way when the wait ends may yet arrive (it goes
		// on in the background): the offer is unanswered, not declined, and
		// it times out like one (giving it up needs a majority). Any other
		// failure means it was never sent.
		inFlight := errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
		if (m.Type == wire.MsgOffer || m.Type == wire.MsgTake) && !inFlight {
			n.el.deliver(Message{Type: wire.MsgDecline, From: m.To, To: m.From, Claim: m.Claim, Node: m.To, Machine: m.Machine,
				Round: m.Round, Reason: "unreachable: " + err.Error()})
		}
		n.log.Debug("send failed", "to", m.To, "claim", m.Claim, "err", err)
	}
}
