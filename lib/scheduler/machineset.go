package scheduler

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// Default pool limits, used when neither the set nor the config says otherwise.
const (
	// DefaultMaxIdle reaps a claimed machine with no activity for an hour.
	DefaultMaxIdle = time.Hour
	// DefaultMaxAssigned reaps a machine claimed for a working day.
	DefaultMaxAssigned = 8 * time.Hour
	// DefaultMaxAge reaps an unclaimed pool machine after a day (stale image).
	DefaultMaxAge = 24 * time.Hour
	// DefaultClaimGrace keeps a machine whose claim is not known yet for a minute,
	// so a claim that replicates after its machine does not get it destroyed.
	DefaultClaimGrace = time.Minute
)

// UnlimitedRoom is the room of a set with no maxProvisioned. It is an int that
// is never the binding limit and adds to other counts without overflow.
const UnlimitedRoom = math.MaxInt32

// PoolLimits are the reaping limits of a machine set. A zero field means "use
// the next level": the set's spec field wins when set, then PoolLimits from
// config, then the Default* constants.
type PoolLimits struct {
	// MaxIdle reaps a claimed machine with no activity for this long.
	MaxIdle time.Duration
	// MaxAssigned reaps a machine claimed for this long; its claim ends.
	MaxAssigned time.Duration
	// MaxAge reaps an unclaimed machine created this long ago.
	MaxAge time.Duration
	// ClaimGrace is how long a machine naming an unknown claim is kept.
	ClaimGrace time.Duration
}

// DefaultPoolLimits returns the Default* limits.
func DefaultPoolLimits() PoolLimits {
	return PoolLimits{MaxIdle: DefaultMaxIdle, MaxAssigned: DefaultMaxAssigned, MaxAge: DefaultMaxAge, ClaimGrace: DefaultClaimGrace}
}

// For returns the limits that apply to set: its spec fields where positive,
// else l's fields where positive, else the defaults.
func (l PoolLimits) For(set types.MachineSet) PoolLimits {
	pick := func(spec, cfg, def time.Duration) time.Duration {
		switch {
		case spec > 0:
			return spec
		case cfg > 0:
			return cfg
		}
		return def
	}
	s := set.Spec
	return PoolLimits{
		MaxIdle:     pick(s.MaxIdle.Duration, l.MaxIdle, DefaultMaxIdle),
		MaxAssigned: pick(s.MaxAssigned.Duration, l.MaxAssigned, DefaultMaxAssigned),
		MaxAge:      pick(s.MaxAge.Duration, l.MaxAge, DefaultMaxAge),
		ClaimGrace:  pick(0, l.ClaimGrace, DefaultClaimGrace),
	}
}

// DeleteReason says why a plan deletes a machine; it is meant for metrics and
// logs, Deletion.Message is meant for people.
type DeleteReason string

// Delete reasons, in the order PlanMachineSet checks them.
const (
	ReasonFailed      DeleteReason = "Failed"
	ReasonLost        DeleteReason = "Lost"
	ReasonClaimGone   DeleteReason = "ClaimGone"
	ReasonClaimEnded  DeleteReason = "ClaimEnded"
	ReasonSuperseded  DeleteReason = "Superseded"
	ReasonMaxAssigned DeleteReason = "MaxAssigned"
	ReasonIdle        DeleteReason = "Idle"
	ReasonOutdated    DeleteReason = "Outdated"
	ReasonStale       DeleteReason = "Stale"
	ReasonSurplus     DeleteReason = "Surplus"
)

// Deletion is one machine a plan destroys.
type Deletion struct {
	Machine string
	Reason  DeleteReason
	Message string
	// Claim is the claim this deletion ends: the shell marks it Terminated with
	// Message before it releases the machine. It is empty when the machine
	// holds no live claim, and for a failed or lost machine, whose claim is
	// re-bound or failed by the election (the template's onNodeLoss).
	Claim string
}

// SetPlan is what a MachineSet's reconcile does now.
type SetPlan struct {
	// Create is how many new unclaimed machines to provision.
	Create int
	// Delete lists machines to destroy, in machine-name order for the reapers
	// and then in DeletePriority order for the surplus.
	Delete []Deletion
	// Status is the set's status: Provisioned counts every live machine
	// (Terminating ones and those in Delete still hold resources); Available
	// counts unclaimed Running machines this plan keeps.
	Status types.MachineSetStatus
	// Next is the earliest time a limit trips for a machine this plan keeps;
	// zero when none will. The shell requeues the set then (or on any change).
	Next time.Time
}

// PlanMachineSet computes what set's reconcile must do at now, from the set's
// machines (spec.machineSet == set name; others are ignored), the claims those
// machines name, each machine's last activity (driver report or API
// keepalive, by machine name; may be nil) and the configured limits.
//
// Rules, first match wins per machine (Terminating/Terminated machines are
// already going and only counted):
//   - Failed or Lost: delete.
//   - Claimed, and the claim is unknown for ClaimGrace since the machine's last
//     write, Terminated or Failed, or Bound to another machine at a round not
//     behind the machine's: delete; a released machine is never reused.
//   - Claimed by a Bound claim for MaxAssigned (from the claim's Bound time), or
//     with no activity for MaxIdle (from the later of Bound time and last
//     activity): delete and end the claim.
//   - Unclaimed, of another template than the set's: delete (outdated).
//   - Unclaimed and created MaxAge ago: delete (stale).
//
// An AutoScale set (the default strategy) then keeps MinAvailable unclaimed
// machines, counting those still provisioning: the surplus is deleted in
// DeletePriority order and the shortfall created, but never beyond
// MaxProvisioned live machines (0: unlimited), counting machines that are still
// terminating, so a capped set refills only once its reaped machines are gone.
// An OnDemand set creates nothing ahead (see OnDemandRoom) and keeps what
// unclaimed machines it has until MaxAge.
func PlanMachineSet(now time.Time, set types.MachineSet, machines []types.Machine, claims []types.MachineClaim, activity map[string]time.Time, limits PoolLimits) SetPlan {
	lim := limits.For(set)
	byName := make(map[string]*types.MachineClaim, len(claims))
	for i := range claims {
		byName[claims[i].Metadata.Name] = &claims[i]
	}
	own := make([]types.Machine, 0, len(machines))
	for _, m := range machines {
		if m.Spec.MachineSet == set.Metadata.Name {
			own = append(own, m)
		}
	}
	slices.SortFunc(own, func(a, b types.Machine) int { return cmp.Compare(a.Metadata.Name, b.Metadata.Name) })

	var plan SetPlan
	var unclaimed []types.Machine
	for _, m := range own {
		if m.Live() {
			plan.Status.Provisioned++
		}
		if m.Status.Phase == types.MachineTerminating || m.Status.Phase == types.MachineTerminated {
			continue
		}
		var claim *types.MachineClaim
		if m.Spec.Claim != "" {
			claim = byName[m.Spec.Claim]
		}
		d, next := judge(now, set, m, claim, activity[m.Metadata.Name], lim)
		if d != nil {
			plan.Delete = append(plan.Delete, *d)
			continue
		}
		plan.Next = earliest(plan.Next, next)
		if m.Spec.Claim == "" {
			unclaimed = append(unclaimed, m)
		}
	}

	if strategy(set) == types.ProvisionAutoScale {
		if surplus := len(unclaimed) - set.Spec.MinAvailable; surplus > 0 {
			slices.SortFunc(unclaimed, func(a, b types.Machine) int { return deleteOrder(a, b, now, lim.MaxAge) })
			for _, m := range unclaimed[:surplus] {
				plan.Delete = append(plan.Delete, Deletion{Machine: m.Metadata.Name, Reason: ReasonSurplus,
					Message: fmt.Sprintf("machine set %s keeps %d unclaimed machines", set.Metadata.Name, set.Spec.MinAvailable)})
			}
			unclaimed = unclaimed[surplus:]
		}
		plan.Create = max(0, set.Spec.MinAvailable-len(unclaimed))
		if set.Spec.MaxProvisioned > 0 {
			plan.Create = min(plan.Create, max(0, set.Spec.MaxProvisioned-plan.Status.Provisioned))
		}
	}
	for _, m := range unclaimed {
		if m.Status.Phase == types.MachineRunning {
			plan.Status.Available++
		}
	}
	return plan
}

// judge applies the reaping rules to one machine that is not already going. It
// returns the deletion, or nil and the time the machine's next limit trips.
func judge(now time.Time, set types.MachineSet, m types.Machine, claim *types.MachineClaim, active time.Time, lim PoolLimits) (*Deletion, time.Time) {
	name := m.Metadata.Name
	del := func(r DeleteReason, endClaim string, format string, args ...any) (*Deletion, time.Time) {
		return &Deletion{Machine: name, Reason: r, Message: fmt.Sprintf(format, args...), Claim: endClaim}, time.Time{}
	}
	switch m.Status.Phase {
	case types.MachineFailed:
		return del(ReasonFailed, "", "machine %s failed: %s", name, orUnknown(m.Status.Reason))
	case types.MachineLost:
		return del(ReasonLost, "", "machine %s was lost: %s", name, orUnknown(m.Status.Reason))
	}
	if m.Spec.Claim == "" {
		if m.Spec.MachineTemplate != set.Spec.MachineTemplate {
			return del(ReasonOutdated, "", "machine %s is of template %s, the set now wants %s", name, m.Spec.MachineTemplate, set.Spec.MachineTemplate)
		}
		if m.Spec.Environment != set.Spec.Environment {
			return del(ReasonOutdated, "", "machine %s is of environment %q, the set now wants %q", name, m.Spec.Environment, set.Spec.Environment)
		}
		created := createdAt(m)
		if created.IsZero() {
			return nil, time.Time{}
		}
		stale := created.Add(lim.MaxAge)
		if !now.Before(stale) {
			return del(ReasonStale, "", "machine %s stayed unclaimed for %s (max age %s)", name, now.Sub(created), lim.MaxAge)
		}
		return nil, stale
	}
	if claim == nil {
		seen := m.Metadata.UpdatedAt
		if seen.IsZero() {
			seen = createdAt(m)
		}
		if gone := seen.Add(lim.ClaimGrace); now.Before(gone) {
			return nil, gone
		}
		return del(ReasonClaimGone, "", "machine %s was released: claim %s no longer exists", name, m.Spec.Claim)
	}
	switch claim.Status.Phase {
	case types.ClaimTerminated, types.ClaimFailed:
		return del(ReasonClaimEnded, "", "machine %s was released: claim %s is %s", name, claim.Metadata.Name, claim.Status.Phase)
	case types.ClaimBound:
	default:
		// Requested: the machine is being bound; the bind timeout governs it.
		return nil, time.Time{}
	}
	if other := claim.Status.Machine; other != "" && other != name && claim.Status.Round >= m.Spec.Round {
		return del(ReasonSuperseded, "", "machine %s was released: claim %s is bound to machine %s", name, claim.Metadata.Name, other)
	}
	assigned := assignedAt(m, *claim)
	if limit := assigned.Add(lim.MaxAssigned); !now.Before(limit) {
		return del(ReasonMaxAssigned, claim.Metadata.Name, "claim %s reached its maximum lifetime of %s", claim.Metadata.Name, lim.MaxAssigned)
	}
	last := assigned
	if active.After(last) {
		last = active
	}
	if limit := last.Add(lim.MaxIdle); !now.Before(limit) {
		return del(ReasonIdle, claim.Metadata.Name, "machine %s of claim %s was idle for %s (max idle %s)", name, claim.Metadata.Name, now.Sub(last), lim.MaxIdle)
	}
	return nil, earliest(assigned.Add(lim.MaxAssigned), last.Add(lim.MaxIdle))
}

// Delete priorities, cluster-api style: the higher, the sooner a machine goes
// when a set has too many.
const (
	// PriorityMustDelete: the machine holds nothing useful (failed, lost, going).
	PriorityMustDelete = 100
	// PriorityPending: not started; dropping it costs nothing.
	PriorityPending = 90
	// PriorityProvisioning: being allocated; serves nobody yet.
	PriorityProvisioning = 70
	// PriorityRunningMax bounds a ready unclaimed machine, whose priority grows
	// with its age from 1 (new or unknown age) to PriorityRunningMax (MaxAge).
	PriorityRunningMax = 50
	// PriorityMustNotDelete: a claimed machine never goes as surplus.
	PriorityMustNotDelete = 0
)

// DeletePriority says how eagerly to delete m when its set has more unclaimed
// machines than it keeps (higher first). Machines that serve nobody go first:
// not live or terminating, then Pending, then Provisioning. Ready machines go
// oldest first, their priority rising with age towards maxAge (DefaultMaxAge
// when not positive), because the oldest are the next to be reaped as stale
// anyway and the newest have the freshest images. A claimed machine is never
// surplus. deleteOrder breaks ties: older first, then by name.
func DeletePriority(m types.Machine, now time.Time, maxAge time.Duration) int {
	if !m.Live() || m.Status.Phase == types.MachineTerminating {
		return PriorityMustDelete
	}
	if m.Spec.Claim != "" {
		return PriorityMustNotDelete
	}
	switch m.Status.Phase {
	case "", types.MachinePending:
		return PriorityPending
	case types.MachineProvisioning:
		return PriorityProvisioning
	}
	if maxAge <= 0 {
		maxAge = DefaultMaxAge
	}
	created := createdAt(m)
	if created.IsZero() || !now.After(created) {
		return 1
	}
	frac := min(1, float64(now.Sub(created))/float64(maxAge))
	return 1 + int(frac*float64(PriorityRunningMax-1))
}

// deleteOrder sorts machines for scale-down: DeletePriority descending, then
// older first, then by name, so every node deletes the same ones.
func deleteOrder(a, b types.Machine, now time.Time, maxAge time.Duration) int {
	if c := cmp.Compare(DeletePriority(b, now, maxAge), DeletePriority(a, now, maxAge)); c != 0 {
		return c
	}
	if c := createdAt(a).Compare(createdAt(b)); c != 0 {
		return c
	}
	return cmp.Compare(a.Metadata.Name, b.Metadata.Name)
}

// OnDemandRoom is how many more machines an OnDemand set may provision for
// claims: maxProvisioned minus its live machines (Terminating included), or
// UnlimitedRoom without a maximum. It is 0 for a set that is not OnDemand.
func OnDemandRoom(set types.MachineSet, machines []types.Machine) int {
	if strategy(set) != types.ProvisionOnDemand {
		return 0
	}
	if set.Spec.MaxProvisioned <= 0 {
		return UnlimitedRoom
	}
	live := 0
	for _, m := range machines {
		if m.Spec.MachineSet == set.Metadata.Name && m.Live() {
			live++
		}
	}
	return max(0, set.Spec.MaxProvisioned-live)
}

// strategy is the set's provisioning strategy; an empty one means AutoScale,
// since a warm pool is what sets are for.
func strategy(set types.MachineSet) types.ProvisioningStrategy {
	if set.Spec.ProvisioningStrategy == "" {
		return types.ProvisionAutoScale
	}
	return set.Spec.ProvisioningStrategy
}

// createdAt is when m was created: its metadata, else when it was Pending.
func createdAt(m types.Machine) time.Time {
	if !m.Metadata.CreatedAt.IsZero() {
		return m.Metadata.CreatedAt
	}
	return m.Status.PhaseTimes.At(string(types.MachinePending))
}

// assignedAt is when m was given to its Bound claim: the claim's Bound time,
// else the later of the two creation times (the earliest it can have been).
func assignedAt(m types.Machine, c types.MachineClaim) time.Time {
	if t, ok := c.Status.PhaseTimes.Get(string(types.ClaimBound)); ok && !t.IsZero() {
		return t
	}
	t := createdAt(m)
	if c.Metadata.CreatedAt.After(t) {
		t = c.Metadata.CreatedAt
	}
	return t
}

// earliest returns the earlier of two times, ignoring zero ones.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

func orUnknown(s string) string {
	if s == "" {
		return "no reason given"
	}
	return s
}

// Reasons of a set's Filled condition.
const (
	FilledReady          = "Ready"
	FilledProvisioning   = "Provisioning"
	FilledWaiting        = "Waiting"
	FilledMaxProvisioned = "MaxProvisioned"
)

// WithFilled returns st with set's conditions and, for an AutoScale set,
// its Filled condition (transition times kept from set's status): True once
// the set holds minAvailable warm machines; otherwise False, saying what it
// waits for: machines being made (making), one waiting for room (waiting:
// its election's reason, as the first such claim says it), or the
// maxProvisioned cap, which claimed machines count against.
func WithFilled(now time.Time, set types.MachineSet, st types.MachineSetStatus, making int, waiting string) types.MachineSetStatus {
	conds := set.Status.Conditions
	if strategy(set) == types.ProvisionAutoScale {
		conds, _ = conds.Set(filled(set, st, making, waiting), now)
	} else {
		conds, _ = conds.Remove(types.ConditionFilled)
	}
	if len(conds) == 0 {
		conds = nil
	}
	st.Conditions = conds
	return st
}

func filled(set types.MachineSet, st types.MachineSetStatus, making int, waiting string) types.Condition {
	want := set.Spec.MinAvailable
	c := types.Condition{Type: types.ConditionFilled, Status: types.ConditionFalse}
	ready := fmt.Sprintf("%d of %d warm machines ready", st.Available, want)
	switch {
	case st.Available >= want:
		c.Status, c.Reason, c.Message = types.ConditionTrue, FilledReady, ready
	case waiting != "":
		c.Reason, c.Message = FilledWaiting, fmt.Sprintf("%s, %d being made; waiting: %s", ready, making, waiting)
	case making > 0:
		c.Reason, c.Message = FilledProvisioning, fmt.Sprintf("%s, %d being made", ready, making)
	case set.Spec.MaxProvisioned > 0 && st.Provisioned >= set.Spec.MaxProvisioned:
		c.Reason, c.Message = FilledMaxProvisioned, fmt.Sprintf("%s: maxProvisioned %d reached (%d live machines, claimed ones included)",
			ready, set.Spec.MaxProvisioned, st.Provisioned)
	default:
		c.Reason, c.Message = FilledProvisioning, ready
	}
	return c
}
