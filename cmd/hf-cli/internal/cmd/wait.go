package cmd

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/types"
)

const (
	// pollInterval is how often a wait re-reads while no watch stream is up.
	pollInterval = 100 * time.Millisecond
	// recheckInterval is how often a wait re-reads while the stream is up, in
	// case an event went missing.
	recheckInterval = 2 * time.Second
)

// watchStart is the outcome of opening a watch stream in the background.
type watchStart struct {
	events <-chan client.WatchEvent
	err    error
}

// waitLoop calls check at once and then again whenever something may have
// changed, until check reports done or fails, or ctx ends. "May have changed"
// is a watch event of kinds that relevant accepts (or a resync), or a tick:
// every pollInterval while no stream is up (it is opening, could not be opened
// or broke) and every recheckInterval while it is. Waiting is level-triggered:
// check reads the current state, events only say when to look.
func waitLoop(ctx context.Context, c *client.Client, watch client.WatchOptions, relevant func(client.WatchEvent) bool, check func(context.Context) (bool, error)) error {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Open the stream in the background so a slow server does not hold up
	// polling; the goroutine ends when Watch returns, at the latest when wctx ends.
	started := make(chan watchStart, 1)
	go func() {
		ch, err := c.WatchWith(wctx, watch)
		started <- watchStart{events: ch, err: err}
	}()
	var events <-chan client.WatchEvent
	ticker := time.NewTicker(pollInterval)
	defer ticker.Stop()
	for {
		done, err := check(ctx)
		if err != nil || done {
			return err
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-ticker.C:
				break wait
			case s := <-started:
				started = nil
				if s.err == nil {
					// Re-read now: a change may have slipped in before the stream was up.
					events = s.events
					ticker.Reset(recheckInterval)
					break wait
				}
			case ev, ok := <-events:
				if !ok || ev.Type == client.EventError {
					events = nil
					ticker.Reset(pollInterval)
					break wait
				}
				if ev.Type == client.EventResync || relevant(ev) {
					break wait
				}
			}
		}
	}
}

// claimProgress turns successive observations of one claim into progress
// lines for people.
type claimProgress struct {
	requested bool
	bound     bool
	// reason is the last waiting reason printed; start and now time the
	// wait for its lines.
	reason string
	start  time.Time
	now    func() time.Time
}

// observe returns the lines to print for cl's current state.
func (p *claimProgress) observe(cl *types.MachineClaim) []string {
	var lines []string
	if !p.requested {
		p.requested = true
		lines = append(lines, fmt.Sprintf("Requested %s (template %s)", cl.Metadata.Name, cl.Spec.MachineTemplate))
	}
	if r := cl.Status.Reason; cl.Status.Phase == types.ClaimRequested && r != "" && r != p.reason {
		p.reason = r
		elapsed := ""
		if p.now != nil {
			elapsed = fmt.Sprintf(" after %s", p.now().Sub(p.start).Round(100*time.Millisecond))
		}
		lines = append(lines, fmt.Sprintf("Waiting%s: %s", elapsed, r))
	}
	if cl.Status.Phase == types.ClaimBound && !p.bound {
		p.bound = true
		line := fmt.Sprintf("Bound on node %s (machine %s)", cl.Status.Node, cl.Status.Machine)
		if d, ok := bindLatency(cl); ok {
			line += " in " + latency(d)
		}
		lines = append(lines, line)
	}
	return lines
}

// bindLatency is how long cl took from Requested (or creation) to Bound, read
// from its phase times.
func bindLatency(cl *types.MachineClaim) (time.Duration, bool) {
	bound, ok := cl.Status.PhaseTimes.Get(string(types.ClaimBound))
	if !ok {
		return 0, false
	}
	start, ok := cl.Status.PhaseTimes.Get(string(types.ClaimRequested))
	if !ok {
		start = cl.Metadata.CreatedAt
	}
	if start.IsZero() || bound.Before(start) {
		return 0, false
	}
	return bound.Sub(start), true
}

// claimOutcome says whether a waited-for claim is done: Bound is success,
// Failed and Terminated are errors.
func claimOutcome(cl *types.MachineClaim) (bool, error) {
	switch cl.Status.Phase {
	case types.ClaimBound:
		return true, nil
	case types.ClaimFailed:
		reason := cl.Status.Reason
		if reason == "" {
			reason = "no reason given"
		}
		return false, fmt.Errorf("claim %q %w: %s", cl.Metadata.Name, errClaimFailed, reason)
	case types.ClaimTerminated:
		return false, fmt.Errorf("claim %q %w: terminated before it was bound", cl.Metadata.Name, errClaimFailed)
	}
	return false, nil
}

// retryable reports whether a read that failed during a wait is worth trying
// again: transport trouble is, an answer of the API (not found, auth) is not.
func retryable(err error) bool {
	var apiErr *client.APIError
	return !errors.As(err, &apiErr)
}

// waitClaim waits until claim name is Bound (and returns it) or Failed, writing
// progress lines to f.Err.
func waitClaim(ctx context.Context, f *Factory, c *client.Client, name string, timeout time.Duration) (*types.MachineClaim, error) {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var (
		last    *types.MachineClaim
		lastErr error
		prog    = claimProgress{start: f.Now(), now: f.Now}
	)
	// The server sends this claim's changes only, not every claim's.
	watch := client.WatchOptions{Kinds: []string{types.KindMachineClaim}, FieldSelector: "metadata.name=" + name}
	err := waitLoop(wctx, c, watch,
		func(ev client.WatchEvent) bool { return ev.Kind == types.KindMachineClaim && ev.Name == name },
		func(ctx context.Context) (bool, error) {
			rctx, cancel := f.requestContext(ctx)
			defer cancel()
			o, err := c.Get(rctx, types.KindMachineClaim, name)
			if err != nil {
				if retryable(err) {
					if ctx.Err() == nil { // a read cut short by the wait's end is no read's trouble
						lastErr = err
					}
					return false, nil
				}
				return false, err
			}
			last, lastErr = o.(*types.MachineClaim), nil
			for _, l := range prog.observe(last) {
				fmt.Fprintln(f.Err, l)
			}
			return claimOutcome(last)
		})
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		state := "no phase yet"
		if last != nil && last.Status.Phase != "" {
			state = "phase " + string(last.Status.Phase)
			if r := last.Status.Reason; r != "" {
				state += ": " + r // what the claim says it waits for
			}
		}
		err = fmt.Errorf("%w after %s waiting for claim %q to be bound (%s)", errTimeout, timeout, name, state)
		if lastErr != nil {
			err = fmt.Errorf("%w; last error: %v", err, lastErr)
		}
	}
	return last, err
}

// waitGone waits until kind/name is gone and, when machine is set, until that
// machine is gone too: deleted, no longer live, or released to another claim.
// For a claim it also waits for the machines labelled with it (hf/claim) that
// still name it: a claim deleted while its machine is being made names none
// yet.
func waitGone(ctx context.Context, f *Factory, c *client.Client, kind, name, machine string, timeout time.Duration) error {
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	claim := kind == types.KindMachineClaim
	kinds := []string{kind}
	if machine != "" || claim {
		kinds = append(kinds, types.KindMachine)
	}
	objGone := false
	pending := map[string]bool{} // machines still to go
	if machine != "" {
		pending[machine] = true
	}
	listed := !claim // the labelled machines were looked for
	holds := func(m *types.Machine) bool { return m.Live() && m.Spec.Claim == name }
	// A machine that went because it is Lost is not released: its node is
	// unreachable and still holds whatever its driver made. The wait ends
	// (nothing reachable is left to wait for), but says so.
	lost := map[string]string{} // machine -> its node
	gone := func(m *types.Machine) {
		delete(pending, m.Metadata.Name)
		if m.Status.Phase == types.MachineLost && m.Spec.Claim == name {
			lost[m.Metadata.Name] = m.Spec.Node
		}
	}
	err := waitLoop(wctx, c, client.WatchOptions{Kinds: kinds},
		func(ev client.WatchEvent) bool {
			if ev.Kind == kind && ev.Name == name {
				return true
			}
			if ev.Kind != types.KindMachine {
				return false
			}
			if pending[ev.Name] {
				return true
			}
			m, ok := ev.Object.(*types.Machine)
			return claim && ok && (m.Spec.Claim == name || m.Metadata.Labels[types.LabelClaim] == name)
		},
		func(ctx context.Context) (bool, error) {
			rctx, cancel := f.requestContext(ctx)
			defer cancel()
			if !objGone {
				_, err := c.Get(rctx, kind, name)
				switch {
				case client.IsNotFound(err):
					objGone = true
				case err != nil && !retryable(err):
					return false, err
				}
			}
			if objGone && claim {
				// Looked for once the claim is gone: a machine being made
				// for it is stored by then (on this node; one made on
				// another may still be on its way here).
				ms, err := c.List(rctx, types.KindMachine, map[string]string{types.LabelClaim: name})
				switch {
				case err == nil:
					listed = true
					for _, o := range ms {
						switch m := o.(*types.Machine); {
						case holds(m):
							pending[m.Metadata.Name] = true
						case !pending[m.Metadata.Name] && m.Spec.Claim == name:
							gone(m)
						}
					}
				case !retryable(err):
					listed = true // not this token's to list: the named machine only
				}
			}
			for mn := range pending {
				o, err := c.Get(rctx, types.KindMachine, mn)
				switch {
				case client.IsNotFound(err):
					delete(pending, mn)
				case err != nil && !retryable(err):
					return false, err
				case err == nil:
					if m := o.(*types.Machine); !holds(m) {
						gone(m)
					}
				}
			}
			return objGone && listed && len(pending) == 0, nil
		})
	if err != nil && wctx.Err() != nil && ctx.Err() == nil {
		what := ref(kind, name)
		if objGone {
			what = "the machines of " + what // not yet listed
			for mn := range pending {
				what = ref(types.KindMachine, mn)
				break
			}
		}
		return fmt.Errorf("%w after %s waiting for %s to go away", errTimeout, timeout, what)
	}
	if err == nil {
		for _, mn := range slices.Sorted(maps.Keys(lost)) {
			fmt.Fprintf(f.Err, "%s is Lost: node %s is unreachable and still holds what its driver made for it; "+
				"the node releases it when it comes back (hf-cli node get %s)\n", ref(types.KindMachine, mn), lost[mn], lost[mn])
		}
	}
	return err
}

// waitTimeoutFlag defines --wait-timeout on fl: a duration that must be
// positive, refused when the flags are parsed, before anything is created or
// deleted (a zero or negative one would give up at once, after acting).
func waitTimeoutFlag(fl *pflag.FlagSet, p *time.Duration, value time.Duration, usage string) {
	*p = value
	fl.Var(positiveDuration{p}, "wait-timeout", usage)
}

// positiveDuration is a pflag.Value of a time.Duration above zero.
type positiveDuration struct{ d *time.Duration }

func (v positiveDuration) String() string {
	if v.d == nil {
		return "0s"
	}
	return v.d.String()
}

func (v positiveDuration) Set(s string) error {
	d, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("must be above zero, as in 30s or 5m")
	}
	*v.d = d
	return nil
}

func (v positiveDuration) Type() string { return "duration" }
