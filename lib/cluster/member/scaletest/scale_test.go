package scaletest_test

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/member/scaletest"
)

// TestScaleShort: on 10 members every write reaches every member, a record
// one member lacks is repaired, and a new member catches up with 10,000
// objects. The figures are logged, never
// asserted.
func TestScaleShort(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	t.Run("writes", func(t *testing.T) {
		r := scaletest.Writes(t, scaletest.Options{Nodes: 10, Writes: 50})
		t.Log(r)
		assert.Equal(t, r.Writes, r.Reached, "every write reaches every member")
	})
	t.Run("dead member", func(t *testing.T) {
		// Ten members cope with quicker failure detection than the big
		// fleets' (the race detector's timings of membertest.FastConfig).
		cfg := scaletest.Config()
		cfg.ProbeInterval, cfg.ProbeTimeout, cfg.SuspicionMult = 500*time.Millisecond, 400*time.Millisecond, 4
		r := scaletest.DeadMember(t, scaletest.Options{Nodes: 10, Writes: 10, Config: cfg})
		t.Log(r)
		assert.Equal(t, r.Writes, r.Reached, "writes go around the dead member")
	})
	t.Run("one-record repair", func(t *testing.T) {
		r := scaletest.OneRecordRepair(t, 1000, scaletest.Options{})
		t.Log(r)
	})
	t.Run("catch-up", func(t *testing.T) {
		r := scaletest.CatchUp(t, 10000, scaletest.Options{})
		t.Log(r)
		assert.True(t, r.Converged, "the new member holds what the old one does")
	})
}

// sizes are the fleet sizes of BenchmarkScale: HF_SCALE_NODES (comma
// separated) or 10, 50 and 200.
func sizes(b *testing.B) []int {
	s := os.Getenv("HF_SCALE_NODES")
	if s == "" {
		return []int{10, 50, 200}
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(f)
		require.NoError(b, err, "HF_SCALE_NODES")
		out = append(out, n)
	}
	return out
}

// modes are the dissemination modes BenchmarkScale compares: every write
// straight to every peer (Fanout -1, as before the tree) and the tree with
// the default fan-out.
var modes = []struct {
	name   string
	fanout int
}{{"direct", -1}, {"tree", 0}}

// BenchmarkScale is the long run: writes on fleets of 10, 50 and 200
// members in both dissemination modes, a one-record repair between two
// members holding 1,000, 10,000 and 100,000 objects (in-sync rounds
// measured first), then a new member catching up with 100,000 objects. One
// iteration is one whole measurement; run it with -benchtime=1x (README.md,
// Scale).
func BenchmarkScale(b *testing.B) {
	for _, mode := range modes {
		for _, n := range sizes(b) {
			b.Run(fmt.Sprintf("writes/%s/nodes=%d", mode.name, n), func(b *testing.B) {
				cfg := scaletest.Config()
				cfg.Fanout = mode.fanout
				var r scaletest.Result
				for range b.N {
					r = scaletest.Writes(b, scaletest.Options{Nodes: n, Writes: 200, Config: cfg})
				}
				b.Log(r)
				b.ReportMetric(float64(r.Reached)/float64(r.Writes), "reached")
				b.ReportMetric(r.P50.Seconds()*1000, "p50-ms")
				b.ReportMetric(r.P99.Seconds()*1000, "p99-ms")
				b.ReportMetric(r.WriterMsgs, "writer-msgs/write")
				b.ReportMetric(r.WriterBytes, "writer-B/write")
				b.ReportMetric(r.MaxMsgs, "max-node-msgs/write")
				b.ReportMetric(r.MaxBytes, "max-node-B/write")
				b.ReportMetric(r.MeanMsgs, "mean-node-msgs/write")
				b.ReportMetric(r.MeanBytes, "mean-node-B/write")
				b.ReportMetric(r.AEBytesPerRound, "ae-B/round")
				b.ReportMetric(r.IdleAEBytesPerRound, "insync-ae-B/round")
			})
		}
	}
	for _, mode := range modes {
		for _, n := range sizes(b) {
			b.Run(fmt.Sprintf("dead-member/%s/nodes=%d", mode.name, n), func(b *testing.B) {
				cfg := scaletest.Config()
				cfg.Fanout = mode.fanout
				var r scaletest.DeadResult
				for range b.N {
					r = scaletest.DeadMember(b, scaletest.Options{Nodes: n, Writes: 20, Config: cfg})
				}
				b.Log(r)
				b.ReportMetric(float64(r.Reached)/float64(r.Writes), "reached")
				b.ReportMetric(r.P50.Seconds()*1000, "p50-ms")
				b.ReportMetric(r.P99.Seconds()*1000, "p99-ms")
				b.ReportMetric(r.Detect.Seconds(), "detect-s")
			})
		}
	}
	for _, objects := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprintf("repair/objects=%d", objects), func(b *testing.B) {
			var r scaletest.RepairResult
			for range b.N {
				r = scaletest.OneRecordRepair(b, objects, scaletest.Options{})
			}
			b.Log(r)
			b.ReportMetric(r.InSyncBytesPerRound, "insync-ae-B/round")
			b.ReportMetric(r.Bytes, "ae-B")
			b.ReportMetric(r.Rounds, "rounds")
			b.ReportMetric(r.Took.Seconds()*1000, "repair-ms")
		})
	}
	b.Run("tombstones/nodes=10/deletes=10000", func(b *testing.B) {
		var r scaletest.TombstoneResult
		for range b.N {
			r = scaletest.Tombstones(b, 10000, scaletest.Options{Nodes: 10})
		}
		b.Log(r)
		b.ReportMetric(r.Spread.Seconds(), "spread-s")
		b.ReportMetric(r.Half.Seconds(), "half-collected-s")
		b.ReportMetric(r.All.Seconds(), "all-collected-s")
		b.ReportMetric(r.Bytes, "ae-B")
	})
	b.Run("catch-up/objects=100000", func(b *testing.B) {
		var r scaletest.CatchUpResult
		for range b.N {
			r = scaletest.CatchUp(b, 100000, scaletest.Options{})
		}
		b.Log(r)
		b.ReportMetric(r.Took.Seconds()*1000, "catchup-ms")
		b.ReportMetric(r.Bytes, "ae-B")
	})
}
