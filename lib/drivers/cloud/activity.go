package cloud

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// errNoMeter is Activity's answer where the provider cannot see use: the
// node then records no activity for the machine (only its session's
// keepalives count for idle reaping).
var errNoMeter = errors.New("the provider reports no activity")

// meter is a provider that can read how busy an instance was, from a
// metric published per period some time after the period ends (aws:
// CloudWatch's CPUUtilization).
type meter interface {
	// meterPeriod is the metric's period and how long after a period its
	// datapoint is there; period 0: metering is off.
	meterPeriod() (period, delay time.Duration)
	// busy is the CPU time, in seconds per vCPU, the instance spent above
	// the idle floor in the whole periods of [from, to).
	busy(ctx context.Context, id string, from, to time.Time) (float64, error)
}

// meterState is what Activity has counted of one instance.
type meterState struct {
	ns      float64   // CPU nanoseconds above the idle floor, from launch to through
	through time.Time // the end of the last period counted
	next    time.Time // when the next period's datapoint is due
}

var _ drivers.ActivityMeter = (*Driver)(nil)

// Activity implements drivers.ActivityMeter for providers that can see use
// (aws with activity.cloudwatch; not gce): the instance's CPU time above the
// idle floor since launch, in nanoseconds, from whole metric periods old
// enough to be final, so it only grows, and a restarted node reads the same
// figure. The metric is read at most once a period per instance; in between
// the last figure is returned. It is drivers.ErrNotFound once the instance
// is gone (checked when the metric is read).
func (d *Driver) Activity(ctx context.Context, r *types.Resource) (uint64, error) {
	if r == nil {
		return 0, errors.New("activity: nil resource")
	}
	prov, _, err := d.state()
	if err != nil {
		return 0, fmt.Errorf("activity %s: %w", r.ID, err)
	}
	m, ok := prov.(meter)
	var period, delay time.Duration
	if ok {
		period, delay = m.meterPeriod()
	}
	if period <= 0 {
		return 0, fmt.Errorf("activity %s: %w", r.ID, errNoMeter)
	}
	now := d.now()
	d.meterMu.Lock()
	st, known := d.meters[r.ID]
	d.meterMu.Unlock()
	if known && now.Before(st.next) {
		return uint64(st.ns), nil
	}
	v, err := d.getOwn(ctx, prov, r.ID)
	if err != nil {
		if errors.Is(err, drivers.ErrNotFound) {
			d.forget(r.ID)
		}
		return 0, fmt.Errorf("activity %s: %w", r.ID, err)
	}
	from := st.through
	if !known {
		from = v.Launched.Truncate(period)
	}
	next := st
	next.through = from
	if end := now.Add(-delay).Truncate(period); end.After(from) {
		secs, err := m.busy(ctx, r.ID, from, end)
		if err != nil {
			return 0, fmt.Errorf("activity %s: %w", r.ID, err)
		}
		next.ns += secs * vcpusOf(v, r) * 1e9
		next.through = end
	}
	next.next = next.through.Add(period + delay)
	d.meterMu.Lock()
	defer d.meterMu.Unlock()
	// A concurrent call that counted the same periods first wins.
	if cur, ok := d.meters[r.ID]; ok && cur.through != st.through {
		return uint64(cur.ns), nil
	}
	d.meters[r.ID] = next
	return uint64(next.ns), nil
}

// vcpusOf is the instance's vCPU count: the cloud's word, else the template's.
func vcpusOf(v vm, r *types.Resource) float64 {
	switch {
	case v.VCPUs > 0:
		return v.VCPUs
	case v.Resources.CPU > 0:
		return v.Resources.CPU
	case r.Resources.CPU > 0:
		return r.Resources.CPU
	}
	return 1
}
