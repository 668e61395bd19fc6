package docker

import (
	"context"
	"testing"
	"time"

	"github.com/hf-fleet/hf/lib/stats"
	"github.com/hf-fleet/hf/lib/types"
)

// BenchmarkAllocateRunning measures claim->Running on the driver: Allocate of
// a local image until it returns a running container (create, start, the
// start_grace check, inspect), for the default grace and for none. The
// deallocation is not timed. It reports p50 and p99 in milliseconds:
//
//	go test -run '^$' -bench AllocateRunning -benchtime 20x ./lib/drivers/docker/
func BenchmarkAllocateRunning(b *testing.B) {
	f := newFixture(b)
	for _, bc := range []struct {
		name  string
		grace string
	}{{"grace=200ms", "200ms"}, {"grace=0", "0s"}} {
		b.Run(bc.name, func(b *testing.B) {
			d := f.driver(b, "node-a", "docker", map[string]any{"start_grace": bc.grace})
			tmpl := f.template("bench", types.Resources{CPU: 0.1, RAMGB: 0.1}, map[string]any{"ports": []string{"8080"}})
			var lat []time.Duration
			for b.Loop() {
				start := time.Now()
				r, err := d.Allocate(b.Context(), tmpl, map[string]string{"HF_CLAIM": "bench"})
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
				b.StopTimer()
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err = d.Deallocate(ctx, r)
				cancel()
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			p50, p99 := stats.Percentile(lat, 50), stats.Percentile(lat, 99)
			b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
			b.Logf("claim->Running (docker, local image, %s): n=%d p50=%s p99=%s", bc.name, len(lat),
				p50.Round(time.Millisecond), p99.Round(time.Millisecond))
		})
	}
}
