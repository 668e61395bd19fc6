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
	meters := map[string]meterReading{}
	n.every(n.cfg.StatusInterval, nil, func() {
		n.checkHealth(n.ctx)
		n.meterActivity(n.ctx, meters)
	})
}

// activityThreshold is how much a machine's activity counter (CPU time in
// nanoseconds) must grow between two readings to count as use: 10 ms, above
// what an idle shell or sleeping entry costs.
const activityThreshold = 10_000_000

// meterReading is the last activity counter read for a machine.
type meterReading struct {
	count  uint64
	active time.Time // when the counter was last seen to grow
}

// meterActivity reads the activity counters of this node's claimed, running
// machines from drivers that have them, and records in a machine's status
// when it was last in use, at most once per ActivityResolution per machine.
// readings carries the counters from one call to the next.
func (n *Node) meterActivity(ctx context.Context, readings map[string]meterReading) {
	seen := map[string]bool{}
	for _, e := range n.ledger.all() {
		if e.Phase != types.MachineRunning || e.Resource == nil || e.Claim == "" || n.isBusy(e.Machine) {
			continue
		}
		in, ok := n.instances[e.Driver]
		if !ok {
			continue
		}
		meter, ok := in.Driver.(drivers.ActivityMeter)
		if !ok {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		count, err := meter.Activity(cctx, e.Resource)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			continue // checkHealth reports machines that are gone
		}
		seen[e.Machine] = true
		prev, known := readings[e.Machine]
		now := n.cfg.Now()
		r := meterReading{count: count, active: prev.active}
		// A counter that fell lost processes that ran (a native machine sums
		// its live processes): that was use too.
		if known && (count >= prev.count+activityThreshold || count < prev.count) {
			r.active = now
		}
		readings[e.Machine] = r
		if r.active.IsZero() {
			continue
		}
		m, err := store.Get[types.Machine](n.st, types.KindMachine, e.Machine)
		if err != nil || r.active.Sub(m.Status.LastActivity) < n.cfg.ActivityResolution {
			continue
		}
		if _, err := n.setMachine(e.Machine, func(m *types.Machine) {
			if r.active.After(m.Status.LastActivity) {
				m.Status.LastActivity = r.active.UTC()
			}
		}); err != nil {
			n.log.Warn("record activity", "machine", e.Machine, "err", err)
		}
	}
	for name := range readings {
		if !seen[name] {
			delete(readings, name)
		}
	}
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
