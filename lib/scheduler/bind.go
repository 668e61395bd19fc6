package scheduler

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// BindKind says where a claim's machine comes from.
type BindKind string

// Bind kinds, in the order DecideBind tries them.
const (
	// BindPool: take a ready machine of a set (no provisioning).
	BindPool BindKind = "Pool"
	// BindOnDemand: provision a machine for the claim in an OnDemand set.
	BindOnDemand BindKind = "OnDemand"
	// BindElect: elect a node directly, outside any set.
	BindElect BindKind = "Elect"
	// BindWait: nothing now; retry when sets or machines change, until the
	// claim's bind timeout.
	BindWait BindKind = "Wait"
)

// BindDecision is where a claim should be bound now.
type BindDecision struct {
	Kind    BindKind
	Machine string // BindPool
	Set     string // BindPool, BindOnDemand
	// Reason says why the better options were not taken; for BindWait it is
	// what a person can act on.
	Reason string
}

// DecideBind picks where claim binds at now: a ready pool machine
// (ChooseMachine), else an OnDemand set with room (FallbackOnDemand), else a
// direct election when allowed (DirectElectionAllowed), else wait. It is
// deterministic, so every node computes the same decision from the same view.
func DecideBind(claim types.MachineClaim, sets []types.MachineSet, machines []types.Machine, now time.Time, limits PoolLimits) BindDecision {
	m, set, ok, poolWhy := ChooseMachine(claim, sets, machines, now, limits)
	if ok {
		return BindDecision{Kind: BindPool, Machine: m, Set: set}
	}
	set, ok, odWhy := FallbackOnDemand(claim, sets, machines)
	if ok {
		return BindDecision{Kind: BindOnDemand, Set: set, Reason: poolWhy}
	}
	why := poolWhy
	if odWhy != poolWhy {
		why += "; " + odWhy
	}
	if ok, elWhy := DirectElectionAllowed(claim); !ok {
		return BindDecision{Kind: BindWait, Reason: why + "; " + elWhy}
	}
	return BindDecision{Kind: BindElect, Reason: why}
}

// ChooseMachine picks a ready machine for claim among sets' machines: Running,
// unclaimed, of the claim's template (and environment, when it names one), not
// older than its set's MaxAge (limits.For), in a set that serves the claim
// (SetServes) and that its bindStrategy allows:
//   - Any (or empty): every serving set; the claim's machineSets list is ignored.
//   - PreferMachineSets: the listed sets first, in list order, then any other.
//   - RequireMachineSets: only the listed sets.
//
// Unlisted sets reserved for the claim's access code or event come before
// plain Pool sets, leaving the public pool to others. Within the best tier the
// machine with the highest Weight(claim, machine) wins: every node picks the
// same one for a claim, and claims racing for one pool spread over its
// machines instead of all asking for the oldest. When none is ready, reason
// says why in words a person can act on.
func ChooseMachine(claim types.MachineClaim, sets []types.MachineSet, machines []types.Machine, now time.Time, limits PoolLimits) (machine, set string, ok bool, reason string) {
	cands, why := candidateSets(claim, sets)
	if len(cands) == 0 {
		return "", "", false, why
	}
	bySet := make(map[string]int, len(cands))
	for i, c := range cands {
		bySet[c.set.Metadata.Name] = i
	}
	var best *types.Machine
	bestSet := -1
	var bestW uint64
	busy := map[string]int{}
	for i := range machines {
		m := &machines[i]
		ci, in := bySet[m.Spec.MachineSet]
		if !in || !m.Live() {
			continue
		}
		if why := machineReady(claim, cands[ci].set, *m, now, limits); why != "" {
			busy[why]++
			continue
		}
		w := Weight(claim.Metadata.Name, m.Metadata.Name)
		if best == nil || cands[ci].before(cands[bestSet]) ||
			(!cands[bestSet].before(cands[ci]) && (w > bestW || (w == bestW && m.Metadata.Name < best.Metadata.Name))) {
			best, bestSet, bestW = m, ci, w
		}
	}
	if best != nil {
		return best.Metadata.Name, best.Spec.MachineSet, true, ""
	}
	names := make([]string, len(cands))
	for i, c := range cands {
		names[i] = c.set.Metadata.Name
	}
	reason = fmt.Sprintf("no ready machine in machine sets %s", strings.Join(names, ", "))
	if len(busy) > 0 {
		reason += " (" + countList(busy) + ")"
	}
	return "", "", false, reason
}

// machineReady says why m cannot take claim now, or "" when it can.
func machineReady(claim types.MachineClaim, set types.MachineSet, m types.Machine, now time.Time, limits PoolLimits) string {
	switch {
	case m.Spec.Claim != "":
		return "claimed"
	case m.Status.Phase == types.MachineRunning:
	case m.Status.Phase == types.MachineTerminating:
		return "terminating"
	default:
		return "provisioning"
	}
	if m.Spec.MachineTemplate != claim.Spec.MachineTemplate {
		return "other template"
	}
	if claim.Spec.Environment != "" && m.Spec.Environment != claim.Spec.Environment {
		return "other environment"
	}
	if c := createdAt(m); !c.IsZero() && !now.Before(c.Add(limits.For(set).MaxAge)) {
		return "stale"
	}
	return ""
}

// FallbackOnDemand picks an OnDemand set with room (OnDemandRoom) for claim,
// among the sets ChooseMachine would consider, in the same tier order and then
// by name. When none has room, reason says why.
func FallbackOnDemand(claim types.MachineClaim, sets []types.MachineSet, machines []types.Machine) (set string, ok bool, reason string) {
	cands, why := candidateSets(claim, sets)
	var full []string
	for _, c := range cands {
		if strategy(c.set) != types.ProvisionOnDemand {
			continue
		}
		if OnDemandRoom(c.set, machines) > 0 {
			return c.set.Metadata.Name, true, ""
		}
		full = append(full, c.set.Metadata.Name)
	}
	switch {
	case len(full) > 0:
		return "", false, fmt.Sprintf("OnDemand machine sets %s are at their maxProvisioned", strings.Join(full, ", "))
	case len(cands) == 0:
		return "", false, why
	}
	return "", false, fmt.Sprintf("no OnDemand machine set serves template %s", claim.Spec.MachineTemplate)
}

// DirectElectionAllowed reports whether claim may be served outside machine
// sets by electing a node directly: always, except with RequireMachineSets.
func DirectElectionAllowed(claim types.MachineClaim) (bool, string) {
	if claim.Spec.BindStrategy == types.BindRequireMachineSets {
		return false, fmt.Sprintf("bindStrategy RequireMachineSets allows only machine sets %s", strings.Join(claim.Spec.MachineSets, ", "))
	}
	return true, ""
}

// SetServes reports whether set's machines may serve claim: same template, a
// compatible environment, and an availability the claim meets (Pool: anyone;
// AccessCode: claims naming that code; ScheduledEvent: claims under that
// event). Whether the claim's code is valid is CheckAccessCode's business.
// The reason ends up in the claim's status, which its user reads: it says
// what kind of reservation stops the claim, never which code or event holds
// it (users are not told which code a set is reserved for).
func SetServes(claim types.MachineClaim, set types.MachineSet) (bool, string) {
	name, s := set.Metadata.Name, set.Spec
	if s.MachineTemplate != claim.Spec.MachineTemplate {
		return false, fmt.Sprintf("machine set %s is for template %s, not %s", name, s.MachineTemplate, claim.Spec.MachineTemplate)
	}
	if claim.Spec.Environment != "" && s.Environment != "" && s.Environment != claim.Spec.Environment {
		return false, fmt.Sprintf("machine set %s is in environment %s, not %s", name, s.Environment, claim.Spec.Environment)
	}
	a := s.AvailabilityConfiguration
	switch a.Availability {
	case types.AvailabilityPool:
		return true, ""
	case types.AvailabilityAccessCode:
		if claim.Metadata.Labels[types.LabelAccessCode] != a.Value {
			return false, fmt.Sprintf("machine set %s is reserved for an access code (present one that grants it in spec.accessCode)", name)
		}
		return true, ""
	case types.AvailabilityScheduledEvent:
		if claim.Spec.ScheduledEvent != a.Value {
			return false, fmt.Sprintf("machine set %s is reserved for a scheduled event (claim under that event in spec.scheduledEvent)", name)
		}
		return true, ""
	}
	return false, fmt.Sprintf("machine set %s has unknown availability %q", name, a.Availability)
}

// candidate is a set a claim may bind in, with its preference: lower tier
// first (0 listed, 1 reserved for the claim, 2 public pool), then lower index
// in the claim's list.
type candidate struct {
	set   types.MachineSet
	tier  int
	index int
}

func (c candidate) before(o candidate) bool {
	return c.tier < o.tier || (c.tier == o.tier && c.index < o.index)
}

// candidateSets lists the sets claim may bind in, best first (ties by name).
// With none, reason says why.
func candidateSets(claim types.MachineClaim, sets []types.MachineSet) ([]candidate, string) {
	strat := claim.Spec.BindStrategy
	listed := map[string]int{}
	if strat == types.BindPreferMachineSets || strat == types.BindRequireMachineSets {
		for i, n := range claim.Spec.MachineSets {
			if _, dup := listed[n]; !dup {
				listed[n] = i
			}
		}
	}
	var out []candidate
	var why []string
	found := map[string]bool{}
	for _, s := range sets {
		name := s.Metadata.Name
		idx, isListed := listed[name]
		found[name] = true
		if strat == types.BindRequireMachineSets && !isListed {
			continue
		}
		if ok, reason := SetServes(claim, s); !ok {
			if isListed {
				why = append(why, reason)
			}
			continue
		}
		c := candidate{set: s, tier: 2}
		switch {
		case isListed:
			c.tier, c.index = 0, idx
		case s.Spec.AvailabilityConfiguration.Availability != types.AvailabilityPool:
			c.tier = 1
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b candidate) int {
		if a.before(b) {
			return -1
		}
		if b.before(a) {
			return 1
		}
		return cmp.Compare(a.set.Metadata.Name, b.set.Metadata.Name)
	})
	if len(out) > 0 {
		return out, ""
	}
	for _, n := range claim.Spec.MachineSets {
		if _, ok := listed[n]; ok && !found[n] {
			why = append(why, fmt.Sprintf("machine set %s does not exist", n))
		}
	}
	slices.Sort(why)
	why = slices.Compact(why)
	head := fmt.Sprintf("no machine set serves template %s", claim.Spec.MachineTemplate)
	if strat == types.BindRequireMachineSets {
		head = fmt.Sprintf("none of the required machine sets %s serves the claim", strings.Join(claim.Spec.MachineSets, ", "))
	}
	if len(why) == 0 {
		return nil, head
	}
	return nil, head + ": " + strings.Join(why, "; ")
}

// countList formats counts as "2 claimed, 1 provisioning", sorted by name.
func countList(m map[string]int) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%d %s", m[k], k)
	}
	return strings.Join(parts, ", ")
}
