package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// reconcileStart settles what the drivers really hold against the store
// before the node serves anything: machines the drivers still hold are
// adopted into the ledger (their claims are reconciled as usual once the
// node runs), machines they lost are reported in their claims' bindings
// (Lost: the template's onNodeLoss applies) and their records dropped,
// reservations that were never allocated are given back, and resources the
// store does not know are released.
func (a *acceptor) reconcileStart(ctx context.Context) error {
	self := a.n.cfg.Name
	held := map[string]map[string]types.Resource{} // instance -> resource id -> resource
	for _, name := range a.n.order {
		rs, err := a.n.instances[name].Driver.List(ctx)
		if err != nil {
			return fmt.Errorf("list driver %s: %w", name, err)
		}
		held[name] = map[string]types.Resource{}
		for _, r := range rs {
			held[name][r.ID] = r
		}
	}
	machines, err := store.List[types.Machine](a.n.st, types.KindMachine)
	if err != nil {
		return fmt.Errorf("list machines: %w", err)
	}
	known := map[string]map[string]bool{}
	for _, m := range machines {
		if m.Spec.Node != self {
			continue
		}
		name := m.Metadata.Name
		res := m.Status.Resource
		if res != nil {
			if known[m.Spec.Driver] == nil {
				known[m.Spec.Driver] = map[string]bool{}
			}
			known[m.Spec.Driver][res.ID] = true
		}
		e := &entry{Machine: name, Claim: m.Spec.Claim, Set: m.Spec.MachineSet, Driver: m.Spec.Driver, Round: m.Spec.Round, Phase: m.Status.Phase, Resource: res}
		if res != nil {
			e.Res = res.Resources
		} else if t, err := store.Get[types.MachineTemplate](a.n.st, types.KindMachineTemplate, m.Spec.MachineTemplate); err == nil {
			e.Res = t.Spec.Resources.AtLeast(a.n.cfg.MinMachine)
		}
		_, stillHeld := held[m.Spec.Driver][idOf(res)]
		_, configured := a.n.instances[m.Spec.Driver]
		switch {
		case res != nil && stillHeld:
			if e.Phase == types.MachineLost {
				e.Phase = types.MachineRunning // the verdict was wrong: it runs here
			}
			a.mu.Lock()
			a.putLocked(e)
			a.mu.Unlock()
		case res == nil && (m.Status.Phase == types.MachinePending || m.Status.Phase == types.MachineProvisioning):
			// Reserved, never allocated: the claim's round is given back.
			if m.Spec.Claim != "" {
				a.giveBack(m.Spec.Claim, m.Spec.Round, m.Spec.Driver, fmt.Sprintf("node %s restarted before allocating", self))
			}
			a.dropMachine(name)
		case res != nil && !configured:
			// The node's configuration lost the instance: nobody can ask
			// it about the resource, let alone release it. The operator
			// is told where it is; configured again, the instance finds
			// it unknown at the next start and releases it.
			why := fmt.Sprintf("node %s no longer has driver %s (its configuration changed): resource %s was left as it was", self, m.Spec.Driver, res.ID)
			a.n.log.Warn("machine of a driver the node no longer has", "machine", name, "driver", m.Spec.Driver, "resource", res.ID)
			if m.Spec.Claim != "" && m.Status.Phase != types.MachineTerminating {
				a.machineGoneAtStart(m, why)
			}
			a.dropMachine(name)
		default:
			// A machine of a claim that is gone was being released (its
			// record is shown Terminating only when that takes long, see
			// release): nothing was lost.
			if m.Spec.Claim != "" && m.Status.Phase != types.MachineTerminating && a.claimLive(m.Spec.Claim) {
				a.machineGoneAtStart(m, "driver "+m.Spec.Driver+" no longer holds it")
			}
			a.dropMachine(name)
		}
	}
	for inst, rs := range held {
		for id, r := range rs {
			if known[inst][id] {
				continue
			}
			a.n.log.Info("release unknown resource", "driver", inst, "resource", id)
			if err := a.n.instances[inst].Driver.Deallocate(ctx, &r); err != nil && !errors.Is(err, drivers.ErrNotFound) {
				a.n.log.Warn("release unknown resource", "driver", inst, "resource", id, "err", err)
			}
		}
	}
	return nil
}

func idOf(r *types.Resource) string {
	if r == nil {
		return ""
	}
	return r.ID
}

// claimLive reports whether the store holds claim live (true also when it
// cannot tell).
func (a *acceptor) claimLive(claim string) bool {
	_, err := a.n.st.Get(types.KindMachineClaim, claim)
	return !isNotFound(err)
}

// machineGoneAtStart records in its claim's binding that a machine of this
// node was lost while the node was down.
func (a *acceptor) machineGoneAtStart(m *types.Machine, why string) {
	a.bindingGone(m.Spec.Claim, m.Spec.Round, m.Metadata.Name, types.BindingLost, "machine "+m.Metadata.Name+": "+why)
	a.n.metrics.lost.Inc()
	a.n.log.Info("machine lost", "machine", m.Metadata.Name, "claim", m.Spec.Claim, "reason", why)
}
