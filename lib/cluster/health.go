package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/hf-fleet/hf/lib/cluster/cache"
	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// healthLoop asks the drivers, every StatusInterval, how this node's running
// machines are: one whose container died, whose entry process ended or that
// the driver no longer holds is reported, not left showing Running. It also
// reads the drivers' activity counters. It touches this node's own machines
// only.
func (a *acceptor) healthLoop() {
	meters := map[string]meterReading{}
	tick := time.NewTicker(a.n.cfg.StatusInterval)
	defer tick.Stop()
	var scratch healthScratch
	for {
		select {
		case <-a.n.ctx.Done():
			return
		case <-tick.C:
		}
		a.healthPass(&scratch, meters)
	}
}

// healthScratch is what a health pass works in, kept from one pass to the
// next for its room only: a pass ends with it cleared.
type healthScratch struct {
	names []string
	batch []entry
	seen  map[string]bool
}

// healthPass checks the health and reads the activity of this node's
// machines: the ledger's names, then their entries a batch at a time, into
// the last pass's slices, and one deadline per pass. A pass over 10,000
// machines must cost milliseconds and leave no garbage, not a context
// each, and must keep nothing of the ledger between passes: not a copy of
// the whole of it (1.8 MB for 10,000 machines), nor the last batch's
// entries. Those held the resources and names the node's cool had just
// copied (see Node.Cool) until the next pass, so the trim after the cool
// could not free the burst-time pages they were the last objects of.
func (a *acceptor) healthPass(s *healthScratch, meters map[string]meterReading) {
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	s.names = a.appendNames(s.names[:0])
	ctx, cancel := context.WithTimeout(a.n.ctx, healthPassTimeout)
	defer cancel()
	for from := 0; from < len(s.names) && ctx.Err() == nil; from += healthBatch {
		s.batch = a.appendEntries(s.batch[:0], s.names[from:min(from+healthBatch, len(s.names))])
		a.checkHealth(ctx, s.batch)
		a.meterActivity(ctx, s.batch, meters, s.seen)
	}
	if ctx.Err() == nil {
		forgetUnseen(meters, s.seen)
	}
	clear(s.seen)
	clear(s.names)                // (the slices are kept: what they held need not be)
	clear(s.batch[:cap(s.batch)]) // the earlier batches' entries past the last one's end too
}

// healthBatch is how many entries a health pass copies at a time.
const healthBatch = 256

// healthPassTimeout bounds one pass of status and activity checks (a driver
// that hangs delays the pass, not the node).
const healthPassTimeout = time.Minute

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
// machines of machine sets from drivers that have them, and records in a
// machine's status when it was last in use, at most once per
// ActivityResolution per machine. Only a set's machines are read: idle
// reaping is a set's (see scheduler.PlanMachineSet), and a counter read can
// cost a driver a call per machine (docker's stats, /proc for native).
// readings carries the counters from one call to the next; seen gets the
// machines read (see forgetUnseen).
func (a *acceptor) meterActivity(ctx context.Context, entries []entry, readings map[string]meterReading, seen map[string]bool) {
	for _, e := range entries {
		if e.Phase != types.MachineRunning || e.Resource == nil || e.Claim == "" || e.Set == "" || e.Busy {
			continue
		}
		in, ok := a.n.instances[e.Driver]
		if !ok {
			continue
		}
		meter, ok := in.Driver.(drivers.ActivityMeter)
		if !ok {
			continue
		}
		m, ok := a.n.machine(e.Machine)
		if !ok || m.Spec.MachineSet == "" {
			continue
		}
		count, err := meter.Activity(ctx, e.Resource)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			continue // checkHealth reports machines that are gone
		}
		seen[e.Machine] = true
		prev, known := readings[e.Machine]
		now := a.n.cfg.Now()
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
		if r.active.Sub(m.Status.LastActivity) < a.n.cfg.ActivityResolution {
			continue
		}
		if err := a.setMachine(e.Machine, func(m *types.Machine) {
			if r.active.After(m.Status.LastActivity) {
				m.Status.LastActivity = r.active.UTC()
			}
		}); err != nil {
			a.n.refused.refused(writeActivity, e.Machine, err, a.n.cfg.StatusInterval, "machine", e.Machine)
		} else {
			a.n.refused.settled(writeActivity, e.Machine)
		}
	}
}

// forgetUnseen drops the readings of the machines a whole pass did not read.
func forgetUnseen(readings map[string]meterReading, seen map[string]bool) {
	for name := range readings {
		if !seen[name] {
			delete(readings, name)
		}
	}
}

// checkHealth reports this node's running machines that finished or died.
func (a *acceptor) checkHealth(ctx context.Context, entries []entry) {
	for _, e := range entries {
		if e.Phase != types.MachineRunning || e.Resource == nil || e.Busy {
			continue
		}
		in, ok := a.n.instances[e.Driver]
		if !ok {
			continue
		}
		phase, err := in.Driver.Status(ctx, e.Resource)
		if ctx.Err() != nil {
			return
		}
		var why string
		switch {
		case errors.Is(err, drivers.ErrNotFound):
			why = "driver " + e.Driver + " no longer holds it"
		case err != nil:
			a.n.log.Warn("machine status", "machine", e.Machine, "err", err)
			continue
		case phase == types.MachineFailed || phase == types.MachineTerminated:
			why = "driver " + e.Driver + " reports it " + string(phase)
			if ex, ok := in.Driver.(drivers.Explainer); ok {
				if more := ex.Explain(ctx, e.whole()); more != "" {
					why += ": " + more
				}
			}
		default:
			continue
		}
		a.machineGone(e, phase == types.MachineTerminated, why)
	}
}

// machineGone records that one of this node's machines finished on its own
// (ended) or died, in the binding of its claim when the claim is bound to it
// (Ended: the claim is over; Lost: its template's onNodeLoss applies), and
// releases what is left of it.
func (a *acceptor) machineGone(e entry, ended bool, why string) {
	if e.Claim != "" {
		phase := types.BindingLost
		if ended {
			phase = types.BindingEnded
		}
		a.bindingGone(e.Claim, e.Round, e.Machine, phase, "machine "+e.Machine+": "+why)
	}
	if !ended {
		a.n.metrics.lost.Inc()
	}
	a.n.log.Info("machine gone", "machine", e.Machine, "claim", e.Claim, "ended", ended, "reason", why)
	a.startRelease(e, why, false)
}

// bindingGone records in claim's binding, while it is Bound to machine at
// round, that the machine is gone: phase Lost (the elector applies the
// template's onNodeLoss) or Ended (it finished on its own: the claim is
// over), saying why.
func (a *acceptor) bindingGone(claim string, round uint64, machine string, phase types.BindingPhase, why string) {
	_, err := store.UpdateFacet(a.n.st, types.KindMachineClaim, claim, types.FacetBinding, func(c *types.MachineClaim) error {
		b := c.Status.Binding
		if b == nil || b.Round != round || b.Machine != machine || b.Phase != types.BindingBound {
			return store.ErrNoChange
		}
		nb := *b
		nb.Phase, nb.Reason, nb.At = phase, why, a.n.cfg.Now()
		c.Status.Binding = &nb
		return nil
	})
	if err != nil && !isNotFound(err) && !errors.Is(err, store.ErrFenced) {
		a.n.log.Warn("record machine gone", "claim", claim, "err", err)
	}
}

// reconcilePause holds this node's running machines of claim paused while
// the session whose claim it is is Paused, and running otherwise. The
// session's phase is its owner's word; the machine's Paused flag is this
// node's.
func (a *acceptor) reconcilePause(claim *types.MachineClaim, entries []entry) {
	if claim == nil {
		return
	}
	want := false
	for _, s := range cache.TypedIndex[types.Session](a.n.cache, idxSessionClaim, claim.Metadata.Name) {
		want = want || s.Status.Phase == types.SessionPhasePaused
	}
	for _, e := range entries {
		if e.Phase != types.MachineRunning || e.Resource == nil || e.Busy {
			continue
		}
		m, ok := a.n.machine(e.Machine)
		if !ok || m.Status.Paused == want {
			continue
		}
		pauser, ok := a.n.instances[e.Driver].Driver.(drivers.Pauser)
		if !ok || !a.claimBusy(e.Machine) {
			continue
		}
		a.n.spawn(func() {
			var wait time.Duration
			defer func() { a.doneBusy(e.Machine, e.Claim, wait) }()
			var err error
			if want {
				err = pauser.Pause(a.n.ctx, e.Resource)
			} else {
				err = pauser.Resume(a.n.ctx, e.Resource)
			}
			if err == nil {
				err = a.setMachine(e.Machine, func(m *types.Machine) { m.Status.Paused = want })
			}
			if err != nil {
				a.n.log.Warn("pause machine", "machine", e.Machine, "paused", want, "err", err)
				wait = 10 * time.Second
				return
			}
			a.n.log.Info("machine paused", "machine", e.Machine, "paused", want)
		})
	}
}
