package cluster

import (
	"time"

	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// watchLoop reacts to store changes. Reconcile is level-triggered: a resync
// event (the watcher fell behind) or the periodic timer lists everything again,
// so a missed event costs latency, never correctness.
func (n *Node) watchLoop(events <-chan store.Event) {
	tick := time.NewTicker(n.cfg.ResyncInterval)
	defer tick.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
			n.resync()
			n.sweepLost()
		case ev, ok := <-events:
			if !ok {
				return
			}
			n.onEvent(ev)
		}
	}
}

func (n *Node) onEvent(ev store.Event) {
	if ev.Type == store.EventResync {
		n.resync()
		return
	}
	rec := ev.Record
	switch rec.Kind {
	case types.KindMachineSet, types.KindScheduledEvent, types.KindSession:
		n.kickSets()
		return
	case types.KindMachineClaim:
		if ev.Type == store.EventDelete {
			n.onClaimGone(rec.Name)
			return
		}
		obj, err := store.Decode(rec)
		if err != nil {
			n.log.Warn("decode claim", "claim", rec.Name, "err", err)
			return
		}
		n.onClaim(obj.(*types.MachineClaim))
	case types.KindNode:
		if rec.Name == n.cfg.Name && rec.Version.Node != n.cfg.Name && ev.Type == store.EventPut {
			// Another node wrote this node's object: an operator drained or
			// undrained it (show it in our status, and let electors see it at
			// once), or a member that thought us dead marked us Down from an
			// older copy, capacity and all. This node's word on itself wins:
			// report again.
			select {
			case n.reportQ <- struct{}{}:
			default:
			}
		}
		n.elect.Push(electEvent{refresh: true})
	case types.KindMachineTemplate, types.KindEnvironment:
		// A claim may have waited for its template: look again.
		n.resyncClaims()
	case types.KindMachine:
		if ev.Type == store.EventPut {
			if e, ok := n.ledger.get(rec.Name); ok {
				obj, err := store.Decode(rec)
				if err == nil && obj.(*types.Machine).Status.Phase == types.MachineLost {
					n.lostByOthers(e)
				}
			}
			return
		}
		if ev.Type == store.EventDelete {
			if e, ok := n.ledger.get(rec.Name); ok {
				// Someone removed our machine record: release what it held.
				n.log.Info("machine record deleted", "machine", e.Machine)
				n.startRelease(e.Machine, "machine record deleted")
			}
		}
	}
}

// onClaim handles one live claim: electing it if this node is its elector, and
// fencing this node's machines that the claim no longer wants.
func (n *Node) onClaim(c *types.MachineClaim) {
	name := c.Metadata.Name
	switch {
	case requested(c) && c.Status.Node == "":
		if n.resumeOwn(c) {
			return
		}
		n.routeClaim(c)
	case requested(c) && c.Status.Node == n.cfg.Name && !n.isBusy(c.Status.Machine) && n.resumeOwn(c):
		// Accepted here with nothing under way and its machine running: a
		// write from an older copy had undone its binding, now put back.
	case requested(c) && !n.isMember(c.Status.Node):
		// Accepted by a node that died before binding: elect again.
		if n.isElector(name) {
			n.unassign(name, c.Status.Node, c.Status.Round)
		}
	default:
		// Accepted (or over): whichever elector here has it (the claim's, or
		// a set's or environment's owner) is done with it; a claim handed
		// back later comes to it afresh.
		n.elect.Push(electEvent{in: scheduler.ClaimGone{Claim: name}})
	}
	if c.Status.Phase == types.ClaimBound && c.Status.Node == n.cfg.Name && !n.isBusy(c.Status.Machine) {
		if e, ok := n.ledger.get(c.Status.Machine); !ok || e.Phase == types.MachineTerminating {
			// Bound here to a machine this node does not hold (any more):
			// hand the claim back rather than leave it bound to nothing.
			n.rebindMissing(c)
		}
	}
	for _, e := range n.ledger.byClaim(name) {
		if n.fenced(c, e) {
			n.startRelease(e.Machine, "claim no longer wants this machine")
		} else if c.Status.Machine == e.Machine {
			if m, err := store.Get[types.Machine](n.st, types.KindMachine, e.Machine); err == nil && m.Status.Phase == types.MachineLost {
				n.lostByOthers(e)
			}
		}
	}
}

// lostByOthers handles one of this node's machines that other nodes declared
// Lost while they could not see this node (a partition). If the claim still
// names it, this node's word on its own machine wins and it is Running again;
// otherwise the claim has moved on and the machine is released.
func (n *Node) lostByOthers(e entry) {
	c, err := store.Get[types.MachineClaim](n.st, types.KindMachineClaim, e.Claim)
	if err != nil || n.fenced(c, e) || c.Status.Machine != e.Machine {
		n.startRelease(e.Machine, "declared lost by the cluster")
		return
	}
	if e.Phase != types.MachineRunning || e.Resource == nil {
		return // an allocation under way writes the record itself
	}
	if _, err := n.setMachine(e.Machine, func(m *types.Machine) {
		// The verdict may have been written from a copy older than the
		// allocation: put back what the driver holds, from the ledger.
		showResource(m, e.Resource)
	}); err != nil {
		n.log.Warn("restore machine", "machine", e.Machine, "err", err)
		return
	}
	n.log.Info("machine restored after partition", "machine", e.Machine, "claim", e.Claim)
}

// fenced reports whether a machine of this node must go because the claim is
// recorded for another node or round, or is over.
func (n *Node) fenced(c *types.MachineClaim, e entry) bool {
	switch c.Status.Phase {
	case types.ClaimFailed, types.ClaimTerminated:
		return true
	case types.ClaimBound:
		return c.Status.Node != n.cfg.Name || c.Status.Machine != e.Machine
	}
	if c.Status.Node != "" && c.Status.Node != n.cfg.Name {
		return true
	}
	return c.Status.Round > e.Round
}

func (n *Node) onClaimGone(name string) {
	n.forgetFailures(name)
	n.pool.mu.Lock()
	delete(n.pool.onDemand, name)
	delete(n.pool.capped, name)
	delete(n.pool.waiting, name)
	n.pool.mu.Unlock()
	n.elect.Push(electEvent{in: scheduler.ClaimGone{Claim: name}})
	for _, e := range n.ledger.byClaim(name) {
		n.startRelease(e.Machine, "claim deleted")
	}
}

// resync lists claims and this node's machines again.
func (n *Node) resync() {
	n.resyncClaims()
	n.elect.Push(electEvent{refresh: true})
}

func (n *Node) resyncClaims() {
	claims, err := store.List[types.MachineClaim](n.st, types.KindMachineClaim)
	if err != nil {
		n.log.Warn("list claims", "err", err)
		return
	}
	live := make(map[string]bool, len(claims))
	now := n.cfg.Now()
	n.busyMu.Lock()
	if n.unassigned == nil {
		n.unassigned = map[string]time.Time{}
	}
	stuck := map[string]bool{}
	for _, c := range claims {
		name := c.Metadata.Name
		// A claim that waits says why (its elector wrote the reason); one
		// with neither a node nor a reason has nobody working on it.
		if !requested(c) || c.Status.Node != "" || c.Status.Reason != "" {
			delete(n.unassigned, name)
			continue
		}
		since, ok := n.unassigned[name]
		if !ok {
			n.unassigned[name] = now
		} else if now.Sub(since) > 5*n.cfg.OfferTimeout {
			stuck[name] = true
			n.unassigned[name] = now
		}
	}
	exists := make(map[string]bool, len(claims))
	for _, c := range claims {
		exists[c.Metadata.Name] = true
	}
	for name := range n.unassigned {
		if !exists[name] {
			delete(n.unassigned, name)
		}
	}
	n.busyMu.Unlock()
	for _, c := range claims {
		live[c.Metadata.Name] = true
		if stuck[c.Metadata.Name] && n.isElector(c.Metadata.Name) {
			// Unassigned and unexplained for several offer timeouts: whatever
			// the elector believes (an acceptance undone elsewhere, say),
			// start this claim's election afresh. A level-triggered safety net.
			n.elect.Push(electEvent{in: scheduler.ClaimGone{Claim: c.Metadata.Name}})
		}
		n.onClaim(c)
	}
	for _, e := range n.ledger.all() {
		if e.Claim != "" && !live[e.Claim] { // "" is a warm pool machine
			n.startRelease(e.Machine, "claim deleted")
		}
	}
}

func (n *Node) isBusy(machine string) bool {
	n.busyMu.Lock()
	defer n.busyMu.Unlock()
	return n.busy[machine]
}

func (n *Node) isMember(node string) bool {
	for _, m := range n.peers.Members() {
		if m == node {
			return true
		}
	}
	return false
}

// unassign hands a claim accepted by a dead node back to election; the next
// offer carries a higher round, which fences the dead node if it comes back.
func (n *Node) unassign(claim, node string, round uint64) {
	_, err := store.Update(n.st, types.KindMachineClaim, claim, func(c *types.MachineClaim) error {
		if !requested(c) || c.Status.Node != node || c.Status.Round != round {
			return store.ErrNoChange
		}
		c.Status.Node, c.Status.Driver, c.Status.Machine = "", "", ""
		c.Status.Reason = "node " + node + " left before binding"
		return nil
	})
	if err != nil && !isNotFound(err) {
		n.log.Warn("unassign claim", "claim", claim, "err", err)
	}
}

// resumeOwn puts back this node's acceptance of an unassigned claim when it
// still holds a reservation or machine for it in the claim's current round
// (the claim was handed back while this node was thought dead, say): the
// machine is not wasted and the capacity not stranded. A higher round offered
// meanwhile overrides it as usual. For a claim accepted here in its current
// round whose machine runs, it puts back the binding that a write from an
// older copy of the claim undid.
func (n *Node) resumeOwn(c *types.MachineClaim) bool {
	mine := c.Status.Node == n.cfg.Name
	var best *entry
	for _, e := range n.ledger.byClaim(c.Metadata.Name) {
		if e.Phase == types.MachineTerminating || (mine && (e.Round != c.Status.Round || e.Phase != types.MachineRunning)) {
			continue
		}
		if e.Round >= c.Status.Round && (best == nil || e.Round > best.Round) {
			best = &e
		}
	}
	if best == nil {
		return false
	}
	e := *best
	now := n.cfg.Now()
	_, err := store.Update(n.st, types.KindMachineClaim, c.Metadata.Name, func(c *types.MachineClaim) error {
		ours := c.Status.Node == n.cfg.Name && c.Status.Round == e.Round
		if !requested(c) || (c.Status.Node != "" && !ours) || c.Status.Round > e.Round {
			return store.ErrNoChange
		}
		c.Status.Node, c.Status.Driver, c.Status.Round, c.Status.Machine = n.cfg.Name, e.Driver, e.Round, e.Machine
		c.Status.Reason = ""
		if e.Phase == types.MachineRunning {
			c.Status.Phase = types.ClaimBound
			c.Status.PhaseTimes.Mark(string(types.ClaimBound), now)
		}
		return nil
	})
	if err != nil {
		n.log.Warn("resume claim", "claim", c.Metadata.Name, "err", err)
		return false
	}
	n.log.Info("claim resumed", "claim", c.Metadata.Name, "machine", e.Machine, "round", e.Round)
	return true
}

// rebindMissing hands back a claim bound to this node whose machine it does not
// hold, so it is elected again.
func (n *Node) rebindMissing(c *types.MachineClaim) {
	machine := c.Status.Machine
	_, err := store.Update(n.st, types.KindMachineClaim, c.Metadata.Name, func(c *types.MachineClaim) error {
		if c.Status.Phase != types.ClaimBound || c.Status.Node != n.cfg.Name || c.Status.Machine != machine {
			return store.ErrNoChange
		}
		c.Status.Phase = types.ClaimRequested
		c.Status.Node, c.Status.Driver, c.Status.Machine = "", "", ""
		c.Status.Reason = "machine " + machine + " is gone from node " + n.cfg.Name
		delete(c.Status.PhaseTimes, string(types.ClaimBound))
		return nil
	})
	if err != nil && !isNotFound(err) {
		n.log.Warn("rebind claim", "claim", c.Metadata.Name, "err", err)
		return
	}
	n.log.Info("claim bound to a missing machine, electing again", "claim", c.Metadata.Name, "machine", machine)
}
