package cloud

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/cloud/ec2test"
	"github.com/hf-fleet/hf/lib/internal/testclock"
	"github.com/hf-fleet/hf/lib/types"
)

// cloudWatchOn is the aws driver config that meters use from CloudWatch.
var cloudWatchOn = map[string]any{"activity": map[string]any{"cloudwatch": true, "cpu_percent": 5, "period": "5m", "delay": "10m"}}

func clockedDriver(t *testing.T, f *fixture, clock *testclock.Clock, extra map[string]any) *Driver {
	d := f.newDriver(t, "node-a", f.kind)
	d.now = clock.Now
	require.NoError(t, d.Prepare(t.Context(), f.config(extra)))
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func activity(t *testing.T, d *Driver, r *types.Resource) uint64 {
	t.Helper()
	n, err := d.Activity(t.Context(), r)
	require.NoError(t, err)
	return n
}

// TestActivityFromCloudWatch: with activity.cloudwatch the aws driver's
// counter is the CPU time above the idle floor from CloudWatch's
// CPUUtilization (read through the real SDK, which speaks Smithy RPC v2
// CBOR): idle periods add nothing, a busy one adds its CPU time above the
// floor; periods newer than the delay are not read; the metric is read once
// a period; a restarted driver reads the same figure; a deallocated
// instance is drivers.ErrNotFound.
func TestActivityFromCloudWatch(t *testing.T) {
	t.Parallel()
	f := newAWSFixture(t)
	clock := testclock.New(time.Now())
	d := clockedDriver(t, f, clock, cloudWatchOn)
	r, err := d.Allocate(t.Context(), f.template("small", nil), testMeta)
	require.NoError(t, err)
	launched := ec2Instance(t, f.ec2, r.ID).Launched
	const period = 5 * time.Minute
	p0 := launched.Truncate(period)
	at := func(k int) time.Time { return p0.Add(time.Duration(k) * period) }

	clock.Set(launched.Add(time.Minute))
	assert.Zero(t, activity(t, d, r), "no period is final yet")
	assert.Zero(t, f.ec2.Calls("GetMetricData"), "nothing to read yet")

	for k := range 4 {
		f.ec2.SetCPU(r.ID, at(k).Add(time.Minute), 1) // an idle VM's agents
	}
	f.ec2.SetCPU(r.ID, at(4).Add(time.Minute), 45) // someone works: 45 % of 2 vCPUs
	clock.Set(at(4).Add(10 * time.Minute))
	assert.Zero(t, activity(t, d, r), "periods 0-3 are idle (below the 5 % floor); period 4 is not final")
	clock.Set(at(5).Add(10 * time.Minute))
	want := uint64((45 - 5) * 300 * 2 * 1e7) // 40 % of 300 s of 2 vCPUs, in ns
	assert.Equal(t, want, activity(t, d, r))
	calls := f.ec2.Calls("GetMetricData")
	clock.Set(at(5).Add(14 * time.Minute))
	assert.Equal(t, want, activity(t, d, r), "the counter holds between periods")
	assert.Equal(t, calls, f.ec2.Calls("GetMetricData"), "the metric is read once a period")

	f.ec2.SetCPU(r.ID, at(5).Add(time.Minute), 2)
	clock.Set(at(6).Add(10 * time.Minute))
	assert.Equal(t, want, activity(t, d, r), "an idle period after use adds nothing")

	restarted := clockedDriver(t, f, clock, cloudWatchOn)
	assert.Equal(t, want, activity(t, restarted, r), "a restarted node reads the same figure")

	require.NoError(t, d.Deallocate(t.Context(), r))
	_, err = d.Activity(t.Context(), r)
	assert.ErrorIs(t, err, drivers.ErrNotFound)
}

// TestActivityOff: without activity.cloudwatch (the default), on gce, and
// when CloudWatch refuses, Activity is an error: the node records no use.
func TestActivityOff(t *testing.T) {
	forEachProvider(t, func(t *testing.T, f *fixture) {
		d := f.driver(t, nil)
		r, err := d.Allocate(t.Context(), f.template("small", nil), testMeta)
		require.NoError(t, err)
		_, err = d.Activity(t.Context(), r)
		assert.ErrorIs(t, err, errNoMeter)
		if f.kind == TypeAWS {
			clock := testclock.New(time.Now().Add(time.Hour))
			on := clockedDriver(t, f, clock, cloudWatchOn)
			f.ec2.Update(func(x *ec2test.Faults) { x.MetricsDenied = true })
			_, err = on.Activity(t.Context(), r)
			assert.ErrorContains(t, err, "AccessDenied")
			calls := f.ec2.Calls("GetMetricData")
			_, err = on.Activity(t.Context(), r)
			assert.ErrorIs(t, err, errMeterRetry, "a refused read is tried again a period later")
			assert.Equal(t, calls, f.ec2.Calls("GetMetricData"))
			f.ec2.Update(func(x *ec2test.Faults) { x.MetricsDenied = false })
			clock.Set(clock.Now().Add(5 * time.Minute))
			_, err = on.Activity(t.Context(), r)
			assert.NoError(t, err)
		}
		release(t, d, r)
	})
}

func TestActivityConfig(t *testing.T) {
	for _, tc := range []struct {
		activity map[string]any
		field    string
	}{
		{map[string]any{"cpu_percent": 100}, "activity.cpu_percent"},
		{map[string]any{"cpu_percent": -1}, "activity.cpu_percent"},
		{map[string]any{"period": "90s"}, "activity.period"},
		{map[string]any{"delay": "-1m"}, "activity.delay"},
	} {
		_, err := ParseAWSConfig([]byte(`{"region":"eu-central-1","quota":{"vcpus":4},"activity":` + mustJSON(tc.activity) + `}`))
		assert.ErrorContains(t, err, tc.field)
	}
	c, err := ParseAWSConfig([]byte(`{"region":"eu-central-1","quota":{"vcpus":4}}`))
	require.NoError(t, err)
	assert.False(t, c.Activity.CloudWatch, "off unless asked for: CloudWatch bills its reads")
	assert.Equal(t, 5*time.Minute, c.Activity.Period.Duration)
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}
