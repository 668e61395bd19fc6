package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// LabelProvisionFor marks the claims a MachineSet's owner creates to provision
// warm machines: their machines join the set unclaimed once running.
const LabelProvisionFor = "hf/provision-for"

// pool holds the takes this node (as elector) has asked for (claim ->
// machine), the OnDemand set chosen for claims it elects (claim -> set), the
// environment caps of claims it elects (claim -> capKey) and the claims it
// made wait for a set.
type pool struct {
	mu       sync.Mutex
	takes    map[string]string
	onDemand map[string]string
	capped   map[string]string
	waiting  map[string]bool
}

// onDemandSet is the OnDemand set chosen for a claim, if any.
func (n *Node) onDemandSet(claim string) string {
	n.pool.mu.Lock()
	defer n.pool.mu.Unlock()
	return n.pool.onDemand[claim]
}

// joinPool turns a freshly allocated machine into a warm, unclaimed machine of
// its set and ends the claim that provisioned it. The ledger forgets the claim
// first, so the claim's deletion does not release the machine.
func (n *Node) joinPool(ctx context.Context, in Instance, mach *types.Machine, claim *types.MachineClaim, res *types.Resource, set string) error {
	name := mach.Metadata.Name
	now := n.cfg.Now()
	n.ledger.mu.Lock()
	if e, ok := n.ledger.entries[name]; ok {
		e.Claim, e.Phase, e.Resource = "", types.MachineRunning, res
		n.ledger.entries[name] = e
	}
	n.ledger.mu.Unlock()
	n.ledger.notify()
	if err := n.runMachine(ctx, in, name, res, now, func(m *types.Machine) {
		m.Spec.Claim, m.Spec.MachineSet = "", set
	}); err != nil {
		return err
	}
	if _, err := n.st.Delete(types.KindMachineClaim, claim.Metadata.Name, types.Version{}); err != nil && !errors.Is(err, store.ErrNotFound) {
		n.log.Warn("delete provisioning claim", "claim", claim.Metadata.Name, "err", err)
	}
	n.log.Debug("machine joined pool", "machine", name, "set", set)
	return nil
}

// routeClaim decides how an unassigned claim binds and acts on the decision
// where this node is the one to: a take of a warm machine, a waiting reason
// or a direct election by the claim's elector; an election for an OnDemand
// set by the set's owner, so that one node counts the set's machines and the
// claims under way for it, and the set never passes its maxProvisioned.
func (n *Node) routeClaim(c *types.MachineClaim) {
	name := c.Metadata.Name
	n.pool.mu.Lock()
	_, out := n.pool.takes[name]
	n.pool.mu.Unlock()
	if out {
		return // a take is under way; its answer routes the claim again
	}
	elector := n.isElector(name)
	d, decided := n.bindDecision(c, elector)
	if !decided {
		n.electDirect(c, elector)
		return
	}
	switch d.Kind {
	case scheduler.BindPool:
		if elector {
			n.startTake(c, d.Machine)
		}
	case scheduler.BindWait:
		if elector {
			n.pool.mu.Lock()
			n.pool.waiting[name] = true
			n.pool.mu.Unlock()
			n.setWaiting(name, d.Reason)
		}
	case scheduler.BindOnDemand:
		if scheduler.Owner("set/"+d.Set, n.peers.Members()) != n.cfg.Name {
			return // the set's owner elects it
		}
		// Elected as usual; the machine is made for (and counted in) the set.
		n.pool.mu.Lock()
		n.pool.onDemand[name] = d.Set
		n.pool.mu.Unlock()
		n.feedClaim(c)
	default:
		n.electDirect(c, elector)
	}
}

// bindDecision is scheduler.DecideBind from this node's view, with the claims
// this node elects for OnDemand sets counted as the machines they will be.
// decided is false when no set is involved (a provisioning claim, no sets, or
// none this node needs to look at): the claim is elected as usual.
func (n *Node) bindDecision(c *types.MachineClaim, elector bool) (d scheduler.BindDecision, decided bool) {
	if c.Metadata.Labels[LabelProvisionFor] != "" {
		return d, false
	}
	sets, err := store.List[types.MachineSet](n.st, types.KindMachineSet)
	if err != nil || (len(sets) == 0 && c.Spec.BindStrategy != types.BindRequireMachineSets) {
		return d, false // (a claim that requires sets waits for one, below)
	}
	if !elector && !slices.ContainsFunc(sets, func(s *types.MachineSet) bool {
		return s.Spec.ProvisioningStrategy == types.ProvisionOnDemand
	}) {
		return d, false // only a set's owner acts on a claim it does not elect
	}
	machines, err := store.List[types.Machine](n.st, types.KindMachine)
	if err != nil {
		return d, false
	}
	setVals := make([]types.MachineSet, 0, len(sets))
	for _, s := range sets {
		setVals = append(setVals, *s)
	}
	mVals := make([]types.Machine, 0, len(machines))
	taken := n.takenMachines()
	claimed := map[string]bool{}
	for _, m := range machines {
		if m.Live() {
			claimed[m.Spec.Claim] = true
		}
		if !taken[m.Metadata.Name] {
			mVals = append(mVals, *m)
		}
	}
	mVals = append(mVals, n.onDemandUnderWay(c.Metadata.Name, claimed)...)
	return scheduler.DecideBind(*c, setVals, mVals, n.cfg.Now(), n.poolLimits()), true
}

// onDemandUnderWay stands in for the machines of the OnDemand claims this
// node elects (other than except) that have no live machine yet: Pending
// machines of their sets, so they count against maxProvisioned.
func (n *Node) onDemandUnderWay(except string, claimed map[string]bool) []types.Machine {
	var out []types.Machine
	for claim, set := range n.underWay(n.pool.onDemand, except, claimed) {
		out = append(out, types.Machine{
			Metadata: types.ObjectMeta{Name: "under-way-" + claim},
			Spec:     types.MachineSpec{Claim: claim, MachineSet: set},
			Status:   types.MachineStatus{Phase: types.MachinePending},
		})
	}
	return out
}

// underWay returns the entries of m (claim -> key, one of pool's maps) other
// than except whose claims have no live machine (claimed) yet and still wait
// for one; claims that ended or were bound elsewhere are dropped from m.
func (n *Node) underWay(m map[string]string, except string, claimed map[string]bool) map[string]string {
	n.pool.mu.Lock()
	pending := maps.Clone(m)
	n.pool.mu.Unlock()
	for claim := range pending {
		if claim == except || claimed[claim] {
			delete(pending, claim)
			continue
		}
		if c, err := store.Get[types.MachineClaim](n.st, types.KindMachineClaim, claim); err != nil || !requested(c) {
			delete(pending, claim)
			n.pool.mu.Lock()
			delete(m, claim)
			n.pool.mu.Unlock()
		}
	}
	return pending
}

// startTake asks the node hosting a warm machine to bind it to the claim.
func (n *Node) startTake(c *types.MachineClaim, machine string) {
	host := ""
	if m, err := store.Get[types.Machine](n.st, types.KindMachine, machine); err == nil {
		host = m.Spec.Node
	}
	n.pool.mu.Lock()
	n.pool.takes[c.Metadata.Name] = machine
	n.pool.mu.Unlock()
	msg := Message{Type: MsgTake, From: n.cfg.Name, To: host, Claim: c.Metadata.Name, Machine: machine, Round: c.Status.Round + 1}
	if host != n.cfg.Name {
		msg.Records = n.offerRecords(c.Metadata.Name)
	}
	n.spawn(func() {
		if err := n.peers.Send(n.ctx, msg); err != nil {
			n.takeAnswered(Message{Type: MsgDecline, Claim: msg.Claim, Machine: msg.Machine, Reason: err.Error()})
		}
	})
}

func (n *Node) takenMachines() map[string]bool {
	n.pool.mu.Lock()
	defer n.pool.mu.Unlock()
	out := map[string]bool{}
	for _, m := range n.pool.takes {
		out[m] = true
	}
	return out
}

// takeAnswered ends a take: bound, or back to the usual election.
func (n *Node) takeAnswered(m Message) {
	n.pool.mu.Lock()
	delete(n.pool.takes, m.Claim)
	n.pool.mu.Unlock()
	if m.Type == MsgAccept {
		return
	}
	n.log.Debug("take declined", "claim", m.Claim, "machine", m.Machine, "reason", m.Reason)
	if c, err := store.Get[types.MachineClaim](n.st, types.KindMachineClaim, m.Claim); err == nil && requested(c) && c.Status.Node == "" {
		n.onClaim(c) // another pool machine, or an election
	}
}

// handleTake is the hosting node's side: under the ledger lock, a warm
// machine that is still unclaimed is bound to the claim (machine first, then
// the claim), and only then accepted.
func (n *Node) handleTake(m Message) {
	for _, rec := range m.Records {
		if rec.Kind == types.KindMachineClaim {
			if _, err := n.st.Apply(rec); err != nil {
				n.log.Debug("apply offered record", "name", rec.Name, "err", err)
			}
		}
	}
	reply := Message{From: n.cfg.Name, To: m.From, Claim: m.Claim, Node: n.cfg.Name, Machine: m.Machine, Round: m.Round}
	if err := n.take(m); err != nil {
		reply.Type, reply.Reason = MsgDecline, err.Error()
	} else {
		reply.Type = MsgAccept
	}
	if m.From == n.cfg.Name {
		n.takeAnswered(reply)
		return
	}
	n.spawn(func() { n.send(reply) })
}

func (n *Node) take(m Message) error {
	claim, err := store.Get[types.MachineClaim](n.st, types.KindMachineClaim, m.Claim)
	if err != nil {
		return fmt.Errorf("claim %s: %w", m.Claim, err)
	}
	if !requested(claim) || claim.Status.Node != "" {
		return fmt.Errorf("claim %s is taken care of", m.Claim)
	}
	n.ledger.mu.Lock()
	defer n.ledger.mu.Unlock()
	e, ok := n.ledger.entries[m.Machine]
	if !ok || e.Claim != "" || e.Phase != types.MachineRunning {
		return fmt.Errorf("machine %s is not a warm machine here", m.Machine)
	}
	now := n.cfg.Now()
	if _, err := store.Update(n.st, types.KindMachine, m.Machine, func(mm *types.Machine) error {
		if mm.Spec.Claim != "" {
			return fmt.Errorf("machine %s is bound to %s", m.Machine, mm.Spec.Claim)
		}
		mm.Spec.Claim, mm.Spec.Round = m.Claim, m.Round
		return nil
	}); err != nil {
		return err
	}
	e.Claim, e.Round = m.Claim, m.Round
	n.ledger.entries[m.Machine] = e
	_, err = store.Update(n.st, types.KindMachineClaim, m.Claim, func(c *types.MachineClaim) error {
		if !requested(c) || c.Status.Node != "" {
			return fmt.Errorf("claim %s is taken care of", m.Claim)
		}
		c.Status.Phase = types.ClaimBound
		c.Status.Node, c.Status.Driver, c.Status.Machine, c.Status.Round = n.cfg.Name, e.Driver, m.Machine, m.Round
		c.Status.Reason = ""
		c.Status.PhaseTimes.Mark(string(types.ClaimBound), now)
		return nil
	})
	if err != nil {
		// Give the machine back to the pool.
		e.Claim = ""
		n.ledger.entries[m.Machine] = e
		if _, uerr := store.Update(n.st, types.KindMachine, m.Machine, func(mm *types.Machine) error {
			mm.Spec.Claim = ""
			return nil
		}); uerr != nil {
			n.log.Warn("return machine to pool", "machine", m.Machine, "err", uerr)
		}
		return err
	}
	n.metrics.bound.WithLabelValues("pool").Inc()
	n.metrics.bindLatency.Observe(now.Sub(claim.Metadata.CreatedAt).Seconds())
	n.log.Debug("pool machine taken", "claim", m.Claim, "machine", m.Machine)
	return nil
}

// poolLimits are the reaping limits for sets that do not set their own: the
// node's config over DESIGN's defaults; idle reaping is off unless configured.
func (n *Node) poolLimits() scheduler.PoolLimits {
	l := n.cfg.PoolLimits
	if l.MaxIdle <= 0 {
		l.MaxIdle = 1 << 62
	}
	return l
}
