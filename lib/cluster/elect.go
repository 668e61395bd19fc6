package cluster

import (
	"context"
	"errors"
	"sort"
	"strings"
	"time"

	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// electEvent is one input for the elect loop: a scheduler input, or a request to
// recompute candidates (capacity or membership changed).
type electEvent struct {
	in      scheduler.Input
	refresh bool
}

// electLoop owns the pure scheduler.Elector: it feeds it inputs in order and
// carries out the actions it returns. No fixed ticks: one timer for the
// elector's next deadline.
func (n *Node) electLoop() {
	e := scheduler.NewElector(n.cfg.OfferTimeout)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	n.execute(e.Step(n.cfg.Now(), scheduler.CandidatesChanged{Candidates: n.candidates()}))
	for {
		select {
		case <-n.ctx.Done():
			timer.Stop()
			return
		case <-n.elect.Wait():
		case <-timer.C:
			n.execute(e.Step(n.cfg.Now(), scheduler.Timeout{}))
		}
		refresh := false
		for _, ev := range n.elect.Drain() {
			if ev.refresh {
				refresh = true
				continue
			}
			n.execute(e.Step(n.cfg.Now(), ev.in))
		}
		if refresh {
			n.execute(e.Step(n.cfg.Now(), scheduler.CandidatesChanged{Candidates: n.candidates()}))
		}
		timer.Stop()
		if d, ok := e.NextDeadline(); ok {
			wait := d.Sub(n.cfg.Now())
			if wait < 0 {
				wait = 0
			}
			timer.Reset(wait)
		}
	}
}

// execute carries out the elector's actions. It never blocks on the network:
// offers go out on their own goroutines.
func (n *Node) execute(actions []scheduler.Action) {
	for _, a := range actions {
		switch a := a.(type) {
		case scheduler.SendOffer:
			m := Message{Type: MsgOffer, From: n.cfg.Name, To: a.Node, Claim: a.Claim, Node: a.Node, Driver: a.Driver, Round: a.Round}
			if a.Node != n.cfg.Name {
				m.Records = n.offerRecords(a.Claim)
			}
			m.Set = n.onDemandSet(a.Claim)
			n.log.Debug("offer", "claim", a.Claim, "to", a.Node, "driver", a.Driver, "round", a.Round)
			n.spawn(func() { n.send(m) })
		case scheduler.RecordAccepted:
			// The accepting node records itself in the claim's status when it
			// reserves (persist before answering), so there is nothing to write.
			n.log.Debug("claim accepted", "claim", a.Claim, "by", a.Node, "round", a.Round)
		case scheduler.Fail:
			n.failClaim(a.Claim, a.Reason)
		case scheduler.Waiting:
			n.setWaiting(a.Claim, a.Reason)
		}
	}
}

// send delivers m, turning a failed offer into a decline for the elector.
func (n *Node) send(m Message) {
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.OfferTimeout)
	defer cancel()
	if err := n.peers.Send(ctx, m); err != nil {
		if m.Type == MsgOffer {
			n.elect.Push(electEvent{in: scheduler.Declined{Claim: m.Claim, Node: m.To, Round: m.Round, Reason: "unreachable: " + err.Error()}})
		}
		n.log.Debug("send failed", "to", m.To, "claim", m.Claim, "err", err)
	}
}

// failClaim marks a claim Failed when it is still unassigned.
func (n *Node) failClaim(name, reason string) {
	_, err := store.Update(n.st, types.KindMachineClaim, name, func(c *types.MachineClaim) error {
		if !requested(c) || c.Status.Node != "" {
			return store.ErrNoChange
		}
		c.Status.Phase = types.ClaimFailed
		if last := c.Status.Reason; last != "" && !strings.Contains(reason, last) {
			// Keep what went wrong last (a failed allocation, say): it is
			// usually what a person needs to act on.
			reason += "; last: " + last
		}
		c.Status.Reason = reason
		c.Status.PhaseTimes.Mark(string(types.ClaimFailed), n.cfg.Now())
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		n.log.Warn("fail claim", "claim", name, "err", err)
		return
	}
	n.log.Info("claim failed", "claim", name, "reason", reason)
}

// setWaiting shows why a claim waits, so a person can act on it.
func (n *Node) setWaiting(name, reason string) {
	_, err := store.Update(n.st, types.KindMachineClaim, name, func(c *types.MachineClaim) error {
		if !requested(c) || c.Status.Node != "" || c.Status.Reason == reason {
			return store.ErrNoChange
		}
		c.Status.Reason = reason
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		n.log.Warn("claim reason", "claim", name, "err", err)
	}
}

func requested(c *types.MachineClaim) bool {
	return c.Status.Phase == "" || c.Status.Phase == types.ClaimRequested
}

// isElector reports whether this node elects the serving node of claim.
func (n *Node) isElector(claim string) bool {
	return scheduler.Owner(claim, n.peers.Members()) == n.cfg.Name
}

// feedClaim hands a Requested, unassigned claim to the elector.
func (n *Node) feedClaim(c *types.MachineClaim) {
	req := scheduler.Request{Claim: c.Metadata.Name, Template: c.Spec.MachineTemplate, Placement: n.cfg.Placement}
	if t, err := store.Get[types.MachineTemplate](n.st, types.KindMachineTemplate, c.Spec.MachineTemplate); err == nil {
		req.Resources = t.Spec.Resources
		req.AllowOverbook = t.Spec.AllowOverbook
		for p := range t.Spec.ProviderConfiguration {
			req.Providers = append(req.Providers, p)
		}
		sort.Strings(req.Providers)
	}
	if c.Spec.Environment != "" {
		if env, err := store.Get[types.Environment](n.st, types.KindEnvironment, c.Spec.Environment); err == nil {
			req.NodeSelector = env.Spec.NodeSelector
			if env.Spec.Placement != "" {
				req.Placement = env.Spec.Placement
			}
		}
	}
	n.elect.Push(electEvent{in: scheduler.ClaimRequested{
		Claim:      c.Metadata.Name,
		Request:    req,
		Round:      c.Status.Round,
		Deadline:   c.Metadata.CreatedAt.Add(n.bindTimeout(c)),
		AcceptedBy: c.Status.Node,
	}})
}

// candidates lists every driver instance of every live member with its
// capacity: this node's from its own ledger, the others' from their Node objects.
func (n *Node) candidates() []scheduler.Candidate {
	var out []scheduler.Candidate
	self, _ := store.Get[types.Node](n.st, types.KindNode, n.cfg.Name)
	maint := self != nil && self.Spec.Maintenance
	for _, name := range n.order {
		in := n.instances[name]
		out = append(out, scheduler.Candidate{
			Node: n.cfg.Name, Driver: in.Name, DriverType: in.Type, Remote: in.Driver.IsRemote(),
			Labels: n.cfg.Labels, Maintenance: maint, Alive: true,
			Capacity: n.capacityOf(in),
		})
	}
	for _, m := range n.peers.Members() {
		if m == n.cfg.Name {
			continue
		}
		node, err := store.Get[types.Node](n.st, types.KindNode, m)
		if err != nil {
			continue
		}
		for _, d := range node.Spec.Drivers {
			out = append(out, scheduler.Candidate{
				Node: m, Driver: d.Name, DriverType: d.Driver, Remote: d.Remote,
				Labels: node.Metadata.Labels, Maintenance: node.Spec.Maintenance, Alive: true,
				Capacity: d.Capacity,
			})
		}
	}
	return out
}

// capacityOf is an instance's capacity with this node's used and reserved.
func (n *Node) capacityOf(in Instance) types.Capacity {
	used, reserved, _ := n.ledger.usage(in.Name)
	return scheduler.WithUsage(in.Driver.HostCapacity(), used, reserved)
}

// offerRecords are the claim's and its template's records as this node has them.
func (n *Node) offerRecords(claim string) []store.Record {
	rec, err := n.st.Get(types.KindMachineClaim, claim)
	if err != nil {
		return nil
	}
	out := []store.Record{rec}
	if c, err := store.Decode(rec); err == nil {
		if t, err := n.st.Get(types.KindMachineTemplate, c.(*types.MachineClaim).Spec.MachineTemplate); err == nil {
			out = append(out, t)
		}
	}
	return out
}

// bindTimeout is the claim's bind timeout, or this node's default.
func (n *Node) bindTimeout(c *types.MachineClaim) time.Duration {
	if c.Spec.BindTimeout.Duration > 0 {
		return c.Spec.BindTimeout.Duration
	}
	return n.cfg.BindTimeout
}
