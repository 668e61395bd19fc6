package cloud

import (
	"fmt"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// capacity is the driver's quota ledger: the configured quota, the cloud's
// own quota less what others use of it (a cached reading), the instances
// this driver holds and those it is creating. Its methods are called with
// the driver's capMu held.
type capacity struct {
	quota   Quota
	hold    time.Duration
	refresh time.Duration

	held     map[string]types.Resources // instance id -> what it takes
	inflight map[string]types.Resources // instance name -> what it takes

	cloud      *usage
	readAt     time.Time
	refreshing bool
	// fullUntil is when the cloud's last "no capacity" stops counting.
	fullUntil time.Time
}

func newCapacity(c Common) *capacity {
	return &capacity{quota: c.Quota, hold: c.NoCapacityHold.Duration, refresh: c.QuotaRefresh.Duration,
		held: map[string]types.Resources{}, inflight: map[string]types.Resources{}}
}

// own is what this driver holds and is creating.
func (c *capacity) own() (types.Resources, int) {
	var sum types.Resources
	for _, r := range c.held {
		sum = sum.Add(r)
	}
	for _, r := range c.inflight {
		sum = sum.Add(r)
	}
	return sum, len(c.held) + len(c.inflight)
}

// limits are the vCPUs and instances this driver may run in all (its own
// included): the configured quota, lowered by the cloud's quota less what
// others use. Instances 0 means no limit.
func (c *capacity) limits() (vcpus float64, instances int) {
	vcpus, instances = c.quota.VCPUs, c.quota.Instances
	if u := c.cloud; u != nil {
		if u.LimitVCPUs >= 0 {
			vcpus = min(vcpus, u.LimitVCPUs-u.OtherVCPUs)
		}
		if u.LimitInstances >= 0 {
			n := int(u.LimitInstances - u.OtherInstances)
			if instances == 0 || n < instances {
				instances = max(n, 0)
				if instances == 0 {
					instances = -1 // none left: every instance is over
				}
			}
		}
	}
	return max(vcpus, 0), instances
}

// full says why no further instance may be created now, "" when one may.
func (c *capacity) full(now time.Time) string {
	_, count := c.own()
	if now.Before(c.fullUntil) {
		return fmt.Sprintf("the cloud reported no capacity %s ago", c.hold-c.fullUntil.Sub(now).Round(time.Second))
	}
	if _, n := c.limits(); n < 0 || (n > 0 && count >= n) {
		return fmt.Sprintf("instance quota reached (%d running or starting)", count)
	}
	return ""
}

// report is the node's capacity figures: the usable vCPUs (and the memory
// that goes with them) are the limits; when no further instance may be made
// they shrink to what this driver holds, so the node declines offers at
// once instead of trying the cloud.
func (c *capacity) report(now time.Time) types.Capacity {
	total := types.Resources{CPU: c.quota.VCPUs, RAMGB: c.quota.ram(c.quota.VCPUs)}
	vcpus, _ := c.limits()
	usable := types.Resources{CPU: vcpus, RAMGB: total.RAMGB * vcpus / c.quota.VCPUs}
	if c.full(now) != "" {
		own, _ := c.own()
		usable = types.Resources{CPU: min(usable.CPU, own.CPU), RAMGB: min(usable.RAMGB, own.RAMGB)}
	}
	return types.Capacity{Total: total, Usable: usable}
}

// begin counts an instance about to be created, or refuses it with an error
// wrapping drivers.ErrNoCapacity.
func (c *capacity) begin(now time.Time, name string, r types.Resources) error {
	if why := c.full(now); why != "" {
		return fmt.Errorf("%w: %s", drivers.ErrNoCapacity, why)
	}
	c.inflight[name] = r
	return nil
}

// created moves an instance from creating to held; id "" drops it (the
// create failed).
func (c *capacity) created(name, id string) {
	r := c.inflight[name]
	delete(c.inflight, name)
	if id != "" {
		c.held[id] = r
	}
}

// sync replaces the held instances with what the cloud lists.
func (c *capacity) sync(vms []vm) {
	clear(c.held)
	for _, v := range vms {
		c.held[v.ID] = v.Resources
	}
}

// stale says whether the cloud's quota should be read again, and if so
// marks a read under way.
func (c *capacity) stale(now time.Time) bool {
	if c.refreshing || now.Sub(c.readAt) < c.refresh {
		return false
	}
	c.refreshing = true
	return true
}

// read records a reading of the cloud's quota (a failed one keeps the last).
func (c *capacity) read(now time.Time, u *usage) {
	c.refreshing = false
	c.readAt = now
	if u != nil {
		c.cloud = u
	}
}
