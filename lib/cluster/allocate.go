package cluster

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// startAllocate allocates a reserved machine on its own goroutine.
func (n *Node) startAllocate(machine string) {
	if !n.claimBusy(machine) {
		return
	}
	n.spawn(func() {
		defer n.doneBusy(machine)
		if err := n.allocate(n.ctx, machine); err != nil {
			n.log.Warn("allocate", "machine", machine, "err", err)
		}
	})
}

// claimMeta is what a machine learns of its claim: the claim's metadata, under
// the keys its template declares only, plus HF_* names, passed to the driver
// (environment variables, user data, labels). The API refuses other metadata;
// a template changed since the claim was made is checked again here.
func claimMeta(c *types.MachineClaim, t *types.MachineTemplate, machine, node string) (map[string]string, error) {
	if err := t.CheckClaimMetadata(c.Spec.Metadata); err != nil {
		return nil, err
	}
	meta := maps.Clone(c.Spec.Metadata)
	if meta == nil {
		meta = map[string]string{}
	}
	meta[types.MetaClaim] = c.Metadata.Name
	meta[types.MetaMachine] = machine
	meta[types.MetaNode] = node
	meta[types.MetaTemplate] = c.Spec.MachineTemplate
	if c.Spec.User != "" {
		meta[types.MetaUser] = c.Spec.User
	}
	return meta, nil
}

func (n *Node) allocate(ctx context.Context, name string) error {
	mach, err := store.Get[types.Machine](n.st, types.KindMachine, name)
	if err != nil {
		return fmt.Errorf("read machine: %w", err)
	}
	in, ok := n.instances[mach.Spec.Driver]
	if !ok {
		return fmt.Errorf("no driver %q", mach.Spec.Driver)
	}
	if e, ok := n.ledger.get(name); !ok || e.Phase != types.MachinePending {
		// Allocated already (a repeated offer), or released meanwhile: a
		// second Allocate would leave the first resource held by nobody.
		return nil
	}
	claim, err := store.Get[types.MachineClaim](n.st, types.KindMachineClaim, mach.Spec.Claim)
	if err != nil {
		n.release(ctx, name, "claim is gone")
		return nil
	}
	tmpl, err := store.Get[types.MachineTemplate](n.st, types.KindMachineTemplate, mach.Spec.MachineTemplate)
	if err != nil {
		return n.allocFailed(mach, fmt.Errorf("machine template %s: %w", mach.Spec.MachineTemplate, err))
	}
	meta, err := claimMeta(claim, tmpl, name, n.cfg.Name)
	if err != nil {
		return n.allocFailed(mach, fmt.Errorf("claim metadata: %w", err))
	}
	if _, err := n.setMachine(name, func(m *types.Machine) {
		m.Status.Phase = types.MachineProvisioning
		m.Status.PhaseTimes.Mark(string(types.MachineProvisioning), n.cfg.Now())
	}); err != nil {
		return err
	}
	res, err := in.Driver.Allocate(ctx, *tmpl, meta)
	if err != nil {
		if ctx.Err() != nil {
			// Shutting down: the restart reconcile settles this machine.
			return nil
		}
		return n.allocFailed(mach, err)
	}
	// Fencing: keep the machine only if the claim still names this node and round.
	claim, err = store.Get[types.MachineClaim](n.st, types.KindMachineClaim, mach.Spec.Claim)
	if err != nil || claim.Status.Node != n.cfg.Name || claim.Status.Round != mach.Spec.Round || !requested(claim) {
		n.log.Info("allocation fenced", "machine", name, "claim", mach.Spec.Claim, "round", mach.Spec.Round)
		if derr := in.Driver.Deallocate(context.WithoutCancel(ctx), res); derr != nil {
			n.log.Warn("deallocate fenced", "machine", name, "err", derr)
		}
		n.dropMachine(name)
		return nil
	}
	now := n.cfg.Now()
	if set := claim.Metadata.Labels[LabelProvisionFor]; set != "" {
		// A warm machine for a pool: it joins its set unclaimed, and the
		// claim that provisioned it is done.
		return n.joinPool(ctx, in, mach, claim, res, set)
	}
	if err := n.runMachine(ctx, in, name, res, now, nil); err != nil {
		return err
	}
	n.ledger.setPhase(name, types.MachineRunning, res)
	bound := false
	bc, err := store.Update(n.st, types.KindMachineClaim, mach.Spec.Claim, func(c *types.MachineClaim) error {
		if c.Status.Node != n.cfg.Name || c.Status.Round != mach.Spec.Round || !requested(c) {
			return store.ErrNoChange
		}
		bound = true
		c.Status.Phase = types.ClaimBound
		c.Status.Machine = name
		c.Status.Reason = ""
		c.Status.PhaseTimes.Mark(string(types.ClaimBound), now)
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("bind claim: %w", err)
	}
	if bound && err == nil {
		n.metrics.bound.WithLabelValues("allocated").Inc()
		n.metrics.bindLatency.Observe(now.Sub(bc.Metadata.CreatedAt).Seconds())
	}
	n.forgetFailures(mach.Spec.Claim)
	n.log.Debug("claim bound", "claim", mach.Spec.Claim, "machine", name)
	return nil
}

// runMachine records machine name Running with the resource its driver
// holds (more, when not nil, changes the record further). When the record
// went away meanwhile (deleted elsewhere) nothing may hold the resource, so
// it is given back and the machine forgotten.
func (n *Node) runMachine(ctx context.Context, in Instance, name string, res *types.Resource, now time.Time, more func(m *types.Machine)) error {
	_, err := n.setMachine(name, func(m *types.Machine) {
		showResource(m, res)
		m.Status.PhaseTimes.Mark(string(types.MachineRunning), now)
		if more != nil {
			more(m)
		}
	})
	if err != nil {
		if derr := in.Driver.Deallocate(context.WithoutCancel(ctx), res); derr != nil {
			n.log.Warn("deallocate orphan", "machine", name, "err", derr)
		}
		n.ledger.remove(name)
	}
	return err
}

// showResource makes m Running on res: the resource and what users see of it.
func showResource(m *types.Machine, res *types.Resource) {
	m.Status.Phase = types.MachineRunning
	m.Status.Reason = ""
	m.Status.Resource = res
	m.Status.MachineInformation = res.Info
	m.Status.ConnectEndpoints = res.Endpoints
}

// allocFailed drops the reservation and hands the claim back to its elector,
// which offers it again in a higher round.
func (n *Node) allocFailed(mach *types.Machine, cause error) error {
	reason := fmt.Sprintf("allocation on %s (driver %s) failed: %v", n.cfg.Name, mach.Spec.Driver, cause)
	n.metrics.allocFailed.WithLabelValues(mach.Spec.Driver).Inc()
	n.dropMachine(mach.Metadata.Name)
	// Back off before handing the claim back, so a driver that keeps failing
	// (a bad image, a broken engine) is not hammered in a tight loop.
	select {
	case <-n.ctx.Done():
		return nil
	case <-time.After(n.failureBackoff(mach.Spec.Claim)):
	}
	_, err := store.Update(n.st, types.KindMachineClaim, mach.Spec.Claim, func(c *types.MachineClaim) error {
		if c.Status.Node != n.cfg.Name || c.Status.Round != mach.Spec.Round || !requested(c) {
			return store.ErrNoChange
		}
		c.Status.Node, c.Status.Driver, c.Status.Machine = "", "", ""
		c.Status.Reason = reason
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("release claim: %w", err)
	}
	n.log.Info("allocation failed", "machine", mach.Metadata.Name, "claim", mach.Spec.Claim, "err", cause)
	return nil
}

// setMachine updates this node's machine status.
func (n *Node) setMachine(name string, fn func(m *types.Machine)) (*types.Machine, error) {
	m, err := store.Update(n.st, types.KindMachine, name, func(m *types.Machine) error {
		fn(m)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("write machine %s: %w", name, err)
	}
	return m, nil
}

// dropMachine forgets a machine that holds nothing in its driver.
func (n *Node) dropMachine(name string) {
	n.ledger.remove(name)
	if _, err := n.st.Delete(types.KindMachine, name, types.Version{}); err != nil && !errors.Is(err, store.ErrNotFound) {
		n.log.Warn("delete machine", "machine", name, "err", err)
	}
}

// startRelease deallocates a machine on its own goroutine.
func (n *Node) startRelease(machine, reason string) {
	if !n.claimBusy(machine) {
		return
	}
	n.spawn(func() {
		defer n.doneBusy(machine)
		n.release(n.ctx, machine, reason)
	})
}

// release deallocates a machine's resource and removes the machine.
func (n *Node) release(ctx context.Context, name, reason string) {
	mach, err := store.Get[types.Machine](n.st, types.KindMachine, name)
	if err != nil {
		// The record is gone (deleted elsewhere, say while this node was cut
		// off); what the driver holds is still ours to give back.
		if e, ok := n.ledger.get(name); ok && e.Resource != nil {
			if in, ok := n.instances[e.Driver]; ok {
				if err := in.Driver.Deallocate(ctx, e.Resource); err != nil && !errors.Is(err, drivers.ErrNotFound) {
					n.log.Warn("deallocate", "machine", name, "err", err)
					return
				}
				n.metrics.released.WithLabelValues(e.Driver).Inc()
			}
		}
		n.ledger.remove(name)
		return
	}
	// What the driver holds: the record's word, or the ledger's when the
	// record was overwritten from an older copy (a Lost verdict written by
	// another node while it could not see this one).
	res := mach.Status.Resource
	if e, ok := n.ledger.get(name); ok && res == nil {
		res = e.Resource
	}
	// From here on the machine is going: it must not be resumed for its claim.
	n.ledger.setPhase(name, types.MachineTerminating, nil)
	if res != nil {
		if in, ok := n.instances[mach.Spec.Driver]; ok {
			if _, err := n.setMachine(name, func(m *types.Machine) {
				m.Status.Phase = types.MachineTerminating
				m.Status.Reason = reason
				m.Status.PhaseTimes.Mark(string(types.MachineTerminating), n.cfg.Now())
			}); err != nil {
				n.log.Warn("release", "machine", name, "err", err)
			}
			if err := in.Driver.Deallocate(ctx, res); err != nil && !errors.Is(err, drivers.ErrNotFound) {
				// Keep the machine; the next resync tries again.
				n.log.Warn("deallocate", "machine", name, "err", err)
				return
			}
			n.metrics.released.WithLabelValues(mach.Spec.Driver).Inc()
		}
	}
	n.dropMachine(name)
	n.log.Debug("machine released", "machine", name, "reason", reason)
}

// failureBackoff is how long to wait before handing back a claim whose
// allocation failed here: 50 ms doubling per failure of that claim, at most 5 s.
func (n *Node) failureBackoff(claim string) time.Duration {
	n.busyMu.Lock()
	defer n.busyMu.Unlock()
	if n.failures == nil {
		n.failures = map[string]int{}
	}
	f := n.failures[claim]
	n.failures[claim] = f + 1
	d := 50 * time.Millisecond << min(f, 7)
	return min(d, 5*time.Second)
}

// forgetFailures drops a claim's failure count once it is bound.
func (n *Node) forgetFailures(claim string) {
	n.busyMu.Lock()
	delete(n.failures, claim)
	n.busyMu.Unlock()
}
