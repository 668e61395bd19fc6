package cluster

import (
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/cluster/internal/queue"
	"github.com/hf-fleet/hf/lib/cluster/internal/workqueue"
	"github.com/hf-fleet/hf/lib/internal/intern"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// entry is one machine this node holds, as its ledger counts it.
type entry struct {
	Machine string
	Claim   string // "" for a warm machine of a pool
	// Set is the machine set the machine is of ("" none), as its spec says:
	// the health pass meters only a set's machines, and must not read each
	// machine to learn which (a packed machine is decoded to be read).
	Set    string
	Driver string
	Round  uint64
	Res    types.Resources
	Phase  types.MachinePhase
	// Resource is what the driver holds, once allocated: enough to release it
	// even when the machine record is gone. Once compacted it comes without
	// its Info, kept apart in info; whole puts it back. The health pass
	// hands drivers the resource as it is (see drivers.Driver.Status).
	Resource *types.Resource
	// info is Resource's Info as key, value pairs, when compact took it
	// out: 10,000 small maps were a tenth of an idle node's heap, and
	// half-empty spans as much again. Set Resource only with setResource.
	info []string
	// Busy: an allocation or release is under way.
	Busy bool
	// counted is what the entry adds to its driver's usage (see count).
	counted counted
}

// setResource makes res the entry's resource, Info and all.
func (e *entry) setResource(res *types.Resource) { e.Resource, e.info = res, nil }

// whole is the entry's resource with its Info: a copy when compact kept
// the Info apart, sharing the rest. For the calls that hand a driver more
// than the health pass does (release, logs, shell, Explain) and for the
// machine's record.
func (e *entry) whole() *types.Resource {
	if e.info == nil || e.Resource == nil {
		return e.Resource
	}
	r := *e.Resource
	r.Info = make(map[string]string, len(e.info)/2)
	for i := 0; i+1 < len(e.info); i += 2 {
		r.Info[e.info[i]] = e.info[i+1]
	}
	return &r
}

// counted is an entry's share of its driver's usage, as last added.
type counted struct {
	in      bool
	driver  string
	running bool
	res     types.Resources
}

// usage is what a driver instance's entries take: used by running machines,
// reserved by the others. Kept as entries change, so an offer's check does
// not sum 10,000 entries.
type usage struct {
	used, reserved types.Resources
	count          int
}

// acceptor looks after this node's own machines. Its word on them is final:
// only this node writes their records, so the ledger (entries, under mu) is
// authoritative, and mu held across check-and-reserve makes an offer's
// acceptance atomic, so the node never over-commits.
//
// Offers and takes come through inbox (one at a time); everything else is
// level-triggered work per key on q: a claim's name (what to do with this
// node's machines of it, by scheduler.DecideMachine) or "m/<machine>" for a
// warm pool machine. Driver calls run on goroutines of their own and queue
// the key again when done.
type acceptor struct {
	n     *Node
	inbox *queue.Queue[Message]
	q     *workqueue.Queue

	mu       sync.Mutex
	entries  map[string]*entry   // by machine name
	usage    map[string]*usage   // by driver instance, of entries
	byClaim  map[string][]string // claim -> machine names (mostly one: a slice, not a map each)
	failures map[string]int      // claim -> failed allocations here
}

func newAcceptor(n *Node) *acceptor {
	return &acceptor{
		n: n, inbox: queue.New[Message](), q: workqueue.New(nil),
		entries: map[string]*entry{}, usage: map[string]*usage{}, byClaim: map[string][]string{}, failures: map[string]int{},
	}
}

// poolKey is the work key of a warm machine.
func poolKey(machine string) string { return "m/" + machine }

func (a *acceptor) deliver(m Message) { a.inbox.Push(m) }

func (a *acceptor) start() {
	a.n.spawn(a.inboxLoop)
	for range acceptorWorkers {
		a.n.spawn(a.workLoop)
	}
	a.n.spawn(a.healthLoop)
}

// acceptorWorkers is how many claims the acceptor reconciles side by side
// (never one claim twice at once: the work queue hands a key to one worker).
// Their writes, a binding each, share the store's group commits; what
// several of them could change together (a machine's entry) is guarded by
// the ledger's busy mark.
const acceptorWorkers = 4

func (a *acceptor) stop() { a.q.ShutDown() }

// changed queues the keys a change concerns. It never blocks.
func (a *acceptor) changed(kind, name string, old, obj types.Object) {
	self := a.n.cfg.Name
	switch kind {
	case types.KindMachineClaim:
		if obj == nil {
			// A deleted claim is offered nowhere again: its count of
			// failed allocations here goes with it.
			a.forgetFailures(name)
		}
		if a.holds(name) || servedBy(old, self) || servedBy(obj, self) {
			a.q.Add(name)
		}
	case types.KindMachine:
		if m, ok := obj.(*types.Machine); ok && m.Spec.Node == self {
			a.shareResource(name, m.Status.Resource)
		}
		for _, o := range []types.Object{old, obj} {
			if m, ok := o.(*types.Machine); ok && m.Spec.Node == self {
				a.q.Add(a.keyOf(name, m.Spec.Claim))
			}
		}
	case types.KindSession:
		// A session pausing or resuming changes what its claim's machine does.
		for _, o := range []types.Object{old, obj} {
			if s, ok := o.(*types.Session); ok && s.Status.MachineClaim != "" && a.holds(s.Status.MachineClaim) {
				a.q.Add(s.Status.MachineClaim)
			}
		}
	}
}

// shareResource makes machine's entry hold res, the resource of its record
// as the cache holds it, in place of the driver's copy of the same
// resource: once the record has it, the node keeps one copy, not two (the
// cache's objects never change, and drivers do not change the resources
// they are given).
func (a *acceptor) shareResource(machine string, res *types.Resource) {
	if res == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if e, ok := a.entries[machine]; ok && e.Resource != nil && e.Resource != res &&
		e.Resource.ID == res.ID && e.Resource.Driver == res.Driver {
		e.setResource(res)
	}
}

// servedBy reports whether claim o names node as accepting or serving it.
func servedBy(o types.Object, node string) bool {
	c, ok := o.(*types.MachineClaim)
	if !ok {
		return false
	}
	s := c.Status
	return (s.Election != nil && s.Election.Node == node) || (s.Binding != nil && s.Binding.Node == node)
}

// keyOf is the work key of machine name, which the ledger or its record says
// is of claim.
func (a *acceptor) keyOf(machine, claim string) string {
	a.mu.Lock()
	if e, ok := a.entries[machine]; ok {
		claim = e.Claim
	}
	a.mu.Unlock()
	if claim == "" {
		return poolKey(machine)
	}
	return claim
}

// holds reports whether this node holds a machine of claim.
func (a *acceptor) holds(claim string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.byClaim[claim]) > 0
}

// putLocked adds or replaces an entry. Caller holds mu.
func (a *acceptor) putLocked(e *entry) {
	old, ok := a.entries[e.Machine]
	if ok && old.Claim != e.Claim {
		a.unindexLocked(old.Claim, old.Machine)
	}
	if old != e {
		if ok {
			a.countLocked(old, false)
		}
		e.counted = counted{} // (a copy of an entry is not counted)
	}
	a.countLocked(e, true)
	a.entries[e.Machine] = e
	if e.Claim != "" && !slices.Contains(a.byClaim[e.Claim], e.Machine) {
		a.byClaim[e.Claim] = append(a.byClaim[e.Claim], e.Machine)
	}
}

// countLocked takes e's last share out of its driver's usage and, when in,
// adds its share now. Caller holds mu.
func (a *acceptor) countLocked(e *entry, in bool) {
	if c := e.counted; c.in {
		u := a.usage[c.driver]
		u.count--
		if c.running {
			u.used = u.used.Sub(c.res)
		} else {
			u.reserved = u.reserved.Sub(c.res)
		}
		if u.count == 0 {
			delete(a.usage, c.driver) // (and no rounding left behind)
		}
	}
	e.counted = counted{}
	if !in {
		return
	}
	e.counted = counted{in: true, driver: e.Driver, running: e.Phase == types.MachineRunning, res: e.Res}
	u := a.usage[e.Driver]
	if u == nil {
		u = &usage{}
		a.usage[e.Driver] = u
	}
	u.count++
	if e.counted.running {
		u.used = u.used.Add(e.Res)
	} else {
		u.reserved = u.reserved.Add(e.Res)
	}
}

// unindexLocked drops machine from claim's machines. Caller holds mu.
func (a *acceptor) unindexLocked(claim, machine string) {
	ms := slices.DeleteFunc(a.byClaim[claim], func(m string) bool { return m == machine })
	if len(ms) == 0 {
		delete(a.byClaim, claim)
	} else {
		a.byClaim[claim] = ms
	}
}

// remove forgets a machine.
func (a *acceptor) remove(machine string) {
	a.mu.Lock()
	e, ok := a.entries[machine]
	if ok {
		a.unindexLocked(e.Claim, e.Machine)
		a.countLocked(e, false)
		delete(a.entries, machine)
	}
	a.mu.Unlock()
	if ok {
		a.capacityChanged()
	}
}

// update changes an entry under the lock; false when it is gone.
func (a *acceptor) update(machine string, fn func(e *entry)) bool {
	a.mu.Lock()
	e, ok := a.entries[machine]
	if ok {
		old := e.Claim
		fn(e)
		a.countLocked(e, true)
		if e.Claim != old {
			a.unindexLocked(old, machine)
			a.putLocked(e)
		}
	}
	a.mu.Unlock()
	if ok {
		a.capacityChanged()
	}
	return ok
}

// get returns a copy of a machine's entry.
func (a *acceptor) get(machine string) (entry, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.entries[machine]
	if !ok {
		return entry{}, false
	}
	return *e, true
}

// ofClaim returns copies of the entries of claim.
func (a *acceptor) ofClaim(claim string) []entry {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]entry, 0, len(a.byClaim[claim]))
	for _, m := range a.byClaim[claim] {
		out = append(out, *a.entries[m])
	}
	return out
}

// appendNames appends the name of every entry to out.
func (a *acceptor) appendNames(out []string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out = slices.Grow(out, len(a.entries))
	for name := range a.entries {
		out = append(out, name)
	}
	return out
}

// appendEntries appends a copy of the entries of names that are still in
// the ledger to out.
func (a *acceptor) appendEntries(out []entry, names []string) []entry {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, name := range names {
		if e, ok := a.entries[name]; ok {
			out = append(out, *e)
		}
	}
	return out
}

// usageLocked sums used and reserved resources of a driver instance. Caller
// holds mu.
func (a *acceptor) usageLocked(driver string) (used, reserved types.Resources, count int) {
	if u := a.usage[driver]; u != nil {
		return u.used, u.reserved, u.count
	}
	return used, reserved, 0
}

// capacityOf is an instance's capacity with this node's used and reserved.
func (a *acceptor) capacityOf(in Instance) (types.Capacity, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, _, count := a.usageLocked(in.Name)
	return a.capacityLocked(in), count
}

// capacityChanged tells the elector and the reporter that this node's free
// capacity changed.
func (a *acceptor) capacityChanged() {
	a.n.el.refresh()
	a.n.rep.kick()
}

// workLoop runs the per-key reconcile.
func (a *acceptor) workLoop() {
	for {
		key, ok := a.q.Get()
		if !ok {
			return
		}
		a.reconcile(key)
		a.q.Done(key)
	}
}

// held is the scheduler's view of an entry, with its reap request, and
// whether its record was deleted (its tombstone is in the store: a record
// not written yet has none).
func (a *acceptor) held(e entry) scheduler.Held {
	h := scheduler.Held{Machine: e.Machine, Claim: e.Claim, Round: e.Round, Phase: e.Phase, Busy: e.Busy}
	if m, ok := a.n.machine(e.Machine); ok {
		h.Reap = m.Status.Reap
		return h
	}
	deleted, err := a.n.st.Deleted(types.KindMachine, e.Machine)
	if err != nil {
		a.n.log.Warn("machine record", "machine", e.Machine, "err", err)
	}
	h.Deleted = deleted
	return h
}

// reconcile decides about this node's machines of one claim (or one warm
// machine) and carries the decisions out.
func (a *acceptor) reconcile(key string) {
	if machine, ok := strings.CutPrefix(key, keyDropPrefix); ok {
		a.dropAgain(machine)
		return
	}
	if machine, ok := strings.CutPrefix(key, "m/"); ok {
		if e, ok := a.get(machine); ok {
			if e.Claim != "" {
				a.q.Add(e.Claim) // bound since
				return
			}
			a.act(e, nil, scheduler.DecideMachine(a.n.cfg.Now(), a.n.cfg.Name, a.held(e), scheduler.ClaimState{}))
		}
		return
	}
	entries := a.ofClaim(key)
	claim := a.claimOf(key, entries)
	cs := a.n.claimState(claim)
	for _, e := range entries {
		d := scheduler.DecideMachine(a.n.cfg.Now(), a.n.cfg.Name, a.held(e), cs)
		if d.Action == scheduler.Keep || d.Action == scheduler.Bind {
			a.overrideLost(e)
		}
		a.act(e, claim, d)
	}
	a.checkAccepted(claim, cs, entries)
	a.reconcilePause(claim, entries)
}

// claimOf is claim name as the cache holds it, or as the store does when
// the cache has none and this node holds machines of it: the cache follows
// the store's watch, and the claim an offer brought (applyRecords) reaches
// it after the reconcile the acceptance queued may have run. Read there
// as gone, the reservation was released at once and the round given back
// when the election came (measured: 2% of a 2,000-claim burst on 3 nodes
// went to a second round so, each with a machine record made and deleted
// for nothing).
func (a *acceptor) claimOf(name string, entries []entry) *types.MachineClaim {
	if c, ok := a.n.claim(name); ok || len(entries) == 0 {
		return c
	}
	c, err := store.Get[types.MachineClaim](a.n.st, types.KindMachineClaim, name)
	if err != nil {
		return nil
	}
	return c
}

// overrideLost answers a lost verdict on a machine this node still runs for
// its claim (passed while this node was out of reach, and not acted on yet):
// the node's own word on its machine, written again, overrides it.
func (a *acceptor) overrideLost(e entry) {
	m, ok := a.n.machine(e.Machine)
	if !ok || !m.LostHolds() || e.Phase != types.MachineRunning || e.Resource == nil {
		return
	}
	if err := a.setMachine(e.Machine, func(m *types.Machine) {
		showResource(m, e.whole())
		m.Status.PhaseTimes.Mark(string(types.MachineRunning), a.n.cfg.Now()) // running again since now
	}); err != nil {
		a.n.log.Warn("override lost verdict", "machine", e.Machine, "err", err)
		return
	}
	a.n.log.Info("machine still runs here, lost verdict overridden", "machine", e.Machine, "claim", e.Claim)
}

// checkAccepted gives back the claim's round when this node was elected for
// it and holds nothing for it, and records its machine Lost when it was
// bound to one this node no longer holds (scheduler.DecideOrphan), so the
// claim is elected again instead of waiting on a machine that is gone.
func (a *acceptor) checkAccepted(claim *types.MachineClaim, cs scheduler.ClaimState, entries []entry) {
	if claim == nil {
		return
	}
	held := make([]scheduler.Held, 0, len(entries))
	for _, e := range entries {
		held = append(held, a.held(e))
	}
	held = a.sharedHeld(cs, held)
	if _, orphan := scheduler.DecideOrphan(a.n.cfg.Name, claim.Status.Phase, cs, held); !orphan {
		return
	}
	// The cache may lag this node's own writes (a give-back it just made):
	// decide on the stored claim, and on the ledger read after it (a take
	// writes the binding and then its entry, under the ledger's lock).
	stored, err := store.Get[types.MachineClaim](a.n.st, types.KindMachineClaim, claim.Metadata.Name)
	if err != nil {
		return
	}
	cs = a.n.claimState(stored)
	held = held[:0]
	for _, e := range a.ofClaim(claim.Metadata.Name) {
		held = append(held, a.held(e))
	}
	held = a.sharedHeld(cs, held)
	o, orphan := scheduler.DecideOrphan(a.n.cfg.Name, stored.Status.Phase, cs, held)
	switch {
	case !orphan:
	case o.Lost:
		a.bindingGone(claim.Metadata.Name, o.Round, cs.Binding.Machine, types.BindingLost, o.Reason)
		a.n.log.Info("claim's machine gone", "claim", claim.Metadata.Name, "round", o.Round, "reason", o.Reason)
	default:
		driver := cs.Election.Driver
		if b := cs.Binding; b != nil && b.Round == o.Round {
			driver = b.Driver
		}
		a.giveBack(claim.Metadata.Name, o.Round, driver, o.Reason)
	}
}

// sharedHeld adds to held the shared machine cs is bound to when this node
// runs it: the claim holds it without an entry of its own.
func (a *acceptor) sharedHeld(cs scheduler.ClaimState, held []scheduler.Held) []scheduler.Held {
	b := cs.Binding
	if b == nil || !b.Shared || b.Node != a.n.cfg.Name {
		return held
	}
	if e, ok := a.get(b.Machine); ok && e.Phase == types.MachineRunning {
		held = append(held, scheduler.Held{Machine: b.Machine, Round: b.Round, Phase: e.Phase})
	}
	return held
}

// act carries out one decision about an entry.
func (a *acceptor) act(e entry, claim *types.MachineClaim, d scheduler.MachineDecision) {
	switch d.Action {
	case scheduler.Allocate:
		a.startAllocate(e, claim)
	case scheduler.Bind:
		a.bind(e, claim)
	case scheduler.Release:
		a.startRelease(e, d.Reason, e.Claim != "" && claim == nil)
	case scheduler.GiveBack:
		a.giveBack(e.Claim, e.Round, e.Driver, d.Reason)
		a.startRelease(e, d.Reason, false)
	}
}

// giveBack writes the claim's binding for round as Released with reason: the
// elector elects it again.
func (a *acceptor) giveBack(claim string, round uint64, driver, reason string) {
	now := a.n.cfg.Now()
	written := false
	_, err := store.UpdateFacet(a.n.st, types.KindMachineClaim, claim, types.FacetBinding, func(c *types.MachineClaim) error {
		if b := c.Status.Binding; b != nil && b.Round == round && b.Phase == types.BindingReleased {
			return store.ErrNoChange
		}
		written = true
		c.SetBinding(types.ClaimBinding{Round: round, Node: a.n.cfg.Name, Driver: driver, Phase: types.BindingReleased, Reason: reason, At: now}, now)
		return nil
	})
	switch {
	case err != nil && !isNotFound(err) && !errors.Is(err, store.ErrFenced):
		// Refused (the disk full, say): the claim's key comes back, and
		// with nothing held for it here checkAccepted gives it back again;
		// else the elector waited on this round until the claim's deadline.
		a.n.refused.refused(writeGiveBack, claim, err, time.Second, "claim", claim)
		a.q.AddAfter(claim, time.Second)
		return
	case err == nil && written:
		a.n.log.Info("claim given back", "claim", claim, "round", round, "reason", reason)
	}
	a.n.refused.settled(writeGiveBack, claim)
}

// failureBackoff counts one more failed allocation of claim here, and
// returns how many there were and how long to wait before handing the
// claim back: 100 ms, doubling per failure, at most 5 s.
func (a *acceptor) failureBackoff(claim string) (time.Duration, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.failures[claim]
	a.failures[claim] = n + 1
	return min(100*time.Millisecond<<min(n, 6), 5*time.Second), n + 1
}

func (a *acceptor) forgetFailures(claim string) {
	a.mu.Lock()
	delete(a.failures, claim)
	a.mu.Unlock()
}

// cacheNode returns the Node object of name from the cache.
func cacheNode(n *Node, name string) (*types.Node, bool) {
	o, ok := n.cache.Get(types.KindNode, name)
	if !ok {
		return nil, false
	}
	return o.(*types.Node), true
}

// compact copies the ledger afresh (see package intern): its entries, their
// resources (decoded from machine records during a burst, ~1 KB in a dozen
// small objects each) and the claims' lists, into chunks of their own, with
// their names from tab; its other maps and its queue shrink to what they
// hold. Called once the node is idle; nothing keeps an entry's pointer
// outside mu.
func (a *acceptor) compact(tab *intern.Table) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var es intern.Slab[entry]
	var rs intern.Slab[types.Resource]
	var names intern.Slab[string]
	entries := make(map[string]*entry, len(a.entries))
	for _, e := range a.entries {
		c := es.New()
		*c = *e
		c.Machine, c.Claim, c.Set, c.Driver = tab.String(e.Machine), tab.String(e.Claim), tab.String(e.Set), tab.String(e.Driver)
		c.counted.driver = tab.String(e.counted.driver)
		if e.Resource != nil {
			c.Resource = rs.New()
			*c.Resource = e.Resource.Copy(tab)
			if info := c.Resource.Info; info != nil {
				c.info = names.Make(2 * len(info))[:0]
				for k, v := range info {
					c.info = append(c.info, k, v)
				}
				c.Resource.Info = nil
			} else if e.info != nil { // kept apart by the last compact
				c.info = names.Make(len(e.info))
				for i, s := range e.info {
					c.info[i] = tab.String(s)
				}
			}
		}
		entries[c.Machine] = c
	}
	byClaim := make(map[string][]string, len(a.byClaim))
	for claim, ms := range a.byClaim {
		c := names.Make(len(ms))
		for i, m := range ms {
			c[i] = tab.String(m)
		}
		byClaim[tab.String(claim)] = c
	}
	a.entries, a.byClaim = entries, byClaim
	a.failures = intern.Shrunk(a.failures)
	a.q.Compact()
}
