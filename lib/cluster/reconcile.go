package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

func isNotFound(err error) bool { return errors.Is(err, store.ErrNotFound) }

// reconcileStart settles what the drivers really hold against the store before
// the node serves anything: machines the drivers still hold are adopted, the
// ones they lost are marked Lost and their claims re-bound or failed (per the
// template's onNodeLoss), and resources the store does not know are released.
func (n *Node) reconcileStart(ctx context.Context) error {
	held := map[string]map[string]types.Resource{} // instance -> resource id -> resource
	for _, name := range n.order {
		in := n.instances[name]
		rs, err := in.Driver.List(ctx)
		if err != nil {
			return fmt.Errorf("list driver %s: %w", name, err)
		}
		held[name] = map[string]types.Resource{}
		for _, r := range rs {
			held[name][r.ID] = r
		}
	}
	machines, err := store.List[types.Machine](n.st, types.KindMachine)
	if err != nil {
		return fmt.Errorf("list machines: %w", err)
	}
	known := map[string]map[string]bool{}
	for _, m := range machines {
		if m.Spec.Node != n.cfg.Name || !m.Live() {
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
		if res != nil && held[m.Spec.Driver] != nil {
			if _, ok := held[m.Spec.Driver][res.ID]; ok {
				n.ledger.put(entry{Machine: name, Claim: m.Spec.Claim, Driver: m.Spec.Driver, Round: m.Spec.Round,
					Res: res.Resources, Phase: m.Status.Phase, Resource: res})
				if m.Status.Phase == types.MachineTerminating {
					n.startRelease(name, m.Status.Reason)
				}
				continue
			}
		}
		if m.Status.Phase == types.MachineTerminating {
			n.dropMachine(name) // it was being released and is gone now
			continue
		}
		n.machineLost(m, "driver "+m.Spec.Driver+" no longer holds it")
	}
	for inst, rs := range held {
		for id, r := range rs {
			if known[inst][id] {
				continue
			}
			n.log.Info("release unknown resource", "driver", inst, "resource", id)
			if err := n.instances[inst].Driver.Deallocate(ctx, &r); err != nil {
				n.log.Warn("release unknown resource", "driver", inst, "resource", id, "err", err)
			}
		}
	}
	return nil
}

// machineLost marks a machine Lost and applies its template's policy to its claim.
func (n *Node) machineLost(m *types.Machine, reason string) {
	name := m.Metadata.Name
	n.metrics.lost.Inc()
	n.ledger.remove(name)
	if _, err := n.setMachine(name, func(mm *types.Machine) {
		mm.Status.Phase = types.MachineLost
		mm.Status.Reason = reason
		mm.Status.PhaseTimes.Mark(string(types.MachineLost), n.cfg.Now())
	}); err != nil {
		n.log.Warn("mark lost", "machine", name, "err", err)
	}
	policy := types.LostRebind
	if t, err := store.Get[types.MachineTemplate](n.st, types.KindMachineTemplate, m.Spec.MachineTemplate); err == nil && t.Spec.OnNodeLoss != "" {
		policy = t.Spec.OnNodeLoss
	}
	why := fmt.Sprintf("machine %s lost: %s", name, reason)
	_, err := store.Update(n.st, types.KindMachineClaim, m.Spec.Claim, func(c *types.MachineClaim) error {
		if c.Status.Node != m.Spec.Node || c.Status.Round != m.Spec.Round {
			return store.ErrNoChange
		}
		if c.Status.Phase != types.ClaimBound && !requested(c) {
			return store.ErrNoChange
		}
		if policy == types.LostFail {
			c.Status.Phase = types.ClaimFailed
			c.Status.PhaseTimes.Mark(string(types.ClaimFailed), n.cfg.Now())
		} else {
			c.Status.Phase = types.ClaimRequested
			c.Status.Node, c.Status.Driver, c.Status.Machine = "", "", ""
			delete(c.Status.PhaseTimes, string(types.ClaimBound))
		}
		c.Status.Reason = why
		return nil
	})
	if err != nil && !isNotFound(err) {
		n.log.Warn("claim of lost machine", "claim", m.Spec.Claim, "err", err)
	}
	n.log.Info("machine lost", "machine", name, "claim", m.Spec.Claim, "policy", policy, "reason", reason)
}
