package cluster

import (
	"fmt"
	"time"

	"github.com/hf-fleet/hf/lib/cluster/cache"
	"github.com/hf-fleet/hf/lib/cluster/wire"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/types"
)

// route decides where a claim the elector should elect binds, and acts where
// this node is the one to: a take of a warm machine, a wait for a set, or an
// election by the claim's elector; an election for an OnDemand set by the
// set's owner, or under an environment's cap by the environment's owner, so
// one node counts what is under way and the limit holds cluster-wide.
func (el *elector) route(now time.Time, c *types.MachineClaim, cs scheduler.ClaimState, d scheduler.ClaimDecision) {
	name := c.Metadata.Name
	if _, out := el.takes[name]; out {
		return // a take is under way; its answer routes the claim again
	}
	elector := el.n.view.mine(name)
	if env := c.Spec.Environment; env != "" {
		if _, ok := el.n.cache.Get(types.KindEnvironment, env); !ok {
			// Its caps, node selector and placement are unknown: it binds
			// nowhere until the environment is here (its arrival looks at
			// every Requested claim again).
			if elector {
				el.wait(now, c, cs, fmt.Sprintf("environment %s does not exist: the claim waits for it to be created, until its bind timeout", env))
			}
			return
		}
	}
	if el.routeShared(now, c, cs, elector) {
		return
	}
	dec, decided := el.bindDecision(now, c)
	if !decided {
		el.electDirect(now, c, cs, d, elector)
		return
	}
	switch dec.Kind {
	case scheduler.BindPool:
		if elector {
			el.startTake(c, cs, dec.Machine)
		}
	case scheduler.BindWait:
		if elector {
			el.wait(now, c, cs, dec.Reason)
		}
	case scheduler.BindOnDemand:
		if !el.n.view.mine("set/" + dec.Set) {
			return // the set's owner elects it
		}
		delete(el.waiting, name)
		el.onDemand[name] = dec.Set
		el.feed(now, c, cs, d)
	default:
		el.electDirect(now, c, cs, d, elector)
	}
}

// wait has claim c wait, saying why, until what it waits for changes (its
// template is looked at again) or its bind timeout fails it.
func (el *elector) wait(now time.Time, c *types.MachineClaim, cs scheduler.ClaimState, reason string) {
	name := c.Metadata.Name
	el.forget(now, name)
	el.waiting[name] = c.Spec.MachineTemplate
	if !cs.Deadline.IsZero() && !now.Before(cs.Deadline) {
		el.fail(name, fmt.Sprintf("not bound within its bind timeout of %s: %s", el.n.bindTimeout(c), reason))
		return
	}
	el.setWaiting(name, reason)
	if !cs.Deadline.IsZero() {
		el.q.AddAfter(name, cs.Deadline.Sub(now))
	}
}

// routeShared routes a claim under a scheduled event whose line for its
// template is Shared: its elector binds it to the least used of the line's
// shared machines (a take without the machine becoming the claim's), or
// has it wait for them. handled is false for any other claim.
func (el *elector) routeShared(now time.Time, c *types.MachineClaim, cs scheduler.ClaimState, elector bool) (handled bool) {
	if c.Spec.ScheduledEvent == "" {
		return false
	}
	ev, ok := cache.Typed[types.ScheduledEvent](el.n.cache, types.KindScheduledEvent, c.Spec.ScheduledEvent)
	if !ok {
		// Not here yet (or deleted): how the claim binds depends on it.
		if elector {
			el.wait(now, c, cs, fmt.Sprintf("scheduled event %s is not known on node %s", c.Spec.ScheduledEvent, el.n.cfg.Name))
		}
		return true
	}
	i, shared := scheduler.SharedLine(*c, *ev)
	if !shared {
		return false
	}
	if !elector {
		return true
	}
	set := scheduler.EventSetName(ev.Metadata.Name, i)
	var machines []types.Machine
	for _, m := range cache.TypedIndex[types.Machine](el.n.cache, idxMachineSet, set) {
		machines = append(machines, *m)
	}
	load := map[string]int{}
	for _, o := range cache.TypedIndex[types.MachineClaim](el.n.cache, idxClaimEvent, ev.Metadata.Name) {
		if b := o.Status.Binding; b != nil && b.Shared && o.Status.Phase == types.ClaimBound {
			load[b.Machine]++
		}
	}
	for _, m := range el.takes {
		load[m]++
	}
	machine, reason := scheduler.ChooseShared(ev.Metadata.Name, set, machines, load)
	if machine == "" {
		el.wait(now, c, cs, reason)
		return true
	}
	delete(el.waiting, c.Metadata.Name)
	el.startTake(c, cs, machine)
	return true
}

// bindDecision is scheduler.DecideBind from this node's view, with the claims
// this node elects for OnDemand sets counted as the machines they will be.
// decided is false when no set is involved (a provisioning claim, no set of
// the claim's template, or none this node needs to look at): the claim is
// elected as usual.
func (el *elector) bindDecision(now time.Time, c *types.MachineClaim) (d scheduler.BindDecision, decided bool) {
	if c.Metadata.Labels[LabelProvisionFor] != "" {
		return d, false
	}
	sets := cache.TypedIndex[types.MachineSet](el.n.cache, idxSetTemplate, c.Spec.MachineTemplate)
	if len(sets) == 0 && c.Spec.BindStrategy != types.BindRequireMachineSets {
		return d, false // (a claim that requires sets waits for one, below)
	}
	if c.Spec.BindStrategy == types.BindRequireMachineSets {
		// Sets of another template are named in the reason.
		for _, n := range c.Spec.MachineSets {
			if s, ok := cache.Typed[types.MachineSet](el.n.cache, types.KindMachineSet, n); ok && s.Spec.MachineTemplate != c.Spec.MachineTemplate {
				sets = append(sets, s)
			}
		}
	}
	elector := el.n.view.mine(c.Metadata.Name)
	onDemand := false
	for _, s := range sets {
		onDemand = onDemand || s.Spec.ProvisioningStrategy == types.ProvisionOnDemand
	}
	if !elector && !onDemand {
		return d, false // only a set's owner acts on a claim it does not elect
	}
	taken := map[string]bool{}
	for _, m := range el.takes {
		taken[m] = true
	}
	setVals := make([]types.MachineSet, 0, len(sets))
	var mVals []types.Machine
	claimed := map[string]bool{}
	for _, s := range sets {
		setVals = append(setVals, *s)
		for _, m := range cache.TypedIndex[types.Machine](el.n.cache, idxMachineSet, s.Metadata.Name) {
			if m.Live() {
				claimed[m.Spec.Claim] = true
			}
			// Machines of this very claim (a round under way) do not stand
			// in its way: they are its own, or fenced once it moves on.
			// A machine without a node (an outside provider's record) is
			// no node's to hand over.
			// Nor is a shared machine any one claim's.
			if !taken[m.Metadata.Name] && m.Spec.Claim != c.Metadata.Name && m.Spec.Node != "" && m.Spec.MachineType != types.MachineTypeShared {
				mVals = append(mVals, *m)
			}
		}
	}
	for claim, set := range el.underWay(el.onDemand, c.Metadata.Name, claimed) {
		mVals = append(mVals, types.Machine{
			Metadata: types.ObjectMeta{Name: "under-way-" + claim},
			Spec:     types.MachineSpec{Claim: claim, MachineSet: set},
			Status:   types.MachineStatus{Phase: types.MachinePending},
		})
	}
	return scheduler.DecideBind(*c, setVals, mVals, now, el.n.poolLimits()), true
}

// underWay returns the entries of m (claim -> key: onDemand or capped) other
// than except whose claims have no live machine yet (claimed) and still wait
// for one; claims that ended or are bound elsewhere are dropped from m. They
// stand in for the machines they will have, so limits count them.
func (el *elector) underWay(m map[string]string, except string, claimed map[string]bool) map[string]string {
	out := map[string]string{}
	for claim, key := range m {
		if claim == except {
			continue
		}
		if claimed[claim] || el.n.cache.Count(idxMachineClaim, claim) > 0 {
			continue
		}
		if c, ok := el.n.claim(claim); !ok || c.Status.Phase != types.ClaimRequested {
			delete(m, claim)
			continue
		}
		out[claim] = key
	}
	return out
}

// electDirect elects a claim outside any set. Its elector does, unless its
// Environment caps the claim's template: then the environment's owner does,
// so that one node counts the environment's machines of that template and
// the claims under way for them, and the cap holds cluster-wide; a claim
// that would pass the cap waits with the reason.
func (el *elector) electDirect(now time.Time, c *types.MachineClaim, cs scheduler.ClaimState, d scheduler.ClaimDecision, elector bool) {
	name := c.Metadata.Name
	delete(el.waiting, name)
	env, limit, ok := el.envCap(c)
	if !ok {
		if elector {
			el.feed(now, c, cs, d)
		}
		return
	}
	if !el.n.view.mine("env/" + env) {
		return // the environment's owner elects it
	}
	key := capKey(env, c.Spec.MachineTemplate)
	live := 0
	// By name (a packed machine is not decoded to be counted): those not
	// of this claim.
	for _, m := range el.n.cache.Names(idxMachineEnvTmpl, key) {
		if !el.n.cache.Indexed(idxMachineClaim, name, m) {
			live++
		}
	}
	for _, k := range el.underWay(el.capped, name, nil) {
		if k == key {
			live++
		}
	}
	if live >= limit {
		el.wait(now, c, cs, fmt.Sprintf("environment %s holds its capacity of %d machines of template %s", env, limit, c.Spec.MachineTemplate))
		return
	}
	el.capped[name] = key
	el.feed(now, c, cs, d)
}

// envCap is the cap claim c's Environment puts on machines of its template
// (spec.capacity[template]); ok is false when there is none.
func (el *elector) envCap(c *types.MachineClaim) (env string, limit int, ok bool) {
	if c.Spec.Environment == "" {
		return "", 0, false
	}
	o, found := el.n.cache.Get(types.KindEnvironment, c.Spec.Environment)
	if !found {
		return "", 0, false
	}
	limit, ok = o.(*types.Environment).Spec.Capacity[c.Spec.MachineTemplate]
	return c.Spec.Environment, limit, ok
}

// startTake asks the node hosting a warm machine to bind it to the claim at
// the claim's next round.
func (el *elector) startTake(c *types.MachineClaim, cs scheduler.ClaimState, machine string) {
	m, ok := el.n.machine(machine)
	if !ok {
		return
	}
	name := c.Metadata.Name
	el.takes[name] = machine
	round := max(cs.Round(), el.issued[name]) + 1
	el.issued[name] = round
	msg := Message{Type: wire.MsgTake, From: el.n.cfg.Name, To: m.Spec.Node, Claim: name, Machine: machine, Round: round}
	if m.Spec.Node != el.n.cfg.Name {
		msg.Records = el.records(name)
		el.n.spawn(func() { el.n.send(msg) })
		return
	}
	el.n.acc.deliver(msg)
}

// takeAnswered ends a take: bound, or routed again. An accepted take is
// recorded in the election facet, as an accepted offer is, so the claim is
// not routed again while the taker's binding is on its way here.
func (el *elector) takeAnswered(m Message) {
	delete(el.takes, m.Claim)
	if m.Type == wire.MsgAccept {
		driver := ""
		if mach, ok := el.n.machine(m.Machine); ok {
			driver = mach.Spec.Driver
		}
		el.writeElection(m.Claim, types.ClaimElection{Round: m.Round, Node: m.From, Driver: driver, At: el.n.cfg.Now()})
		return
	}
	el.n.log.Debug("take declined", "claim", m.Claim, "machine", m.Machine, "reason", m.Reason)
	el.q.Add(m.Claim)
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
