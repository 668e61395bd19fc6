package scheduler

import (
	"fmt"
	"math"

	"github.com/hf-fleet/hf/lib/types"
)

// Unlimited is what Fit returns when nothing limits the count: a request of all
// zeros, or one whose only non-zero dimensions the host does not account (disk
// on a host that reports no disk). It is large enough to never be the binding
// limit and small enough to add to other counts without overflow.
const Unlimited int64 = 1 << 31

// epsilon absorbs float rounding so that 0.1+0.2 CPUs still fit in 0.3.
const epsilon = 1e-9

// Alter is a driver's capacity adjustment from config: the alter values are added
// to what the host has (negative keeps some for the host itself), the overbook
// values are added on top for claims whose template allows overbooking.
type Alter struct {
	CPUAlter    float64
	RAMAlter    float64
	CPUOverbook float64
	RAMOverbook float64
}

// HostCapacity turns a host's total resources and the driver's Alter into a
// Capacity: Usable = total + alter (never below zero), Overbook = the configured
// overbook (never below zero). Disk is not altered. Used, Reserved and Free are
// left for WithUsage.
func HostCapacity(total types.Resources, a Alter) types.Capacity {
	return types.Capacity{
		Total: total,
		Usable: types.Resources{
			CPU:    math.Max(0, total.CPU+a.CPUAlter),
			RAMGB:  math.Max(0, total.RAMGB+a.RAMAlter),
			DiskGB: math.Max(0, total.DiskGB),
		},
		Overbook: types.Resources{
			CPU:   math.Max(0, a.CPUOverbook),
			RAMGB: math.Max(0, a.RAMOverbook),
		},
	}
}

// WithUsage returns c with Used and Reserved set and Free = Usable - Used -
// Reserved. Free may be negative when overbooked machines run on the host.
func WithUsage(c types.Capacity, used, reserved types.Resources) types.Capacity {
	c.Used = used
	c.Reserved = reserved
	c.Free = c.Usable.Sub(used).Sub(reserved)
	return c
}

// dimension is one resource axis of a fit check.
type dimension struct {
	name  string
	limit float64 // usable, plus overbook when allowed
	taken float64 // used + reserved
	req   float64
}

// dimensions lists the axes that constrain req on c: those where req asks for
// something, and for disk only when the host accounts disk at all.
func dimensions(c types.Capacity, req types.Resources, allowOverbook bool) []dimension {
	limit := c.Usable
	if allowOverbook {
		limit = limit.Add(c.Overbook)
	}
	taken := c.Used.Add(c.Reserved)
	var out []dimension
	if req.CPU > 0 {
		out = append(out, dimension{"cpu", limit.CPU, taken.CPU, req.CPU})
	}
	if req.RAMGB > 0 {
		out = append(out, dimension{"ram", limit.RAMGB, taken.RAMGB, req.RAMGB})
	}
	if req.DiskGB > 0 && c.Usable.DiskGB > 0 {
		out = append(out, dimension{"disk", limit.DiskGB, taken.DiskGB, req.DiskGB})
	}
	return out
}

// Fit returns how many more machines of req fit on c, given what c already
// has used and reserved. The limit is Usable, plus Overbook when allowOverbook.
// Dimensions req does not ask for are ignored, and so is disk on a host that
// reports no usable disk. A request of all zeros fits Unlimited times. The
// result is never negative and never above Unlimited.
//
// Worked example: 16 CPUs, cpuOverbook 12, a template of 14 CPUs: with
// overbooking the limit is 28, so two fit (14, 28) and a third (42) does not;
// without overbooking only one fits.
func Fit(c types.Capacity, req types.Resources, allowOverbook bool) int64 {
	n := Unlimited
	for _, d := range dimensions(c, req, allowOverbook) {
		room := d.limit - d.taken
		if room < 0 {
			return 0
		}
		k := math.Floor(room/d.req + epsilon)
		if k < float64(n) {
			n = int64(k)
		}
	}
	return n
}

// Reserve is the check a candidate node makes under its own lock before it
// accepts an offer: does one more machine of req fit on c (whose Used and
// Reserved are the node's real figures)? When it does not, reason says which
// resource is short, e.g. "cpu 2.0 free of 4.0 needed". The caller adds req to
// its reservations when ok; Reserve itself changes nothing.
func Reserve(c types.Capacity, req types.Resources, allowOverbook bool) (ok bool, reason string) {
	if Fit(c, req, allowOverbook) >= 1 {
		return true, ""
	}
	return false, shortfall(c, req, allowOverbook)
}

// shortfall names the first resource that keeps req from fitting on c.
func shortfall(c types.Capacity, req types.Resources, allowOverbook bool) string {
	for _, d := range dimensions(c, req, allowOverbook) {
		room := d.limit - d.taken
		if room+epsilon*d.req < d.req {
			msg := fmt.Sprintf("%s %.1f free of %.1f needed", d.name, math.Max(0, room), d.req)
			if allowOverbook && c.Overbook != (types.Resources{}) {
				msg += " (overbook included)"
			}
			return msg
		}
	}
	return "fits"
}
