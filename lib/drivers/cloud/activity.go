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

// errMeterRetry is Activity's answer between a failed read of an
// instance's metric and the next try, a period later: a cloud that refuses
// (no permission) is not asked again every few seconds.
var errMeterRetry = errors.New("reading the metric failed; tried again next period")

// meterState is what Activity has counted of one instance.
type meterState struct {
	ns      float64   // CPU nanoseconds above the idle floor, from launch to through
	through time.Time // the end of the last period counted
	counted bool      // through is set: the metric was read once
	next    time.Time // when to read the metric again
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
	st := d.meters[r.ID]
	d.meterMu.Unlock()
	if now.Before(st.next) {
		if !st.counted {
			return 0, fmt.Errorf("activity %s: %w", r.ID, errMeterRetry)
		}
		return uint64(st.ns), nil
	}
	next, err := d.readMeter(ctx, prov, m, r, st, now, period, delay)
	if errors.Is(err, drivers.ErrNotFound) {
		d.forget(r.ID)
		return 0, fmt.Errorf("activity %s: %w", r.ID, err)
	}
	if err != nil {
		next = st
		next.next = now.Add(period)
	}
	d.meterMu.Lock()
	defer d.meterMu.Unlock()
	// A concurrent call that read the same periods first wins.
	if cur, ok := d.meters[r.ID]; ok && (cur.through != st.through || cur.counted != st.counted) {
		return uint64(cur.ns), nil
	}
	d.meters[r.ID] = next
	if err != nil {
		return 0, fmt.Errorf("activity %s: %w", r.ID, err)
	}
	return uint64(next.ns), nil
}

// readMeter counts the periods after st that are final by now.
func (d *Driver) readMeter(ctx context.Context, prov provider, m meter, r *types.Resource, st meterState, now time.Time,
	period, delay time.Duration) (meterState, error) {
	v, err := d.getOwn(ctx, prov, r.ID)
	if err != nil {
		return st, err
	}
	if !st.counted {
		st.through, st.counted = v.Launched.Truncate(period), true
	}
	if end := now.Add(-delay).Truncate(period); end.After(st.through) {
		secs, err := m.busy(ctx, r.ID, st.through, end)
		if err != nil {
			return st, err
		}
		st.ns += secs * vcpusOf(v, r) * 1e9
		st.through = end
	}
	st.next = st.through.Add(period + delay)
	return st, nil
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
