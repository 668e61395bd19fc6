package scheduler

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/hf-fleet/hf/lib/types"
)

// AnnotationMachineType marks the set an event creates for a Shared line:
// its machines are Shared (all the event's users' claims bind to them).
const AnnotationMachineType = "hf/machine-type"

// SharedLine returns the index of ev's requiredMachines line for claim's
// template when that line is Shared: the claim then binds to one of the
// line's count machines, shared with the event's other users, instead of a
// machine of its own.
func SharedLine(claim types.MachineClaim, ev types.ScheduledEvent) (int, bool) {
	for i, line := range ev.Spec.RequiredMachines {
		if line.MachineTemplate == claim.Spec.MachineTemplate {
			return i, line.MachineType == types.MachineTypeShared
		}
	}
	return 0, false
}

// ChooseShared picks the shared machine a claim binds to among machines
// (those of the event's set for the line): Running, Shared, not being
// reaped nor lost; the one with the fewest claims bound (load), then by
// name. With none, reason says why.
func ChooseShared(ev, set string, machines []types.Machine, load map[string]int) (machine, reason string) {
	var ok []types.Machine
	for _, m := range machines {
		if m.Spec.MachineType == types.MachineTypeShared && m.Status.Phase == types.MachineRunning &&
			m.Status.Reap == nil && !m.LostHolds() && m.Spec.Node != "" {
			ok = append(ok, m)
		}
	}
	if len(ok) == 0 {
		return "", fmt.Sprintf("waiting for the shared machines of scheduled event %s (machine set %s has none running yet)", ev, set)
	}
	best := slices.MinFunc(ok, func(a, b types.Machine) int {
		return cmp.Or(cmp.Compare(load[a.Metadata.Name], load[b.Metadata.Name]), cmp.Compare(a.Metadata.Name, b.Metadata.Name))
	})
	return best.Metadata.Name, ""
}
