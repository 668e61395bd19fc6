package types

import "time"

// ClaimPhase is the phase of a MachineClaim.
type ClaimPhase string

// Claim phases.
const (
	ClaimRequested  ClaimPhase = "Requested"
	ClaimBound      ClaimPhase = "Bound"
	ClaimFailed     ClaimPhase = "Failed"
	ClaimTerminated ClaimPhase = "Terminated"
)

// BindStrategy says where a claim may find its machine.
type BindStrategy string

// Bind strategies.
const (
	BindAny                BindStrategy = "Any"
	BindPreferMachineSets  BindStrategy = "PreferMachineSets"
	BindRequireMachineSets BindStrategy = "RequireMachineSets"
)

// DefaultBindTimeout is how long a claim waits for capacity when it says nothing.
const DefaultBindTimeout = 5 * time.Minute

// MachineClaim is a user's request for a machine.
type MachineClaim struct {
	TypeMeta
	Metadata ObjectMeta         `json:"metadata"`
	Spec     MachineClaimSpec   `json:"spec"`
	Status   MachineClaimStatus `json:"status"`
}

// MachineClaimSpec is what the user asks for.
type MachineClaimSpec struct {
	MachineTemplate string       `json:"machineTemplate"`
	User            string       `json:"user,omitempty"`
	AccessCode      string       `json:"accessCode,omitempty"`
	ScheduledEvent  string       `json:"scheduledEvent,omitempty"`
	Environment     string       `json:"environment,omitempty"`
	BindStrategy    BindStrategy `json:"bindStrategy,omitempty"`
	// MachineSets are the sets the claim prefers or requires (per
	// BindStrategy).
	MachineSets []string `json:"bindStrategyMachineSets,omitempty"`
	// LegacyMachineSets is the earlier name of MachineSets: read, moved
	// there (see Upgrade) and never written.
	LegacyMachineSets []string `json:"machineSets,omitempty"`
	// BindTimeout is how long the claim may stay Requested before it fails.
	BindTimeout Duration `json:"bindTimeout,omitzero"`
	// Metadata is passed to the machine as data (environment variables, user
	// data), under the keys its template declares in spec.claimMetadata only.
	Metadata map[string]string `json:"metadata,omitempty"`
}

// MachineClaimStatus is the claim's state. Its first fields are derived from
// the three facets after them (see Derive) and are read-only: election
// (written by the claim's elector), binding (by the node serving the current
// round) and end (a request to terminate, by whoever decided it: a set's
// owner reaping, an event's owner at its end).
type MachineClaimStatus struct {
	Phase   ClaimPhase `json:"phase,omitempty"`
	Machine string     `json:"machine,omitempty"`
	Node    string     `json:"node,omitempty"`
	Driver  string     `json:"driver,omitempty"`
	// Round is the claim's current election round.
	Round  uint64 `json:"round,omitempty"`
	Reason string `json:"reason,omitempty"`
	// PhaseTimes records when each phase was entered.
	PhaseTimes PhaseTimes `json:"phaseTimes,omitempty"`

	// Conditions say why the claim waits, is bound or failed (type Bound,
	// derived like the fields above).
	Conditions Conditions `json:"conditions,omitempty"`

	Election *ClaimElection `json:"election,omitempty"`
	Binding  *ClaimBinding  `json:"binding,omitempty"`
	End      *ClaimEnd      `json:"end,omitempty"`
}

// ConditionBound is a claim's condition: True once bound; False with the
// reason while it waits, and once it failed or ended.
const ConditionBound = "Bound"

// ClaimElection is the election facet: the elector's word on the claim.
type ClaimElection struct {
	// Round is the round of the last acceptance, hand-back or failure; a
	// binding of an older round is superseded by it.
	Round uint64 `json:"round"`
	// Node and Driver accepted Round (empty while nobody has).
	Node   string `json:"node,omitempty"`
	Driver string `json:"driver,omitempty"`
	// Failed ends the claim: nothing could bind it (Reason says why).
	Failed bool `json:"failed,omitempty"`
	// Reason says why the claim waits, was handed back, or failed.
	Reason string `json:"reason,omitempty"`
	// Rebinds counts the times the claim's machine died (or its node was
	// lost) and the claim was bound again; past scheduler.max_rebinds the
	// claim fails instead.
	Rebinds int `json:"rebinds,omitempty"`
	// RebindAt is when the claim was last handed back to be bound again
	// (its machine died or its node was lost): its bind timeout counts from
	// then, not from its creation.
	RebindAt time.Time `json:"rebindAt,omitzero"`
	// At is when the elector wrote it.
	At time.Time `json:"at,omitzero"`
}

// SetBinding writes b as the claim's binding at now, keeping Since from the
// binding it replaces when that is the same node's of the same round.
func (o *MachineClaim) SetBinding(b ClaimBinding, now time.Time) {
	b.Since = now
	if cur := o.Status.Binding; cur != nil && cur.Round == b.Round && cur.Node == b.Node && !cur.Since.IsZero() {
		b.Since = cur.Since
	}
	o.Status.Binding = &b
}

// bindingEpochBits is how many low bits of a binding's epoch order the
// bindings of one round (by Since, in Unix milliseconds: enough until 2109).
const bindingEpochBits = 42

// BindingEpoch is the store epoch of a binding facet: its round first, then
// the earlier Since. A node's own rewrites of its binding keep Since, so
// among them the store's version (the newer write) decides.
func BindingEpoch(b *ClaimBinding) uint64 {
	if b == nil {
		return 0
	}
	const mask = 1<<bindingEpochBits - 1
	since := uint64(0)
	if ms := b.Since.UnixMilli(); !b.Since.IsZero() && ms > 0 {
		since = min(uint64(ms), mask)
	}
	return b.Round<<bindingEpochBits | (mask - since)
}

// BindingPhase is what the serving node says of its round.
type BindingPhase string

// Binding phases.
const (
	// BindingBound: the claim is bound to Machine.
	BindingBound BindingPhase = "Bound"
	// BindingReleased: the node gave the round back before binding (its
	// allocation failed, say); the elector elects again.
	BindingReleased BindingPhase = "Released"
	// BindingLost: the bound machine died; the template's onNodeLoss applies.
	BindingLost BindingPhase = "Lost"
	// BindingEnded: the machine finished on its own; the claim is over.
	BindingEnded BindingPhase = "Ended"
)

// ClaimBinding is the binding facet, written by the node serving Round.
type ClaimBinding struct {
	Round   uint64       `json:"round"`
	Node    string       `json:"node"`
	Driver  string       `json:"driver,omitempty"`
	Machine string       `json:"machine,omitempty"`
	Phase   BindingPhase `json:"phase"`
	Reason  string       `json:"reason,omitempty"`
	// At is when the node wrote it (the claim's Bound time for Bound).
	At time.Time `json:"at,omitzero"`
	// Shared: Machine is a shared machine of the claim's event (a Shared
	// requiredMachines line); the claim holds no machine of its own, and
	// its end leaves the machine to the event's other users.
	Shared bool `json:"shared,omitempty"`
	// Since is when Node first wrote a binding of Round. Two nodes bind the
	// same round only when two electors, each cut off from the other, chose
	// it; of those bindings the earlier wins (see BindingEpoch), so at the
	// heal the machine that ran first stays.
	Since time.Time `json:"since,omitzero"`
}

// ClaimEnd is the end facet: a request that the claim be terminated.
type ClaimEnd struct {
	Reason string    `json:"reason"`
	At     time.Time `json:"at,omitzero"`
}

// Upgrade turns a status written before facets (flat fields only, as the
// previous release stored and replicated claims) into its facets, so a data
// dir or a peer of that release keeps its claims' elections and bindings.
func (o *MachineClaim) Upgrade() {
	if len(o.Spec.LegacyMachineSets) > 0 {
		if len(o.Spec.MachineSets) == 0 {
			o.Spec.MachineSets = o.Spec.LegacyMachineSets
		}
		o.Spec.LegacyMachineSets = nil
	}
	s := &o.Status
	if s.Election != nil || s.Binding != nil || s.End != nil {
		return
	}
	at := s.PhaseTimes.At(string(s.Phase))
	switch s.Phase {
	case ClaimBound:
		s.Binding = &ClaimBinding{Round: s.Round, Node: s.Node, Driver: s.Driver, Machine: s.Machine, Phase: BindingBound, At: at}
	case ClaimFailed:
		s.Election = &ClaimElection{Round: s.Round, Failed: true, Reason: s.Reason, At: at}
	case ClaimTerminated:
		s.End = &ClaimEnd{Reason: s.Reason, At: at}
	default:
		if s.Node != "" || s.Round > 0 || s.Reason != "" {
			s.Election = &ClaimElection{Round: s.Round, Node: s.Node, Driver: s.Driver, Reason: s.Reason}
		}
	}
}

// Derive computes the read-only status fields from the facets:
//   - end set: Terminated with its reason;
//   - a binding at least as new as the election: Bound to its machine (or
//     Terminated when it Ended; Requested while Released or Lost);
//   - a failed election: Failed with its reason;
//   - else Requested, with the accepting node when there is one, and the
//     reason the claim waits.
func (o *MachineClaim) Derive() {
	s := &o.Status
	e, b := s.Election, s.Binding
	if e == nil {
		e = &ClaimElection{}
	}
	s.Phase, s.Machine, s.Node, s.Driver, s.Reason = ClaimRequested, "", "", "", ""
	s.Round = e.Round
	var bound, ended, failed time.Time
	current := b != nil && b.Round >= e.Round
	switch {
	case current:
		s.Round = b.Round
		if b.Phase == BindingBound || b.Phase == BindingEnded {
			s.Machine, s.Node, s.Driver = b.Machine, b.Node, b.Driver
			bound = b.At
		}
	case b != nil && (b.Phase == BindingBound || b.Phase == BindingLost || b.Phase == BindingEnded):
		// An older round's binding: the claim was Bound then (Since is when
		// that round's binding began), and its history keeps it after a
		// hand-back or a failure.
		bound = b.Since
	}
	switch {
	case s.End != nil:
		s.Phase, s.Reason = ClaimTerminated, s.End.Reason
		ended = s.End.At
	case current && b.Phase == BindingBound:
		s.Phase = ClaimBound
	case current && b.Phase == BindingEnded:
		s.Phase, s.Reason = ClaimTerminated, b.Reason
		ended = b.At
	case e.Failed:
		s.Phase, s.Reason = ClaimFailed, e.Reason
		failed = e.At
	case current:
		s.Reason = b.Reason // Released or Lost: the elector elects again
	default:
		s.Node, s.Driver, s.Reason = e.Node, e.Driver, e.Reason
	}
	s.PhaseTimes = MakePhaseTimes(
		PhaseTime{string(ClaimRequested), o.Metadata.CreatedAt}, PhaseTime{string(ClaimBound), bound},
		PhaseTime{string(ClaimTerminated), ended}, PhaseTime{string(ClaimFailed), failed})
	c := Condition{Type: ConditionBound, Status: ConditionFalse, Reason: string(s.Phase), Message: s.Reason}
	if s.Phase == ClaimBound {
		c.Status, c.Message = ConditionTrue, "bound to machine "+s.Machine
	}
	c.LastTransitionTime = s.PhaseTimes.At(string(s.Phase))
	if c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = o.Metadata.CreatedAt
	}
	c.LastUpdateTime = o.Metadata.UpdatedAt
	s.Conditions = Conditions{c}
}

// Meta returns the metadata.
func (o *MachineClaim) Meta() *ObjectMeta { return &o.Metadata }

// Validate checks the claim.
func (o *MachineClaim) Validate() error {
	if err := o.TypeMeta.check(KindMachineClaim); err != nil {
		return err
	}
	if err := o.Metadata.Validate(); err != nil {
		return err
	}
	s := &o.Spec
	if err := ValidateName("spec.machineTemplate", s.MachineTemplate); err != nil {
		return err
	}
	for f, v := range map[string]string{"spec.accessCode": s.AccessCode, "spec.scheduledEvent": s.ScheduledEvent, "spec.environment": s.Environment} {
		if err := validateRef(f, v); err != nil {
			return err
		}
	}
	if s.BindStrategy != "" {
		if err := oneOf("spec.bindStrategy", s.BindStrategy, BindAny, BindPreferMachineSets, BindRequireMachineSets); err != nil {
			return err
		}
	}
	if s.BindStrategy == BindRequireMachineSets && len(s.MachineSets) == 0 {
		return Invalid("spec.bindStrategyMachineSets", "is required with bindStrategy RequireMachineSets")
	}
	if err := validateSetList("spec.bindStrategyMachineSets", s.MachineSets, MaxClaimMachineSets); err != nil {
		return err
	}
	if s.BindTimeout.Duration < 0 {
		return Invalid("spec.bindTimeout", "must not be negative")
	}
	if s.BindTimeout.Duration > MaxBindTimeout {
		return Invalid("spec.bindTimeout", "must be at most %s, got %s", MaxBindTimeout, s.BindTimeout.Duration)
	}
	if err := validateClaimMetadata("spec.metadata", s.Metadata); err != nil {
		return err
	}
	if o.Status.Phase != "" {
		if err := oneOf("status.phase", o.Status.Phase, ClaimRequested, ClaimBound, ClaimFailed, ClaimTerminated); err != nil {
			return err
		}
	}
	return nil
}
