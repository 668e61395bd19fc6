package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// rollbackTimeout bounds a release that must finish although the node is
// stopping (the restart would otherwise find a half-made machine).
const rollbackTimeout = 2 * time.Minute

// claimMeta is what a machine learns of its claim: the claim's metadata, under
// the keys its template declares only, plus HF_* names, passed to the driver
// (environment variables, user data, labels). The API refuses other metadata;
// a template changed since the claim was made is checked again here. A pool
// machine learns its set, not the set's provisioning claim: that claim is
// deleted once the machine is warm, and the user's claim that takes it later
// cannot reach an environment or a label made before.
func claimMeta(c *types.MachineClaim, t *types.MachineTemplate, machine, node string) (map[string]string, error) {
	if err := t.CheckClaimMetadata(c.Spec.Metadata); err != nil {
		return nil, err
	}
	meta := maps.Clone(c.Spec.Metadata)
	if meta == nil {
		meta = map[string]string{}
	}
	if set := c.Metadata.Labels[LabelProvisionFor]; set != "" {
		meta[types.MetaMachineSet] = set
	} else {
		meta[types.MetaClaim] = c.Metadata.Name
	}
	meta[types.MetaMachine] = machine
	meta[types.MetaNode] = node
	meta[types.MetaTemplate] = c.Spec.MachineTemplate
	if c.Spec.User != "" {
		meta[types.MetaUser] = c.Spec.User
	}
	return meta, nil
}

// claimBusy marks an entry busy; false when it is gone or already busy.
func (a *acceptor) claimBusy(machine string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.entries[machine]
	if !ok || e.Busy {
		return false
	}
	e.Busy = true
	return true
}

// doneBusy ends an entry's operation and queues its key again after wait
// (at once when 0).
func (a *acceptor) doneBusy(machine, key string, wait time.Duration) {
	a.mu.Lock()
	if e, ok := a.entries[machine]; ok {
		e.Busy = false
		if e.Claim != "" {
			key = e.Claim
		}
	}
	a.mu.Unlock()
	a.q.AddAfter(key, wait)
}

// setMachine changes this node's own machine record (its owner facet).
func (a *acceptor) setMachine(name string, fn func(m *types.Machine)) error {
	_, err := store.UpdateFacet(a.n.st, types.KindMachine, name, types.FacetOwner, func(m *types.Machine) error {
		fn(m)
		return nil
	})
	if err != nil {
		return fmt.Errorf("write machine %s: %w", name, err)
	}
	return nil
}

// startAllocate allocates a reserved machine on a goroutine of its own.
func (a *acceptor) startAllocate(e entry, claim *types.MachineClaim) {
	if claim == nil || !a.claimBusy(e.Machine) {
		return
	}
	key := e.Claim
	a.n.spawn(func() {
		defer a.doneBusy(e.Machine, key, 0)
		a.allocate(e, claim)
	})
}

func (a *acceptor) allocate(e entry, claim *types.MachineClaim) {
	ctx := a.n.ctx
	if dl := a.n.claimState(claim).Deadline; !dl.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, dl)
		defer cancel()
	}
	in, ok := a.n.instances[e.Driver]
	if !ok {
		a.allocFailed(e, fmt.Errorf("no driver %q", e.Driver))
		return
	}
	tmpl, ok := a.n.template(claim.Spec.MachineTemplate)
	if !ok {
		t, err := store.Get[types.MachineTemplate](a.n.st, types.KindMachineTemplate, claim.Spec.MachineTemplate)
		if err != nil {
			a.allocFailed(e, fmt.Errorf("machine template %s: %w", claim.Spec.MachineTemplate, err))
			return
		}
		tmpl = t
	}
	meta, err := claimMeta(claim, tmpl, e.Machine, a.n.cfg.Name)
	if err != nil {
		a.allocFailed(e, fmt.Errorf("claim metadata: %w", err))
		return
	}
	set := ""
	if m, ok := a.n.machine(e.Machine); ok {
		set = m.Spec.MachineSet
	}
	conf, _, err := a.n.resolve(claim, tmpl, set, in)
	if err != nil {
		a.allocFailed(e, fmt.Errorf("configuration of template %s: %w", tmpl.Metadata.Name, err))
		return
	}
	shown := a.showProvisioning(e.Machine)
	res, err := in.Driver.Allocate(ctx, conf.Template, meta)
	shown()
	if err != nil {
		switch {
		case a.n.ctx.Err() != nil:
			return // stopping: the restart reconcile settles this machine
		case ctx.Err() != nil:
			err = fmt.Errorf("the claim's bind timeout passed while allocating: %w", err)
		}
		a.allocFailed(e, err)
		return
	}
	if missing := conf.MissingInformation(res.Info); len(missing) > 0 {
		// The validator of the proposal's discussion: hf cannot hand out a
		// machine without what its Provider says every machine reports.
		a.deallocate(in, e.Machine, res)
		a.allocFailed(e, fmt.Errorf("provider %s requires machine information %s, which driver %s did not report",
			conf.Provider, strings.Join(missing, ", "), in.Name))
		return
	}
	now := a.n.cfg.Now()
	a.update(e.Machine, func(x *entry) { x.Phase = types.MachineRunning; x.setResource(res) })
	if err := a.setMachine(e.Machine, func(m *types.Machine) {
		showResource(m, res)
		m.Status.PhaseTimes.Mark(string(types.MachineRunning), now)
	}); err != nil {
		// The record went away meanwhile, or the store refused the write
		// (its disk full): nothing may hold a resource it does not show.
		// A refused record goes with it; the claim, with nothing held for
		// it here, is given back (checkAccepted).
		a.n.log.Warn("record running machine", "machine", e.Machine, "err", err)
		a.deallocate(in, e.Machine, res)
		if isNotFound(err) {
			a.remove(e.Machine)
		} else {
			a.dropMachine(e.Machine)
			a.q.AddAfter(e.Claim, time.Second)
		}
		return
	}
	a.forgetFailures(e.Claim)
	a.n.log.Debug("machine allocated", "machine", e.Machine, "claim", e.Claim, "round", e.Round)
}

// provisioningShownAfter is how long an allocation (or a release, see
// release) runs before its machine is shown Provisioning (Terminating): a
// fast driver's machines go from Pending to Running, and from Running to
// gone, without the extra write.
const provisioningShownAfter = 200 * time.Millisecond

// showProvisioning marks the machine Provisioning if the allocation is
// still under way after provisioningShownAfter. The returned function ends
// that: it returns once no such write is under way, so the Running write
// that follows is the last.
func (a *acceptor) showProvisioning(machine string) (stop func() (shown bool)) {
	return a.showLater(func() {
		if err := a.setMachine(machine, func(m *types.Machine) {
			m.Status.Phase = types.MachineProvisioning
			m.Status.PhaseTimes.Mark(string(types.MachineProvisioning), a.n.cfg.Now())
		}); err != nil {
			a.n.log.Debug("show provisioning", "machine", machine, "err", err)
		}
	})
}

// showLater runs write if the operation it shows is still under way after
// provisioningShownAfter. The returned function ends that: it returns once
// write is not running, and reports whether it ran.
func (a *acceptor) showLater(write func()) (stop func() (shown bool)) {
	var mu sync.Mutex
	done, shown := false, false
	t := time.AfterFunc(provisioningShownAfter, func() {
		mu.Lock()
		defer mu.Unlock()
		if done {
			return
		}
		shown = true
		write()
	})
	return func() bool {
		t.Stop()
		mu.Lock()
		defer mu.Unlock()
		done = true
		return shown
	}
}

// showResource makes m Running on res: the resource and what users see of it.
func showResource(m *types.Machine, res *types.Resource) {
	m.Status.Phase = types.MachineRunning
	m.Status.Reason = ""
	m.Status.Resource = res
	m.Status.MachineInformation = res.Info
	m.Status.Addresses = res.Endpoints
}

// allocFailed drops the reservation and gives the round back, after a
// back-off so that a driver that keeps failing (a bad image, a broken
// engine) is not hammered in a tight loop.
//
// A driver without room (drivers.ErrNoCapacity: a cloud's insufficient
// capacity or quota) declines rather than fails: the same give-back, worded
// as a decline and not counted as a failure; the claim waits and is offered
// again once a report shows room.
//
// The reason says how many times the claim's allocation failed here: the
// claim is offered again while this node still fits, so the last of its
// reasons is what a claim failed at its bind timeout shows.
func (a *acceptor) allocFailed(e entry, cause error) {
	wait, n := a.failureBackoff(e.Claim)
	reason := fmt.Sprintf("allocation on %s (driver %s) failed: %v", a.n.cfg.Name, e.Driver, cause)
	if errors.Is(cause, drivers.ErrNoCapacity) {
		reason = fmt.Sprintf("declined by %s (driver %s), no capacity: %v", a.n.cfg.Name, e.Driver, cause)
		a.n.log.Info("allocation declined: no capacity", "machine", e.Machine, "claim", e.Claim, "err", cause)
	} else {
		if n > 1 {
			reason = fmt.Sprintf("allocation on %s (driver %s) failed, %d times for this claim: %v", a.n.cfg.Name, e.Driver, n, cause)
		}
		a.n.metrics.allocFailed.WithLabelValues(e.Driver).Inc()
		a.n.log.Info("allocation failed", "machine", e.Machine, "claim", e.Claim, "failures", n, "err", cause)
	}
	select {
	case <-a.n.ctx.Done():
		return // the restart reconcile drops the reservation
	case <-time.After(wait):
	}
	a.giveBack(e.Claim, e.Round, e.Driver, reason)
	a.dropMachine(e.Machine)
	if _, ok := a.n.cache.Get(types.KindMachineClaim, e.Claim); !ok {
		a.forgetFailures(e.Claim) // deleted while this allocation ran
	}
}

// dropMachine forgets a machine that holds nothing in its driver. A delete
// of its record that the store refuses (its disk full) is tried again
// (keyDropPrefix), or the record would show a machine nobody holds.
func (a *acceptor) dropMachine(name string) {
	a.remove(name)
	a.deleteRecord(name)
}

// keyDropPrefix + a machine's name is the acceptor's key for deleting the
// record of a machine of this node it no longer holds.
const keyDropPrefix = "d/"

// deleteRecord deletes the record of machine name, which this node holds
// nothing for, asking to try again when the store refuses.
func (a *acceptor) deleteRecord(name string) {
	_, err := a.n.st.Delete(types.KindMachine, name, types.Version{})
	if err != nil && !isNotFound(err) {
		a.n.refused.refused(writeDrop, name, err, time.Second, "machine", name)
		a.q.AddAfter(keyDropPrefix+name, time.Second)
		return
	}
	a.n.refused.settled(writeDrop, name)
}

// dropAgain deletes again the record of a machine whose delete the store
// refused, when it is still this node's and the node holds nothing for it.
func (a *acceptor) dropAgain(name string) {
	if _, held := a.get(name); held {
		a.n.refused.settled(writeDrop, name) // taken up again: no longer to delete
		return
	}
	m, err := store.Get[types.Machine](a.n.st, types.KindMachine, name)
	if err != nil || m.Spec.Node != a.n.cfg.Name {
		a.n.refused.settled(writeDrop, name)
		return
	}
	a.deleteRecord(name)
}

// bind writes the claim's binding to a running machine of this node: Bound,
// or for a provisioning claim, Ended with the machine joining its set warm.
func (a *acceptor) bind(e entry, claim *types.MachineClaim) {
	if claim == nil {
		return
	}
	if set := claim.Metadata.Labels[LabelProvisionFor]; set != "" {
		a.joinPool(e, claim, set)
		return
	}
	now := a.n.cfg.Now()
	bound := false
	_, err := store.UpdateFacet(a.n.st, types.KindMachineClaim, e.Claim, types.FacetBinding, func(c *types.MachineClaim) error {
		if b := c.Status.Binding; b != nil && b.Round == e.Round && b.Machine == e.Machine && b.Phase == types.BindingBound {
			return store.ErrNoChange
		}
		bound = true
		c.SetBinding(types.ClaimBinding{Round: e.Round, Node: a.n.cfg.Name, Driver: e.Driver, Machine: e.Machine, Phase: types.BindingBound, At: now}, now)
		return nil
	})
	switch {
	case err == nil && bound:
		a.n.metrics.bound.WithLabelValues("allocated").Inc()
		a.n.metrics.bindLatency.Observe(now.Sub(claim.Metadata.CreatedAt).Seconds())
		a.n.log.Debug("claim bound", "claim", e.Claim, "machine", e.Machine, "round", e.Round)
	case errors.Is(err, store.ErrFenced), isNotFound(err):
		a.q.Add(e.Claim) // the claim moved on or went: release next
	case err != nil:
		a.n.refused.refused(writeBind, e.Claim, err, time.Second, "claim", e.Claim, "machine", e.Machine)
		a.q.AddAfter(e.Claim, time.Second)
		return
	}
	a.n.refused.settled(writeBind, e.Claim)
}

// joinPool turns a freshly allocated machine of a provisioning claim into a
// warm, unclaimed machine of its set, and ends the claim (its creator, the
// set's owner, deletes it).
func (a *acceptor) joinPool(e entry, claim *types.MachineClaim, set string) {
	if !a.update(e.Machine, func(x *entry) { x.Claim, x.Set = "", set }) {
		return
	}
	if err := a.setMachine(e.Machine, func(m *types.Machine) { m.Spec.Claim, m.Spec.MachineSet = "", set }); err != nil {
		a.n.log.Warn("machine joins pool", "machine", e.Machine, "err", err)
	}
	_, err := store.UpdateFacet(a.n.st, types.KindMachineClaim, claim.Metadata.Name, types.FacetBinding, func(c *types.MachineClaim) error {
		now := a.n.cfg.Now()
		c.SetBinding(types.ClaimBinding{Round: e.Round, Node: a.n.cfg.Name, Driver: e.Driver, Machine: e.Machine,
			Phase: types.BindingEnded, Reason: "machine " + e.Machine + " joined machine set " + set, At: now}, now)
		return nil
	})
	if err != nil && !isNotFound(err) && !errors.Is(err, store.ErrFenced) {
		a.n.log.Warn("end provisioning claim", "claim", claim.Metadata.Name, "err", err)
	}
	a.n.log.Debug("machine joined pool", "machine", e.Machine, "set", set)
}

// startRelease releases a machine on a goroutine of its own. gone says
// that the machine's claim is gone (see release).
func (a *acceptor) startRelease(e entry, why string, gone bool) {
	if !a.claimBusy(e.Machine) {
		return
	}
	key := e.Claim
	if key == "" {
		key = poolKey(e.Machine)
	}
	a.n.spawn(func() {
		var wait time.Duration
		if !a.release(e.Machine, why, gone) {
			wait = 5 * time.Second // the driver failed: try again later
		}
		a.doneBusy(e.Machine, key, wait)
	})
}

// release marks the machine Terminating, deallocates it and deletes its
// record; false when the driver failed (the machine stays Terminating). The
// release finishes even when the node is stopping.
//
// A machine whose claim is gone (deleted: the end of every claim) is
// shown Terminating only when its release takes longer than
// provisioningShownAfter, as an allocation is shown Provisioning: the
// record is deleted right after, and that write, with its copy on every
// peer, was one of the eight a claim makes from create to delete. Nothing
// reads that phase before the delete: the record holds the
// resource until it is deallocated, so a crash in between leaves a record
// that a restart settles as before (its claim gone, the machine is
// released, or dropped when the driver no longer holds it). A machine whose
// claim still exists (fenced, ended, reaped) is shown Terminating first, as
// a restart reads that phase as a release under way.
func (a *acceptor) release(name, why string, gone bool) bool {
	e, ok := a.get(name)
	if !ok {
		return true
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.n.ctx), rollbackTimeout)
	defer cancel()
	mark := func() {
		if err := a.setMachine(name, func(m *types.Machine) {
			m.Status.Phase = types.MachineTerminating
			m.Status.Reason = why
			m.Status.PhaseTimes.Mark(string(types.MachineTerminating), a.n.cfg.Now())
		}); err != nil && !isNotFound(err) {
			a.n.log.Warn("mark terminating", "machine", name, "err", err)
		}
	}
	shown := func() bool { return true }
	if e.Phase != types.MachineTerminating {
		a.update(name, func(x *entry) { x.Phase = types.MachineTerminating })
		if gone {
			shown = a.showLater(mark)
		} else {
			mark()
		}
	}
	released := a.releaseResource(ctx, e)
	if !shown() && !released {
		mark() // the machine stays, Terminating: show it
	}
	if !released {
		return false
	}
	a.dropMachine(name)
	a.n.log.Info("machine released", "machine", name, "claim", e.Claim, "reason", why)
	return true
}

// releaseResource deallocates what e holds in its driver; false when the
// driver failed.
func (a *acceptor) releaseResource(ctx context.Context, e entry) bool {
	if e.Resource == nil {
		return true
	}
	in, ok := a.n.instances[e.Driver]
	if !ok {
		a.n.log.Warn("release: no such driver", "machine", e.Machine, "driver", e.Driver)
		return false
	}
	if err := in.Driver.Deallocate(ctx, e.whole()); err != nil && !errors.Is(err, drivers.ErrNotFound) {
		a.n.log.Warn("deallocate", "machine", e.Machine, "err", err)
		return false
	}
	a.n.metrics.released.WithLabelValues(e.Driver).Inc()
	return true
}

// deallocate gives a resource back that no record holds any more.
func (a *acceptor) deallocate(in Instance, machine string, res *types.Resource) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(a.n.ctx), rollbackTimeout)
	defer cancel()
	if err := in.Driver.Deallocate(ctx, res); err != nil && !errors.Is(err, drivers.ErrNotFound) {
		a.n.log.Warn("deallocate orphan", "machine", machine, "err", err)
	}
}
