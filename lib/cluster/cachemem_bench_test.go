package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// BenchmarkCacheMemory loads 10,000 bound claims and their running machines
// (shaped as the test driver makes them) into the node's cache and reports
// the heap the cache holds for them: decoded objects and indexes, the store
// left out. HF_BENCH_HEAP=path writes the heap profile there meanwhile.
//
//	go test -run x -bench CacheMemory -benchtime 1x ./lib/cluster/
func BenchmarkCacheMemory(b *testing.B) {
	const n = 10_000
	for b.Loop() {
		st, err := store.Open(store.Config{InMemory: true, NodeID: "n1"}, testLogger())
		if err != nil {
			b.Fatal(err)
		}
		t0 := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
		for i := range n {
			claim, machine := fmt.Sprintf("c-%05d", i), fmt.Sprintf("m-%012x", i)
			id := fmt.Sprintf("test-%016x", i)
			ep := []types.Endpoint{{Protocol: "test", Address: "test://n1/" + id}}
			info := map[string]string{"host": "n1", "id": id}
			objs := []types.Object{
				&types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
					Metadata: types.ObjectMeta{Name: claim, CreatedAt: t0},
					Spec:     types.MachineClaimSpec{MachineTemplate: "small"},
					Status: types.MachineClaimStatus{
						Election: &types.ClaimElection{Round: 1, Node: "n1", Driver: "test", At: t0},
						Binding:  &types.ClaimBinding{Round: 1, Node: "n1", Driver: "test", Machine: machine, Phase: types.BindingBound, At: t0, Since: t0}}},
				&types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine},
					Metadata: types.ObjectMeta{Name: machine, CreatedAt: t0, Labels: map[string]string{"hf/claim": claim, "hf/node": "n1"}},
					Spec: types.MachineSpec{MachineType: types.MachineTypeUser, Provider: "test", MachineTemplate: "small",
						Node: "n1", Driver: "test", Claim: claim, Round: 1},
					Status: types.MachineStatus{Phase: types.MachineRunning, MachineInformation: info, Addresses: ep,
						PhaseTimes: types.MakePhaseTimes(types.PhaseTime{Phase: "Pending", At: t0}, types.PhaseTime{Phase: "Running", At: t0}),
						Resource: &types.Resource{ID: id, Driver: "test", Info: info, Endpoints: ep, Resources: types.Resources{CPU: 1, RAMGB: 1},
							Data: json.RawMessage(fmt.Sprintf(`{"template":"small","meta":{"HF_CLAIM":%q,"HF_MACHINE":%q,"HF_NODE":"n1","HF_TEMPLATE":"small"},"config":{"fail":false,"delay":null}}`, claim, machine))}}},
			}
			for _, o := range objs {
				if _, err := st.Put(o, store.PutOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		}
		before := liveHeap()
		c := newCache(st, testLogger())
		ctx, cancel := context.WithCancel(context.Background())
		if err := c.Start(ctx); err != nil {
			b.Fatal(err)
		}
		if got := c.Len(types.KindMachineClaim) + c.Len(types.KindMachine); got != 2*n {
			b.Fatalf("cache holds %d objects, want %d", got, 2*n)
		}
		if m, _ := c.Get(types.KindMachine, "m-000000000000"); m.(*types.Machine).Status.Resource == nil {
			b.Fatal("a machine lost its resource")
		}
		held := liveHeap() - before
		b.ReportMetric(float64(held)/n, "B/claim+machine")
		b.ReportMetric(float64(held)/(1<<20), "MB")
		if path := os.Getenv("HF_BENCH_HEAP"); path != "" {
			writeHeapProfile(b, path)
		}
		runtime.KeepAlive(c)
		cancel()
		c.Wait()
		st.Close()
	}
}

// writeHeapProfile writes the heap profile to path, for go tool pprof.
func writeHeapProfile(tb testing.TB, path string) {
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		tb.Fatal(err)
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
