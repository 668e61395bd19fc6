package cluster

import (
	"math"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/types"
)

// One host budget: the local drivers whose machines run on this host's own
// CPUs and RAM (drivers.HostSharer: native, docker) never promise together
// more than the host has. The budget is the largest usable (and overbook)
// any of them reports, for the host is one; what all of them use and
// reserve is taken from it. A sharing instance's capacity is reported with
// its usable and overbook cut to the room left in the budget, so every
// reader (the elector's Fit, the acceptor's Reserve, node list, /metrics)
// sees what can really be placed.

// sharesHost reports whether the instance counts against the host budget.
func sharesHost(in Instance) bool {
	s, ok := in.Driver.(drivers.HostSharer)
	return ok && s.SharesHost() && !in.Driver.IsRemote()
}

// capacityLocked is in's capacity with its used and reserved and, for a
// sharing instance, cut to the host budget. Caller holds a.mu.
func (a *acceptor) capacityLocked(in Instance) types.Capacity {
	used, reserved, _ := a.usageLocked(in.Name)
	own := scheduler.WithUsage(in.Driver.HostCapacity(), used, reserved)
	if !sharesHost(in) {
		return own
	}
	var budget types.Capacity
	for _, name := range a.n.order {
		o := a.n.instances[name]
		if !sharesHost(o) {
			continue
		}
		c := o.Driver.HostCapacity()
		budget.Usable = maxRes(budget.Usable, c.Usable)
		budget.Overbook = maxRes(budget.Overbook, c.Overbook)
		u, r, _ := a.usageLocked(name)
		budget.Used, budget.Reserved = budget.Used.Add(u), budget.Reserved.Add(r)
	}
	return cutToBudget(own, budget)
}

// cutToBudget lowers own's usable and overbook so that what is left of
// them is no more than what is left of the budget, dimension by dimension.
func cutToBudget(own, budget types.Capacity) types.Capacity {
	ownTaken, hostTaken := own.Used.Add(own.Reserved), budget.Used.Add(budget.Reserved)
	cut := func(ownU, ownO, ownT, hostU, hostO, hostT float64) (float64, float64) {
		room := math.Min(ownU-ownT, hostU-hostT)
		roomOB := math.Max(math.Min(ownU+ownO-ownT, hostU+hostO-hostT), room)
		return ownT + room, roomOB - room
	}
	out := own
	out.Usable.CPU, out.Overbook.CPU = cut(own.Usable.CPU, own.Overbook.CPU, ownTaken.CPU, budget.Usable.CPU, budget.Overbook.CPU, hostTaken.CPU)
	out.Usable.RAMGB, out.Overbook.RAMGB = cut(own.Usable.RAMGB, own.Overbook.RAMGB, ownTaken.RAMGB, budget.Usable.RAMGB, budget.Overbook.RAMGB, hostTaken.RAMGB)
	out.Free = out.Usable.Sub(own.Used).Sub(own.Reserved)
	return out
}

func maxRes(a, b types.Resources) types.Resources {
	return types.Resources{CPU: math.Max(a.CPU, b.CPU), RAMGB: math.Max(a.RAMGB, b.RAMGB), DiskGB: math.Max(a.DiskGB, b.DiskGB)}
}
