package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// healthLoop asks the drivers, every StatusInterval, how this node's running
// machines are: one whose container died, whose entry process ended or that
// the driver no longer holds is reported, not left showing Running.
func (n *Node) healthLoop() {
	n.every(n.cfg.StatusInterval, nil, func() { n.checkHealth(n.ctx) })
}

func (n *Node) checkHealth(ctx context.Context) {
	for _, e := range n.ledger.all() {
		if e.Phase != types.MachineRunning || e.Resource == nil || n.isBusy(e.Machine) {
			continue
		}
		in, ok := n.instances[e.Driver]
		if !ok {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		phase, err := in.Driver.Status(cctx, e.Resource)
		cancel()
		if ctx.Err() != nil {
			return
		}
		var why string
		switch {
		case errors.Is(err, drivers.ErrNotFound):
			why = "driver " + e.Driver + " no longer holds it"
		case err != nil:
			n.log.Warn("machine status", "machine", e.Machine, "err", err)
			continue
		case phase == types.MachineFailed || phase == types.MachineTerminated:
			why = "driver " + e.Driver + " reports it " + string(phase)
		default:
			continue
		}
		m, err := store.Get[types.Machine](n.st, types.KindMachine, e.Machine)
		if err != nil {
			continue
		}
		if err == nil && phase == types.MachineTerminated {
			// It finished on its own (the entry exited cleanly): the claim is
			// over, not lost; release what is left of the machine.
			n.finishClaim(m, why)
			n.startRelease(e.Machine, why)
			continue
		}
		// Release what is left of it (a stopped container, a workspace), then
		// apply the template's policy to the claim as for a lost machine.
		if phase == types.MachineFailed {
			if derr := in.Driver.Deallocate(ctx, e.Resource); derr != nil && !errors.Is(derr, drivers.ErrNotFound) {
				n.log.Warn("deallocate dead machine", "machine", e.Machine, "err", derr)
			}
		}
		n.machineLost(m, why)
	}
}

// finishClaim marks the claim of a machine that finished Terminated.
func (n *Node) finishClaim(m *types.Machine, why string) {
	_, err := store.Update(n.st, types.KindMachineClaim, m.Spec.Claim, func(c *types.MachineClaim) error {
		if c.Status.Phase != types.ClaimBound || c.Status.Machine != m.Metadata.Name {
			return store.ErrNoChange
		}
		c.Status.Phase = types.ClaimTerminated
		c.Status.Reason = "machine " + m.Metadata.Name + ": " + why
		c.Status.PhaseTimes.Mark(string(types.ClaimTerminated), n.cfg.Now())
		return nil
	})
	if err != nil && !isNotFound(err) {
		n.log.Warn("finish claim", "claim", m.Spec.Claim, "err", err)
	}
}
