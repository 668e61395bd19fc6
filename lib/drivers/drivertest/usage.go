package drivertest

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/internal/syncbuf"
	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// cpuNS reads r's activity counter (CPU time in nanoseconds).
func cpuNS(t *testing.T, m drivers.ActivityMeter, r *types.Resource) uint64 {
	t.Helper()
	n, err := m.Activity(t.Context(), drivers.Bare(*r)) // as a node's health pass asks
	require.NoError(t, err)
	return n
}

// CheckActivity checks a driver's ActivityMeter on two running machines: the
// counter of busy (whose entry loops) grows by 100 ms of CPU, while the one
// of idle (whose entry sleeps) grows by less than 10 ms; once busy is
// deallocated its Activity is ErrNotFound. Waiting for the growth, not
// sampling a fixed second, keeps it true on a loaded machine.
func CheckActivity(t *testing.T, m drivers.ActivityMeter, d drivers.Driver, idle, busy *types.Resource) {
	t.Helper()
	idle0, busy0 := cpuNS(t, m, idle), cpuNS(t, m, busy)
	require.Eventually(t, func() bool { return cpuNS(t, m, busy) >= busy0+100_000_000 }, 30*time.Second, 100*time.Millisecond,
		"a busy loop's CPU time grows")
	idle1 := cpuNS(t, m, idle)
	t.Logf("cpu ns: idle %d, busy %d", idle1-idle0, cpuNS(t, m, busy)-busy0)
	assert.Less(t, idle1-idle0, uint64(10_000_000), "a sleeping machine burns next to nothing")

	require.NoError(t, d.Deallocate(t.Context(), busy))
	_, err := m.Activity(t.Context(), busy)
	assert.ErrorIs(t, err, drivers.ErrNotFound)
}

// PausingDriver is a driver that can pause machines and meter their use.
type PausingDriver interface {
	drivers.Driver
	drivers.Pauser
	drivers.ActivityMeter
}

// CheckPauseResume checks a driver's Pauser on busy, a running machine whose
// entry loops: Pause (twice: it is idempotent) leaves it held and Running
// with its CPU time standing still; Resume (twice) lets it run again; a
// paused machine is deallocated without waiting out a stop grace (under 5 s);
// then Pause is ErrNotFound. paused, when not nil, checks the driver's own
// view after each step. The caller checks that nothing is left behind.
func CheckPauseResume(t *testing.T, d PausingDriver, busy *types.Resource, paused func(want bool)) {
	t.Helper()
	ctx := t.Context()
	require.NoError(t, d.Pause(ctx, busy))
	require.NoError(t, d.Pause(ctx, drivers.Bare(*busy)), "a node may pause a resource without its Info")
	if paused != nil {
		paused(true)
	}
	phase, err := d.Status(ctx, busy)
	require.NoError(t, err)
	assert.Equal(t, types.MachineRunning, phase, "a paused machine is still held")
	before := cpuNS(t, d, busy)
	time.Sleep(500 * time.Millisecond)
	assert.Less(t, cpuNS(t, d, busy)-before, uint64(10_000_000), "no CPU time while paused")

	require.NoError(t, d.Resume(ctx, drivers.Bare(*busy)), "and resume it so")
	require.NoError(t, d.Resume(ctx, busy))
	if paused != nil {
		paused(false)
	}
	after := cpuNS(t, d, busy)
	require.Eventually(t, func() bool { return cpuNS(t, d, busy) > after+50_000_000 }, 30*time.Second, 50*time.Millisecond,
		"running again after Resume")

	require.NoError(t, d.Pause(ctx, busy))
	start := time.Now()
	require.NoError(t, d.Deallocate(ctx, busy))
	assert.Less(t, time.Since(start), 5*time.Second, "a paused machine needs no stop grace")
	assert.ErrorIs(t, d.Pause(ctx, busy), drivers.ErrNotFound)
}

// ShellStream is a shell's stream in a test (drivers.Sheller): In is its
// input, Out keeps what it wrote.
type ShellStream struct {
	In  io.Reader
	Out syncbuf.Buffer
}

func (p *ShellStream) Read(b []byte) (int, error)  { return p.In.Read(b) }
func (p *ShellStream) Write(b []byte) (int, error) { return p.Out.Write(b) }
