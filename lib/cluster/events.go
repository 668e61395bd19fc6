package cluster

import (
	"errors"
	"slices"
	"time"

	"github.com/hf-fleet/hf/lib/cluster/cache"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// reconcileEvent runs the window of one ScheduledEvent as
// scheduler.PlanEvent says: at provisioning start the event's machine sets
// are created, at its end CutOff ends its claims and deletes its sets (Soft
// lets bound claims run out). A deleted event ends as a Soft one
// (scheduler.PlanDeletedEvent). It asks to run again at the next phase
// change.
func (d *duties) reconcileEvent(name string) time.Duration {
	n := d.n
	now := n.cfg.Now()
	sets := cache.TypedList[types.MachineSet](n.cache, types.KindMachineSet)
	setVals := make([]types.MachineSet, 0, len(sets))
	for _, s := range sets {
		setVals = append(setVals, *s)
	}
	ev, ok := cache.Typed[types.ScheduledEvent](n.cache, types.KindScheduledEvent, name)
	if !ok {
		// Its sets' changes queue it again until the last is gone.
		d.applyEventPlan(name, scheduler.PlanDeletedEvent(now, name, setVals))
		return 0
	}
	plan := scheduler.PlanEvent(now, *ev, ev.Spec.ExpectedUsers, setVals)
	d.applyEventPlan(name, plan)
	if _, changed := ev.Status.Conditions.Set(plan.Provisioned, now); changed || ev.Status.Phase != plan.Phase || !slices.Equal(ev.Status.CreatedMachineSets, plan.CreatedMachineSets) {
		if _, err := store.UpdateFacet(n.st, types.KindScheduledEvent, name, types.FacetStatus, func(o *types.ScheduledEvent) error {
			o.Status.Phase, o.Status.CreatedMachineSets = plan.Phase, plan.CreatedMachineSets
			o.Status.Conditions, _ = o.Status.Conditions.Set(plan.Provisioned, now)
			return nil
		}); err != nil && !isNotFound(err) {
			n.log.Warn("event status", "event", name, "err", err)
		}
	}
	return until(now, plan.Next)
}

// applyEventPlan carries out what plan says of event name's sets and
// claims.
func (d *duties) applyEventPlan(name string, plan scheduler.EventPlan) {
	n := d.n
	for i := range plan.Create {
		if _, err := n.st.Put(&plan.Create[i], store.PutOptions{Create: true}); err != nil && !isExists(err) {
			n.log.Warn("create event set", "event", name, "set", plan.Create[i].Metadata.Name, "err", err)
		}
	}
	for i := range plan.Update {
		s := plan.Update[i]
		if _, err := store.UpdateFacet(n.st, types.KindMachineSet, s.Metadata.Name, types.FacetSpec, func(o *types.MachineSet) error {
			o.Spec, o.Metadata.Labels, o.Metadata.Annotations = s.Spec, s.Metadata.Labels, s.Metadata.Annotations
			return nil
		}); err != nil && !isNotFound(err) {
			n.log.Warn("update event set", "set", s.Metadata.Name, "err", err)
		}
	}
	if plan.TerminateClaims {
		for _, c := range cache.TypedIndex[types.MachineClaim](n.cache, idxClaimEvent, name) {
			if c.Status.Phase != types.ClaimTerminated && c.Status.Phase != types.ClaimFailed {
				endClaim(n, c.Metadata.Name, "scheduled event "+name+" ended (CutOff)")
			}
		}
	}
	for _, set := range plan.Delete {
		if _, err := n.st.Delete(types.KindMachineSet, set, types.Version{}); err != nil && !isNotFound(err) {
			n.log.Warn("delete event set", "set", set, "err", err)
		}
		// Its warm machines go with it (reconcileSet of the deleted set).
	}
	for _, w := range plan.Warnings {
		n.log.Warn("event", "event", name, "warning", w)
	}
}

func isExists(err error) bool { return errors.Is(err, store.ErrExists) }
