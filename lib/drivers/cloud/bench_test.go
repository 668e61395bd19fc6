package cloud

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// BenchmarkPoolFill measures filling a pool: one VM, then 20 at once, each
// against a test double whose creates take 1 s, as the acceptance asks. The
// driver waits on each VM on its own, so 20 take about as long as one. It
// reports both times in seconds and their ratio (at most 2):
//
//	go test -run '^$' -bench PoolFill -benchtime 1x ./lib/drivers/cloud/
func BenchmarkPoolFill(b *testing.B) {
	for _, kind := range []string{TypeAWS, TypeGCE} {
		b.Run(kind, func(b *testing.B) {
			var f *fixture
			if kind == TypeAWS {
				f = newAWSFixture(b)
			} else {
				f = newGCEFixture(b)
			}
			f.setDelay(time.Second)
			d := f.driver(b, map[string]any{"poll_interval": "50ms"})
			tmpl := f.template("pool", nil)
			if err := d.ValidateTemplate(tmpl); err != nil {
				b.Fatal(err)
			}
			var one, twenty time.Duration
			for b.Loop() {
				one += fill(b, d, tmpl, 1)
				twenty += fill(b, d, tmpl, 20)
			}
			n := time.Duration(b.N)
			b.ReportMetric((one / n).Seconds(), "one-vm-s")
			b.ReportMetric((twenty / n).Seconds(), "20-vm-s")
			b.ReportMetric(float64(twenty)/float64(one), "ratio")
			b.Logf("%s: one VM %s, 20 VMs in parallel %s (create delay 1s)", kind, (one / n).Round(time.Millisecond), (twenty / n).Round(time.Millisecond))
			if twenty > 2*one {
				b.Errorf("20 VMs took %s, more than twice one (%s)", twenty/n, one/n)
			}
		})
	}
}

// fill allocates n VMs at once and returns how long until all run; it
// releases them untimed.
func fill(b *testing.B, d *Driver, tmpl types.MachineTemplate, n int) time.Duration {
	b.Helper()
	res := make([]*types.Resource, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range n {
		wg.Go(func() { res[i], errs[i] = d.Allocate(b.Context(), tmpl, testMeta) })
	}
	wg.Wait()
	took := time.Since(start)
	b.StopTimer()
	defer b.StartTimer()
	for i := range n {
		if errs[i] != nil {
			b.Fatal(errs[i])
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			errs[i] = d.Deallocate(ctx, res[i])
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	return took
}
