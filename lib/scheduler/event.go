package scheduler

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// Marks an event puts on the machine sets it creates.
const (
	// LabelScheduledEvent names the event that created a set.
	LabelScheduledEvent = "hf/scheduled-event"
	// AnnotationBindStrategy records the requiredMachines line's bindStrategy
	// on the set it made (a set has no bindStrategy field); claims still bind
	// by their own spec.bindStrategy.
	AnnotationBindStrategy = "hf/bind-strategy"
)

// EventPlan is what a ScheduledEvent's reconcile does now.
type EventPlan struct {
	Phase types.EventPhase
	// AcceptClaims: claims under the event may be created now.
	AcceptClaims bool
	// Create lists the sets to create, Update the event's sets to write back
	// changed, Delete the event's sets to delete.
	Create []types.MachineSet
	Update []types.MachineSet
	Delete []string
	// TerminateClaims: end every live claim under the event (CutOff at end).
	TerminateClaims bool
	// CreatedMachineSets is the new status.createdMachineSets.
	CreatedMachineSets []string
	// Warnings are problems a person should see, e.g. a name already taken.
	Warnings []string
	// Provisioned is the event's Provisioned condition (its times unset):
	// whether the event's sets are made, and if not why or when they will be.
	Provisioned types.Condition
	// Next is the next phase change (zero: none); the shell requeues then.
	Next time.Time
}

// EventPhaseAt is ev's phase at now: Scheduled before its provisioning start,
// Provisioning until its start, Active until its end, Expired from then.
func EventPhaseAt(now time.Time, ev types.ScheduledEvent) types.EventPhase {
	switch {
	case now.Before(ev.ProvisioningStart()):
		return types.EventScheduled
	case now.Before(ev.Spec.StartTime):
		return types.EventProvisioning
	case now.Before(ev.Spec.EndTime):
		return types.EventActive
	}
	return types.EventExpired
}

// ClaimAllowedByEvent reports whether a claim under ev may be created at now:
// only between its start (inclusive) and end (exclusive), whatever its
// expiration strategy. The reason names the time the window opens or closed.
func ClaimAllowedByEvent(now time.Time, ev types.ScheduledEvent) (bool, string) {
	switch {
	case now.Before(ev.Spec.StartTime):
		return false, fmt.Sprintf("scheduled event %s opens at %s", ev.Metadata.Name, stamp(ev.Spec.StartTime))
	case !now.Before(ev.Spec.EndTime):
		return false, fmt.Sprintf("scheduled event %s ended at %s", ev.Metadata.Name, stamp(ev.Spec.EndTime))
	}
	return true, ""
}

// PlanEvent computes what ev's reconcile does at now, given the users the
// event expects (fewer than 1 counts as 1) and the machine sets that exist.
//
//   - Scheduled: nothing.
//   - Provisioning and Active: each requiredMachines line with
//     createMachineSet gets one set named EventSetName(event, i), by
//     default AutoScale, reserved for the event, keeping LineMachines
//     machines ready and never more (see eventSets); a line without it
//     creates nothing (its claims bind from existing sets). Missing sets
//     are created, the event's own sets updated when the line changed. A name taken by a set the event did
//     not create is left alone with a warning.
//   - Expired, CutOff (the default): terminate the event's claims and delete
//     its sets.
//   - Expired, Soft: no new claims; the event's sets keep no warm machines
//     (minAvailable 0) so bound claims run until their own limits reap them,
//     and a set is deleted once it has no machine left.
//
// Only sets the event created are ever changed or deleted: those in
// status.createdMachineSets, or with the event's name, label and availability.
func PlanEvent(now time.Time, ev types.ScheduledEvent, expectedUsers int, existingSets []types.MachineSet) EventPlan {
	plan := EventPlan{Phase: EventPhaseAt(now, ev)}
	plan.AcceptClaims, _ = ClaimAllowedByEvent(now, ev)
	plan.CreatedMachineSets = slices.Clone(ev.Status.CreatedMachineSets)
	record := func(name string) {
		if !slices.Contains(plan.CreatedMachineSets, name) {
			plan.CreatedMachineSets = append(plan.CreatedMachineSets, name)
		}
	}
	existing := make(map[string]types.MachineSet, len(existingSets))
	for _, s := range existingSets {
		existing[s.Metadata.Name] = s
	}
	sorted := slices.Sorted(maps.Keys(existing))

	switch plan.Phase {
	case types.EventScheduled:
		plan.Next = ev.ProvisioningStart()
	case types.EventProvisioning, types.EventActive:
		plan.Next = ev.Spec.StartTime
		if plan.Phase == types.EventActive {
			plan.Next = ev.Spec.EndTime
		}
		for _, want := range eventSets(ev, expectedUsers) {
			have, ok := existing[want.Metadata.Name]
			switch {
			case !ok:
				plan.Create = append(plan.Create, want)
			case !ownedByEvent(have, ev):
				plan.Warnings = append(plan.Warnings, fmt.Sprintf("machine set %s already exists and was not created by scheduled event %s; its machines are not provisioned", have.Metadata.Name, ev.Metadata.Name))
				continue
			default:
				if spec := overlay(have.Spec, want.Spec); !reflect.DeepEqual(spec, have.Spec) {
					have.Spec = spec
					plan.Update = append(plan.Update, have)
				}
			}
			record(want.Metadata.Name)
		}
	}
	plan.Provisioned = provisioned(ev, plan)
	switch plan.Phase {
	case types.EventExpired:
		soft := ev.Spec.ExpirationStrategy == types.ExpireSoft
		plan.TerminateClaims = !soft
		for _, name := range sorted {
			s := existing[name]
			switch {
			case !ownedByEvent(s, ev):
			case !soft:
				plan.Delete = append(plan.Delete, name)
			case s.Spec.MinAvailable > 0:
				s.Spec.MinAvailable = 0
				plan.Update = append(plan.Update, s)
			case s.Status.Provisioned == 0:
				plan.Delete = append(plan.Delete, name)
			}
		}
	}
	return plan
}

// PlanDeletedEvent is what the reconcile of event, deleted, does at now
// with the sets that exist: the event ends as a Soft one does (its sets
// keep no warm machines, and each is deleted once empty), so its warm
// machines do not run on for nobody while the claims bound under it keep
// theirs. Only the sets it created are touched (its name and label).
func PlanDeletedEvent(now time.Time, event string, existingSets []types.MachineSet) EventPlan {
	ev := types.ScheduledEvent{Metadata: types.ObjectMeta{Name: event}, Spec: types.ScheduledEventSpec{ExpirationStrategy: types.ExpireSoft}}
	plan := PlanEvent(now, ev, 0, existingSets)
	return EventPlan{Phase: plan.Phase, Update: plan.Update, Delete: plan.Delete}
}

// Reasons of an event's Provisioned condition.
const (
	ProvisionedScheduled = "Scheduled"
	ProvisionedMade      = "SetsMade"
	ProvisionedNoSets    = "NoSetsToMake"
	ProvisionedNameTaken = "SetNameTaken"
	ProvisionedExpired   = "Expired"
)

// provisioned is the event's Provisioned condition for its plan.
func provisioned(ev types.ScheduledEvent, plan EventPlan) types.Condition {
	c := types.Condition{Type: types.ConditionProvisioned, Status: types.ConditionFalse}
	switch {
	case plan.Phase == types.EventScheduled:
		c.Reason, c.Message = ProvisionedScheduled, "the event's machine sets are made from "+stamp(ev.ProvisioningStart())
	case plan.Phase == types.EventExpired:
		how := "its machine sets are deleted (CutOff)"
		if ev.Spec.ExpirationStrategy == types.ExpireSoft {
			how = "its machine sets keep no warm machines and go once empty (Soft)"
		}
		c.Reason, c.Message = ProvisionedExpired, "the event ended at "+stamp(ev.Spec.EndTime)+"; "+how
	case len(plan.Warnings) > 0:
		c.Reason, c.Message = ProvisionedNameTaken, strings.Join(plan.Warnings, "; ")
	case len(plan.CreatedMachineSets) == 0:
		c.Status, c.Reason, c.Message = types.ConditionTrue, ProvisionedNoSets, "no line of requiredMachines has createMachineSet: its claims bind from existing sets"
	default:
		c.Status, c.Reason, c.Message = types.ConditionTrue, ProvisionedMade, "machine sets "+strings.Join(plan.CreatedMachineSets, ", ")
	}
	return c
}

// eventSets builds the sets ev wants: one per line with createMachineSet,
// from the spec it gives, its empty fields filled from the line (template,
// availability reserved for the event, AutoScale keeping LineMachines ready
// and no more).
func eventSets(ev types.ScheduledEvent, expectedUsers int) []types.MachineSet {
	var out []types.MachineSet
	for i, line := range ev.Spec.RequiredMachines {
		if !line.Creates() {
			continue
		}
		n := LineMachines(line, expectedUsers)
		spec := line.CreateMachineSet.MachineSetSpec
		spec.AvailabilityConfiguration.Type = ""
		if spec.AvailabilityConfiguration.Availability == "" {
			spec.AvailabilityConfiguration = types.AvailabilityConfiguration{Availability: types.AvailabilityScheduledEvent, Value: ev.Metadata.Name}
		}
		if spec.ProvisioningStrategy == "" {
			spec.ProvisioningStrategy = types.ProvisionAutoScale
		}
		if spec.MaxProvisioned == 0 {
			spec.MaxProvisioned = n
		}
		if spec.MinAvailable == 0 && spec.ProvisioningStrategy == types.ProvisionAutoScale {
			spec.MinAvailable = min(n, spec.MaxProvisioned)
		}
		spec.MachineTemplate = line.MachineTemplate
		s := types.MachineSet{
			TypeMeta: types.TypeMeta{Kind: types.KindMachineSet},
			Metadata: types.ObjectMeta{
				Name:   EventSetName(ev.Metadata.Name, i),
				Labels: map[string]string{LabelScheduledEvent: ev.Metadata.Name},
			},
			Spec: spec,
		}
		if line.BindStrategy != "" {
			s.Metadata.Annotations = map[string]string{AnnotationBindStrategy: string(line.BindStrategy)}
		}
		if line.MachineType == types.MachineTypeShared {
			if s.Metadata.Annotations == nil {
				s.Metadata.Annotations = map[string]string{}
			}
			s.Metadata.Annotations[AnnotationMachineType] = string(types.MachineTypeShared)
		}
		out = append(out, s)
	}
	return out
}

// overlay is have with every field want sets: the event decides what its
// line and createMachineSet say, and what they leave empty keeps what the
// set has (an admin's edit of the event's set, say).
func overlay(have, want types.MachineSetSpec) types.MachineSetSpec {
	out := have
	o, w := reflect.ValueOf(&out).Elem(), reflect.ValueOf(want)
	for i := range w.NumField() {
		if f := w.Field(i); !f.IsZero() {
			o.Field(i).Set(f)
		}
	}
	return out
}

// ClaimUnderEvent is claim as it binds under ev: per ev's requiredMachines
// line for its template, with that line's bindStrategy and sets, the sets
// the event creates for the line added to them (auto-preferred with
// PreferMachineSets, auto-required with RequireMachineSets). A claim that
// gives a bindStrategy or sets of its own keeps them; ok is false when the
// event has no line for the claim's template.
func ClaimUnderEvent(claim types.MachineClaim, ev types.ScheduledEvent) (out types.MachineClaim, ok bool) {
	out = claim
	for i, line := range ev.Spec.RequiredMachines {
		if line.MachineTemplate != claim.Spec.MachineTemplate {
			continue
		}
		if claim.Spec.BindStrategy != "" || len(claim.Spec.MachineSets) > 0 {
			return out, true
		}
		out.Spec.BindStrategy = line.BindStrategy
		if out.Spec.BindStrategy == "" {
			out.Spec.BindStrategy = types.BindAny
		}
		sets := slices.Clone(line.MachineSets)
		if created := EventSetName(ev.Metadata.Name, i); line.Creates() && out.Spec.BindStrategy != types.BindAny && !slices.Contains(sets, created) {
			sets = append(sets, created)
		}
		if out.Spec.BindStrategy != types.BindAny {
			out.Spec.MachineSets = sets
		}
		return out, true
	}
	return out, false
}

// EventSetSpec is the spec ev's reconcile at now would give set, its own
// set as a write would leave it (PlanEvent over that set alone): what the
// event decides (its line and createMachineSet, minAvailable 0 once a Soft
// event has ended) over what it leaves to the set. owned is false when ev
// did not create set; a set the event is deleting keeps its spec.
func EventSetSpec(now time.Time, ev types.ScheduledEvent, set types.MachineSet) (spec types.MachineSetSpec, owned bool) {
	if !ownedByEvent(set, ev) {
		return set.Spec, false
	}
	plan := PlanEvent(now, ev, ev.Spec.ExpectedUsers, []types.MachineSet{set})
	for _, u := range plan.Update {
		if u.Metadata.Name == set.Metadata.Name {
			return u.Spec, true
		}
	}
	return set.Spec, true
}

// ownedByEvent reports whether ev created s.
func ownedByEvent(s types.MachineSet, ev types.ScheduledEvent) bool {
	if slices.Contains(ev.Status.CreatedMachineSets, s.Metadata.Name) {
		return true
	}
	return s.Metadata.Labels[LabelScheduledEvent] == ev.Metadata.Name && isEventSetName(ev.Metadata.Name, s.Metadata.Name)
}

// LineMachines is how many machines a requiredMachines line needs: count per
// expected user (fewer than 1 counts as 1) for User machines (the default
// type), count for Shared ones.
func LineMachines(line types.RequiredMachines, expectedUsers int) int {
	if line.MachineType == types.MachineTypeShared {
		return line.Count
	}
	return line.Count * max(1, expectedUsers)
}

// EventSetName names the set an event creates for requiredMachines[i]:
// "<event>-<i>". When that is longer than a name may be, the event part is cut
// and a hash of the whole event name added, so names stay unique.
func EventSetName(event string, i int) string {
	suffix := "-" + strconv.Itoa(i)
	if len(event)+len(suffix) <= types.MaxNameLen {
		return event + suffix
	}
	h := fmt.Sprintf("-%08x", uint32(Weight(event, "machineset")))
	keep := max(0, types.MaxNameLen-len(suffix)-len(h))
	return strings.TrimRight(event[:min(keep, len(event))], "-") + h + suffix
}

// isEventSetName reports whether name is EventSetName(event, i) for some i.
func isEventSetName(event, name string) bool {
	k := strings.LastIndexByte(name, '-')
	if k < 0 {
		return false
	}
	i, err := strconv.Atoi(name[k+1:])
	return err == nil && i >= 0 && EventSetName(event, i) == name
}

// EventFits reports whether ev's required machines fit capacity (the
// environment's total resources) during its window, from provisioning start
// to end, together with every other event whose window overlaps. users gives
// each event's expected users (missing: 1); templates the machine templates by
// name. The load is checked at ev's provisioning start and at every
// overlapping event's provisioning start inside ev's window, where the peak
// must be. A zero dimension of capacity is not limited (disk is often not
// known). ev's lines must name known templates; other events' unknown
// templates count as nothing.
func EventFits(ev types.ScheduledEvent, others []types.ScheduledEvent, users map[string]int, templates map[string]types.MachineTemplate, capacity types.Resources) (bool, string) {
	need, missing := eventDemand(ev, users[ev.Metadata.Name], templates)
	if missing != "" {
		return false, missing
	}
	from, to := ev.ProvisioningStart(), ev.Spec.EndTime
	var overlap []types.ScheduledEvent
	points := []time.Time{from}
	for _, o := range others {
		if o.Metadata.Name == ev.Metadata.Name || !o.ProvisioningStart().Before(to) || !from.Before(o.Spec.EndTime) {
			continue
		}
		overlap = append(overlap, o)
		if s := o.ProvisioningStart(); s.After(from) {
			points = append(points, s)
		}
	}
	slices.SortFunc(points, time.Time.Compare)
	for _, t := range points {
		load := need
		var with []string
		for _, o := range overlap {
			if !t.Before(o.ProvisioningStart()) && t.Before(o.Spec.EndTime) {
				d, _ := eventDemand(o, users[o.Metadata.Name], templates)
				load = load.Add(d)
				with = append(with, o.Metadata.Name)
			}
		}
		if short := exceeds(load, capacity); short != "" {
			msg := fmt.Sprintf("scheduled event %s needs %s at %s", ev.Metadata.Name, short, stamp(t))
			if len(with) > 0 {
				slices.Sort(with)
				msg += " together with overlapping events " + strings.Join(with, ", ")
			}
			return false, msg
		}
	}
	return true, ""
}

// eventDemand sums the resources of ev's required machines. missing names the
// first line whose template is unknown (that line counts as nothing).
func eventDemand(ev types.ScheduledEvent, users int, templates map[string]types.MachineTemplate) (types.Resources, string) {
	var sum types.Resources
	missing := ""
	for i, line := range ev.Spec.RequiredMachines {
		t, ok := templates[line.MachineTemplate]
		if !ok {
			if missing == "" {
				missing = fmt.Sprintf("spec.requiredMachines[%d]: machine template %s does not exist", i, line.MachineTemplate)
			}
			continue
		}
		n := float64(LineMachines(line, users))
		r := t.Spec.Resources
		sum = sum.Add(types.Resources{CPU: r.CPU * n, RAMGB: r.RAMGB * n, DiskGB: r.DiskGB * n})
	}
	return sum, missing
}

// exceeds names the first dimension in which load passes capacity, as
// "cpu 48.0 of 32.0", or "" when it fits. Zero capacity is not limited.
func exceeds(load, capacity types.Resources) string {
	for _, d := range []struct {
		name      string
		need, cap float64
	}{{"cpu", load.CPU, capacity.CPU}, {"ram GB", load.RAMGB, capacity.RAMGB}, {"disk GB", load.DiskGB, capacity.DiskGB}} {
		if d.cap > 0 && d.need > d.cap+epsilon*d.need {
			return fmt.Sprintf("%s %.1f of %.1f", d.name, d.need, d.cap)
		}
	}
	return ""
}
