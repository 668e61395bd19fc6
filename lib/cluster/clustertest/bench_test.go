package clustertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/stats"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// boundWatch closes a channel per claim when host h sees it Bound.
type boundWatch struct {
	mu      sync.Mutex
	waiting map[string]chan struct{}
	done    map[string]bool
}

func watchBound(ctx context.Context, h *Host) *boundWatch {
	w := &boundWatch{waiting: map[string]chan struct{}{}, done: map[string]bool{}}
	events := h.Store.Watch(ctx, h.Store.Seq())
	go func() {
		for ev := range events {
			if ev.Record.Kind != types.KindMachineClaim || ev.Type != store.EventPut {
				continue
			}
			obj, err := store.Decode(ev.Record)
			if err != nil || obj.(*types.MachineClaim).Status.Phase != types.ClaimBound {
				continue
			}
			w.mu.Lock()
			w.done[ev.Record.Name] = true
			if ch, ok := w.waiting[ev.Record.Name]; ok {
				close(ch)
				delete(w.waiting, ev.Record.Name)
			}
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *boundWatch) wait(name string) <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := make(chan struct{})
	if w.done[name] {
		close(ch)
	} else {
		w.waiting[name] = ch
	}
	return ch
}

// pctMS is the p-th percentile of ds in milliseconds.
func pctMS(ds []time.Duration, p float64) float64 {
	return float64(stats.Percentile(ds, p).Microseconds()) / 1000
}

func benchFleet(b *testing.B, nodes int) *Fleet {
	f := Start(b, nodes, Options{Driver: `{"cpus": 1000000, "ram_gb": 1000000}`})
	f.Put(0, Template("one", 1, 1))
	f.WaitEverywhere(types.KindMachineTemplate, "one")
	return f
}

// BenchmarkClaimBoundLatency reports claim->Bound latency (p50, p99), one claim
// at a time, created on a rotating node and observed on the node it was
// created on, for 1, 3 and 10 nodes with the test driver.
func BenchmarkClaimBoundLatency(b *testing.B) {
	for _, nodes := range []int{1, 3, 10} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			f := benchFleet(b, nodes)
			lat := measureBound(b, f, "l")
			b.ReportMetric(pctMS(lat, 50), "p50-ms")
			b.ReportMetric(pctMS(lat, 99), "p99-ms")
		})
	}
}

// BenchmarkClaimThroughput reports sustained claims/s: b.N claims created
// through all nodes at once, timed until every one is Bound.
func BenchmarkClaimThroughput(b *testing.B) {
	for _, nodes := range []int{1, 3, 10} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			f := benchFleet(b, nodes)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			w := watchBound(ctx, f.Hosts[0])
			chans := make([]<-chan struct{}, b.N)
			for i := range chans {
				chans[i] = w.wait(fmt.Sprintf("t%d", i))
			}
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for n := range nodes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := n; i < b.N; i += nodes {
						_, err := f.Hosts[n].Store.Put(Claim(fmt.Sprintf("t%d", i), "one", 5*time.Minute), store.PutOptions{Create: true})
						if err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			for i, ch := range chans {
				select {
				case <-ch:
				case <-time.After(2 * time.Minute):
					b.Fatalf("claim t%d not bound in 2m", i)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "claims/s")
		})
	}
}

// BenchmarkPoolBindLatency reports claim->Bound latency (p50, p99) for claims
// that take a warm machine of an AutoScale set on 3 nodes, one at a time,
// created on a rotating node and observed there.
func BenchmarkPoolBindLatency(b *testing.B) {
	const nodes = 3
	f := Start(b, nodes, Options{Driver: `{"cpus": 1000000, "ram_gb": 1000000}`})
	f.Put(0, Template("one", 1, 1))
	warm := b.N + 5
	f.Put(0, machineSet("pool", "one", warm, 0))
	require.Eventually(b, func() bool {
		for _, h := range f.Up() {
			if _, avail := poolCounts(h, "pool"); avail < warm {
				return false
			}
		}
		return true
	}, 2*time.Minute, 20*time.Millisecond)
	lat := measureBound(b, f, "p")
	pooled := 0
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("p%d", i)
		if c := f.Hosts[i%nodes].Claims()[name]; c != nil {
			if m := f.Hosts[i%nodes].Machines()[c.Status.Machine]; m != nil && m.Spec.MachineSet == "pool" {
				pooled++
			}
		}
	}
	b.ReportMetric(pctMS(lat, 50), "p50-ms")
	b.ReportMetric(pctMS(lat, 99), "p99-ms")
	b.ReportMetric(float64(pooled)/float64(b.N), "from-pool")
}

// measureBound creates b.N claims one at a time on rotating nodes and returns
// each claim->Bound latency as seen on the node it was created on.
func measureBound(b *testing.B, f *Fleet, prefix string) []time.Duration {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watches := make([]*boundWatch, len(f.Hosts))
	for i, h := range f.Hosts {
		watches[i] = watchBound(ctx, h)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := fmt.Sprintf("%s%d", prefix, i)
		at := i % len(f.Hosts)
		ch := watches[at].wait(name)
		start := time.Now()
		f.Put(at, Claim(name, "one", time.Minute))
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			b.Fatalf("claim %s not bound in 30s", name)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	return lat
}
