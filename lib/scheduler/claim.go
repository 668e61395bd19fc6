package scheduler

import (
	"fmt"
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// The per-claim decisions of the two sides of the election, as pure
// functions of what a node's replica shows: DecideMachine for the node that
// holds a machine of the claim, DecideClaim for the claim's elector. The
// shells (lib/cluster) carry out exactly what they return; the simulation
// drives the same functions.

// ClaimState is a claim as a node's replica shows it: its facets.
type ClaimState struct {
	// Exists is false when the claim is not in the replica (deleted, or not
	// arrived yet).
	Exists   bool
	Election types.ClaimElection
	Binding  *types.ClaimBinding
	// Ended: a request to terminate the claim (its end facet) is in.
	Ended     bool
	EndReason string
	// Deadline is the claim's bind timeout after its creation or, once it
	// was handed back to be bound again, after that.
	Deadline time.Time
}

// ClaimStateOf reads the facets of c (nil: the claim does not exist).
func ClaimStateOf(c *types.MachineClaim, bindTimeout time.Duration) ClaimState {
	if c == nil {
		return ClaimState{}
	}
	s := ClaimState{Exists: true, Binding: c.Status.Binding}
	if c.Status.Election != nil {
		s.Election = *c.Status.Election
	}
	if c.Status.End != nil {
		s.Ended, s.EndReason = true, c.Status.End.Reason
	}
	if c.Spec.BindTimeout.Duration > 0 {
		bindTimeout = c.Spec.BindTimeout.Duration
	}
	since := c.Metadata.CreatedAt
	if s.Election.RebindAt.After(since) {
		since = s.Election.RebindAt
	}
	if !since.IsZero() && bindTimeout > 0 {
		s.Deadline = since.Add(bindTimeout)
	}
	return s
}

// Round is the claim's current round: the newer of its election's and its
// binding's.
func (s ClaimState) Round() uint64 {
	r := s.Election.Round
	if s.Binding != nil && s.Binding.Round > r {
		r = s.Binding.Round
	}
	return r
}

// current reports whether the binding is of the claim's current round.
func (s ClaimState) current() bool {
	return s.Binding != nil && s.Binding.Round >= s.Election.Round
}

// Held is one machine as the node holding it keeps it (its ledger entry).
type Held struct {
	Machine string
	// Claim is "" for a warm machine of a pool, not bound to anyone.
	Claim string
	Round uint64
	// Phase is Pending (reserved, not allocated), Running, or Terminating
	// (a release was under way).
	Phase types.MachinePhase
	// Busy: an allocation or release is under way.
	Busy bool
	// Reap is a request that the machine go, from its set's or event's owner.
	Reap *types.MachineRequest
	// Deleted: the machine's record was deleted (DELETE through the API,
	// or the sweep of a lost machine while this node was cut off).
	Deleted bool
}

// MachineAction is what the holding node does with one of its machines.
type MachineAction int

// Machine actions.
const (
	// Keep: nothing to do.
	Keep MachineAction = iota
	// Allocate the reserved machine through the driver.
	Allocate
	// Bind the claim to the running machine (write the binding facet).
	Bind
	// Release the machine: deallocate it and delete its record.
	Release
	// GiveBack the round (a binding Released with Reason), then release:
	// the machine cannot serve the claim in time.
	GiveBack
)

// String names the action for logs and tests.
func (a MachineAction) String() string {
	switch a {
	case Keep:
		return "Keep"
	case Allocate:
		return "Allocate"
	case Bind:
		return "Bind"
	case Release:
		return "Release"
	case GiveBack:
		return "GiveBack"
	}
	return fmt.Sprintf("MachineAction(%d)", int(a))
}

// MachineDecision is an action with the reason for it.
type MachineDecision struct {
	Action MachineAction
	Reason string
}

// DecideMachine is the decision of node self about a machine it holds, given
// the claim as its replica shows it, at now. A machine serves only the
// (claim, round) it was reserved for: once the claim is at a later round,
// bound to another machine, failed, ended or gone, the machine goes (that is
// the fencing of the election). A reserved machine is allocated, a running
// one bound; one that cannot be allocated before the claim's bind deadline is
// given back. A machine whose record was deleted goes too.
func DecideMachine(now time.Time, self string, h Held, c ClaimState) MachineDecision {
	keep := MachineDecision{Action: Keep}
	release := func(format string, args ...any) MachineDecision {
		return MachineDecision{Action: Release, Reason: fmt.Sprintf(format, args...)}
	}
	switch {
	case h.Busy:
		return keep
	case h.Phase == types.MachineTerminating:
		return release("its release was under way")
	case h.Deleted:
		// Its claim, if it still wants a machine, is bound again
		// (DecideOrphan); its set makes another.
		return release("its record was deleted")
	case h.Reap != nil && h.Reap.Claim == h.Claim:
		// (A request for a warm machine that a claim took since lapses.)
		return release("%s", orUnknown(firstNonEmpty(h.Reap.Message, h.Reap.Reason)))
	case h.Claim == "":
		return keep // a warm pool machine
	case !c.Exists:
		return release("claim %s is gone", h.Claim)
	case c.Ended:
		return release("claim %s was terminated: %s", h.Claim, orUnknown(c.EndReason))
	case c.Round() > h.Round:
		return release("claim %s moved on to round %d", h.Claim, c.Round())
	}
	if b := c.Binding; b != nil && b.Round == h.Round {
		switch {
		case b.Node != self:
			return release("round %d of claim %s is served by node %s", h.Round, h.Claim, b.Node)
		case b.Phase == types.BindingBound && b.Machine == h.Machine:
			if h.Phase == types.MachineRunning {
				return keep
			}
			return release("claim %s is bound to it but it is not running", h.Claim)
		case b.Phase == types.BindingBound:
			return release("claim %s is bound to machine %s", h.Claim, b.Machine)
		default:
			return release("claim %s: round %d was %s: %s", h.Claim, h.Round, b.Phase, orUnknown(b.Reason))
		}
	}
	e := c.Election
	switch {
	case e.Failed:
		return release("claim %s failed: %s", h.Claim, orUnknown(e.Reason))
	case e.Round == h.Round && e.Node != "" && e.Node != self:
		return release("round %d of claim %s was accepted by node %s", h.Round, h.Claim, e.Node)
	}
	switch h.Phase {
	case types.MachineRunning:
		return MachineDecision{Action: Bind}
	case types.MachinePending, types.MachineProvisioning, "":
		if !c.Deadline.IsZero() && !now.Before(c.Deadline) {
			return MachineDecision{Action: GiveBack, Reason: "its bind timeout passed before the machine was allocated"}
		}
		return MachineDecision{Action: Allocate}
	}
	return release("machine is %s", h.Phase)
}

// Orphan is a round of a claim that node self answers for and holds no
// machine for (DecideOrphan).
type Orphan struct {
	Round  uint64
	Reason string
	// Lost: the claim was bound to the machine that is gone, so its
	// binding turns Lost, as when a machine dies (the template's
	// onNodeLoss applies, and the claim's bind timeout counts from the
	// hand-back); otherwise the round is given back (Released) before it
	// was bound.
	Lost bool
}

// DecideOrphan is the decision of node self about a claim it holds no
// machine for (held: its machines of the claim): when the claim's current
// round was accepted by self, or is bound by self to a machine self no
// longer holds, self gives the round up (ok), so the claim is elected again
// instead of waiting on, or staying bound to, a machine that is gone.
func DecideOrphan(self string, phase types.ClaimPhase, c ClaimState, held []Held) (o Orphan, ok bool) {
	if !c.Exists || c.Ended {
		return Orphan{}, false
	}
	round := c.Round()
	has := func(machine string) bool {
		for _, h := range held {
			if h.Round == round && (machine == "" || h.Machine == machine) {
				return true
			}
		}
		return false
	}
	switch b := c.Binding; {
	case phase == types.ClaimRequested && c.Election.Node == self && c.Election.Round == round &&
		(b == nil || b.Round < round) && !has(""):
		return Orphan{Round: round, Reason: fmt.Sprintf("node %s holds no reservation for round %d", self, round)}, true
	case phase == types.ClaimBound && b != nil && b.Round == round && b.Node == self &&
		b.Phase == types.BindingBound && !has(b.Machine):
		return Orphan{Round: round, Reason: fmt.Sprintf("machine %s of round %d is gone from node %s", b.Machine, round, self), Lost: true}, true
	}
	return Orphan{}, false
}

// ClaimAction is what a claim's elector does about it.
type ClaimAction int

// Claim actions.
const (
	// Forget: the claim is not the elector's business (now): it is bound,
	// over, or accepted by a live node working on it (AcceptedBy, at
	// Round: the elector keeps the nodes it tried, see ClaimAccepted).
	Forget ClaimAction = iota
	// Elect: offer the claim from Round on (excluding Exclude); AcceptedBy,
	// when set, is a node that accepted it and is gone.
	Elect
	// Rebind: hand the claim back at Round (its machine was lost): write
	// the election facet with Round and Reason and no node.
	Rebind
	// FailLost: fail the claim at Round (its machine was lost and its
	// template says onNodeLoss Fail).
	FailLost
	// Wait: nothing can be decided without a majority; look again when
	// membership changes.
	Wait
)

// String names the action for logs and tests.
func (a ClaimAction) String() string {
	switch a {
	case Forget:
		return "Forget"
	case Elect:
		return "Elect"
	case Rebind:
		return "Rebind"
	case FailLost:
		return "FailLost"
	case Wait:
		return "Wait"
	}
	return fmt.Sprintf("ClaimAction(%d)", int(a))
}

// ClaimDecision is an elector's action with what it needs.
type ClaimDecision struct {
	Action     ClaimAction
	Round      uint64
	AcceptedBy string
	Exclude    string
	Reason     string
}

// DecideClaim is what the elector of claim c (whose phase is phase) does,
// given whether the machine the claim is bound to is under a lost verdict
// (lost: its reason, "" when it is not), the template's onNodeLoss policy,
// which nodes are alive and whether this node reaches a majority of the
// members it knows. Only with a majority does it pass a verdict on a node it
// cannot reach (re-electing what that node accepted); a lost verdict on a
// machine was itself passed by a majority.
func DecideClaim(c ClaimState, phase types.ClaimPhase, lost string, policy types.LostPolicy, alive func(string) bool, quorum bool) ClaimDecision {
	round := c.Round()
	handBack := func(reason string) ClaimDecision {
		if policy == types.LostFail {
			return ClaimDecision{Action: FailLost, Round: round + 1, Reason: reason}
		}
		return ClaimDecision{Action: Rebind, Round: round + 1, Reason: reason}
	}
	switch phase {
	case types.ClaimFailed, types.ClaimTerminated:
		return ClaimDecision{Action: Forget}
	case types.ClaimBound:
		if lost != "" {
			return handBack(fmt.Sprintf("machine %s lost: %s", c.Binding.Machine, lost))
		}
		return ClaimDecision{Action: Forget}
	}
	if c.current() {
		b := c.Binding
		switch b.Phase {
		case types.BindingLost:
			return handBack(fmt.Sprintf("machine %s lost: %s", b.Machine, orUnknown(b.Reason)))
		case types.BindingReleased:
			return ClaimDecision{Action: Elect, Round: round, Exclude: b.Node,
				Reason: fmt.Sprintf("node %s gave round %d back: %s", b.Node, b.Round, orUnknown(b.Reason))}
		}
	}
	if n := c.Election.Node; n != "" && c.Election.Round == round {
		switch {
		case alive(n):
			return ClaimDecision{Action: Forget, Round: round, AcceptedBy: n}
		case !quorum:
			return ClaimDecision{Action: Wait, Reason: fmt.Sprintf("node %s accepted round %d and cannot be reached; without a majority of the cluster this node does not take it over", n, round)}
		}
		return ClaimDecision{Action: Elect, Round: round, AcceptedBy: n,
			Reason: fmt.Sprintf("node %s accepted round %d and is gone", n, round)}
	}
	return ClaimDecision{Action: Elect, Round: round}
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
