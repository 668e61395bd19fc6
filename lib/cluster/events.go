package cluster

import (
	"errors"
	"slices"

	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// reconcileEvents runs the window of every ScheduledEvent this node owns
// (rendezvous owner of "event/<name>"): at provisioning start the event's
// machine sets are created, at its end CutOff terminates its claims and deletes
// its sets (Soft lets bound claims run out); planned by scheduler.PlanEvent.
func (n *Node) reconcileEvents() {
	events, err := store.List[types.ScheduledEvent](n.st, types.KindScheduledEvent)
	if err != nil || len(events) == 0 {
		return
	}
	members := n.peers.Members()
	sets, err := store.List[types.MachineSet](n.st, types.KindMachineSet)
	if err != nil {
		return
	}
	setVals := make([]types.MachineSet, 0, len(sets))
	for _, s := range sets {
		setVals = append(setVals, *s)
	}
	now := n.cfg.Now()
	for _, ev := range events {
		if scheduler.Owner("event/"+ev.Metadata.Name, members) != n.cfg.Name {
			continue
		}
		plan := scheduler.PlanEvent(now, *ev, ev.Spec.ExpectedUsers, setVals)
		for i := range plan.Create {
			if _, err := n.st.Put(&plan.Create[i], store.PutOptions{Create: true}); err != nil && !errors.Is(err, store.ErrExists) {
				n.log.Warn("create event set", "event", ev.Metadata.Name, "set", plan.Create[i].Metadata.Name, "err", err)
			}
		}
		for i := range plan.Update {
			s := plan.Update[i]
			if _, err := store.Update(n.st, types.KindMachineSet, s.Metadata.Name, func(o *types.MachineSet) error {
				o.Spec, o.Metadata.Labels, o.Metadata.Annotations = s.Spec, s.Metadata.Labels, s.Metadata.Annotations
				return nil
			}); err != nil && !errors.Is(err, store.ErrNotFound) {
				n.log.Warn("update event set", "set", s.Metadata.Name, "err", err)
			}
		}
		if plan.TerminateClaims {
			n.terminateEventClaims(ev.Metadata.Name)
		}
		for _, name := range plan.Delete {
			if _, err := n.st.Delete(types.KindMachineSet, name, types.Version{}); err != nil && !errors.Is(err, store.ErrNotFound) {
				n.log.Warn("delete event set", "set", name, "err", err)
			}
			n.deleteSetMachines(name)
		}
		for _, w := range plan.Warnings {
			n.log.Warn("event", "event", ev.Metadata.Name, "warning", w)
		}
		if ev.Status.Phase != plan.Phase || !slices.Equal(ev.Status.CreatedMachineSets, plan.CreatedMachineSets) {
			if _, err := store.UpdateFacet(n.st, types.KindScheduledEvent, ev.Metadata.Name, types.FacetStatus, func(o *types.ScheduledEvent) error {
				o.Status.Phase, o.Status.CreatedMachineSets = plan.Phase, plan.CreatedMachineSets
				return nil
			}); err != nil && !errors.Is(err, store.ErrNotFound) {
				n.log.Warn("event status", "event", ev.Metadata.Name, "err", err)
			}
		}
	}
}

// terminateEventClaims ends every claim under an event (CutOff); their nodes
// release the machines.
func (n *Node) terminateEventClaims(event string) {
	claims, err := store.List[types.MachineClaim](n.st, types.KindMachineClaim)
	if err != nil {
		return
	}
	for _, c := range claims {
		if c.Spec.ScheduledEvent != event || c.Status.Phase == types.ClaimTerminated || c.Status.Phase == types.ClaimFailed {
			continue
		}
		if _, err := store.Update(n.st, types.KindMachineClaim, c.Metadata.Name, func(o *types.MachineClaim) error {
			o.Status.Phase = types.ClaimTerminated
			o.Status.Reason = "scheduled event " + event + " ended (CutOff)"
			o.Status.PhaseTimes.Mark(string(types.ClaimTerminated), n.cfg.Now())
			return nil
		}); err != nil && !errors.Is(err, store.ErrNotFound) {
			n.log.Warn("terminate event claim", "claim", c.Metadata.Name, "err", err)
		}
	}
}

// deleteSetMachines removes the warm machines of a deleted set; their nodes
// release them (claimed ones go with their claims).
func (n *Node) deleteSetMachines(set string) {
	machines, err := store.List[types.Machine](n.st, types.KindMachine)
	if err != nil {
		return
	}
	for _, m := range machines {
		if m.Spec.MachineSet == set && m.Spec.Claim == "" {
			if _, err := n.st.Delete(types.KindMachine, m.Metadata.Name, types.Version{}); err != nil && !errors.Is(err, store.ErrNotFound) {
				n.log.Warn("delete set machine", "machine", m.Metadata.Name, "err", err)
			}
		}
	}
}
