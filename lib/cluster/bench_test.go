package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// benchNode starts one node whose test driver can take every claim.
func benchNode(b *testing.B, driverOnDisk bool) (*store.Store, *Node) {
	b.Helper()
	dir := b.TempDir()
	log := testLogger()
	st, err := store.Open(store.Config{Dir: filepath.Join(dir, "store"), NodeID: "n1"}, log)
	require.NoError(b, err)
	ddir := ""
	if driverOnDisk {
		ddir = filepath.Join(dir, "test")
	}
	drv := testdriver.New(drivers.Env{Instance: "test", DataDir: ddir, NodeName: "n1", Log: log})
	require.NoError(b, drv.Prepare(context.Background(), []byte(`{"cpus": 1000000, "ram_gb": 1000000}`)))
	n, err := New(Config{Name: "n1"}, log, st, []Instance{{Name: "test", Type: "test", Driver: drv}}, nil)
	require.NoError(b, err)
	require.NoError(b, n.Start(context.Background()))
	b.Cleanup(func() {
		require.NoError(b, n.Stop(context.Background()))
		require.NoError(b, st.Close())
	})
	_, err = st.Put(template("small", 1, 1, `{}`), store.PutOptions{Create: true})
	require.NoError(b, err)
	return st, n
}

// boundWaiter reports, per claim name, when the store saw it Bound.
func boundWaiter(ctx context.Context, st *store.Store) func(name string) <-chan struct{} {
	var mu sync.Mutex
	waiting := map[string]chan struct{}{}
	done := map[string]bool{}
	events := st.Watch(ctx, st.Seq())
	go func() {
		for ev := range events {
			if ev.Record.Kind != types.KindMachineClaim || ev.Type != store.EventPut {
				continue
			}
			obj, err := store.Decode(ev.Record)
			if err != nil || obj.(*types.MachineClaim).Status.Phase != types.ClaimBound {
				continue
			}
			mu.Lock()
			done[ev.Record.Name] = true
			if ch, ok := waiting[ev.Record.Name]; ok {
				close(ch)
				delete(waiting, ev.Record.Name)
			}
			mu.Unlock()
		}
	}()
	return func(name string) <-chan struct{} {
		mu.Lock()
		defer mu.Unlock()
		ch := make(chan struct{})
		if done[name] {
			close(ch)
		} else {
			waiting[name] = ch
		}
		return ch
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// BenchmarkClaimBound measures claim->Bound latency on one node with the test
// driver, one claim at a time, and reports p50/p99.
func BenchmarkClaimBound(b *testing.B) {
	for _, disk := range []bool{false, true} {
		b.Run(fmt.Sprintf("driverOnDisk=%v", disk), func(b *testing.B) {
			st, _ := benchNode(b, disk)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			wait := boundWaiter(ctx, st)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				name := fmt.Sprintf("lat-%d", i)
				ch := wait(name)
				start := time.Now()
				_, err := st.Put(claim(name, "small", time.Minute), store.PutOptions{Create: true})
				require.NoError(b, err)
				select {
				case <-ch:
				case <-time.After(10 * time.Second):
					b.Fatalf("claim %s not bound in 10s", name)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			b.ReportMetric(float64(percentile(lat, 0.50).Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
		})
	}
}

// BenchmarkClaimThroughput creates claims as fast as the store takes them and
// reports sustained claims/s until all are Bound.
func BenchmarkClaimThroughput(b *testing.B) {
	st, _ := benchNode(b, true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := boundWaiter(ctx, st)
	b.ResetTimer()
	start := time.Now()
	chans := make([]<-chan struct{}, b.N)
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("tp-%d", i)
		chans[i] = wait(name)
		_, err := st.Put(claim(name, "small", 5*time.Minute), store.PutOptions{Create: true})
		require.NoError(b, err)
	}
	for i, ch := range chans {
		select {
		case <-ch:
		case <-time.After(60 * time.Second):
			b.Fatalf("claim tp-%d not bound in 60s", i)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "claims/s")
}
