package cluster

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// sharing is a test driver that counts against the host budget, as the
// native and docker drivers do.
type sharing struct{ drivers.Driver }

func (sharing) SharesHost() bool { return true }

// Two local drivers on one 2-CPU host (each reporting the host's 2 CPUs)
// bind two 1-CPU machines between them, not four; the others wait with a
// reason, and the node reports the room left for each driver.
func TestHostBudgetIsShared(t *testing.T) {
	log := testLogger()
	dir := t.TempDir()
	st, err := store.Open(store.Config{Dir: filepath.Join(dir, "store"), NodeID: "n1"}, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	var ins []Instance
	for _, name := range []string{"native", "docker"} {
		d := testdriver.New(drivers.Env{Instance: name, DataDir: filepath.Join(dir, name), NodeName: "n1", Log: log})
		require.NoError(t, d.Prepare(context.Background(), []byte(`{"cpus": 2, "ram_gb": 8}`)))
		ins = append(ins, Instance{Name: name, Type: testdriver.Type, Driver: sharing{d}})
	}
	n, err := New(Config{Name: "n1", OfferTimeout: time.Second, ResyncInterval: time.Second}, log, st, ins, nil)
	require.NoError(t, err)
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, n.Stop(ctx))
	})
	put := func(o types.Object) {
		require.NoError(t, o.Validate())
		_, err := st.Put(o, store.PutOptions{Create: true})
		require.NoError(t, err)
	}
	for _, name := range []string{"native", "docker"} {
		tmpl := template("on-"+name, 1, 1, `{}`)
		tmpl.Spec.ProviderConfiguration = map[string]json.RawMessage{name: json.RawMessage(`{}`)}
		put(tmpl)
	}
	for _, c := range []string{"n-1", "d-1", "n-2", "d-2"} {
		tmpl := "on-native"
		if c[0] == 'd' {
			tmpl = "on-docker"
		}
		put(claim(c, tmpl, time.Minute))
	}
	phases := func() (bound, waiting int, reason string) {
		for _, c := range []string{"n-1", "d-1", "n-2", "d-2"} {
			got, err := store.Get[types.MachineClaim](st, types.KindMachineClaim, c)
			require.NoError(t, err)
			switch got.Status.Phase {
			case types.ClaimBound:
				bound++
			case types.ClaimRequested:
				waiting++
				reason = got.Status.Reason
			}
		}
		return
	}
	require.Eventually(t, func() bool { b, _, _ := phases(); return b == 2 }, 10*time.Second, 10*time.Millisecond)
	time.Sleep(500 * time.Millisecond) // time for a wrong third bind to show
	bound, waiting, reason := phases()
	assert.Equal(t, 2, bound, "the host's 2 CPUs, not each driver's")
	assert.Equal(t, 2, waiting)
	assert.Contains(t, reason, "cpu")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		node, err := store.Get[types.Node](st, types.KindNode, "n1")
		require.NoError(c, err)
		for _, d := range node.Spec.Drivers {
			assert.InDelta(c, 0, d.Capacity.Free.CPU, 1e-9, "driver %s: no CPU left on the host", d.Name)
			assert.InDelta(c, 2, d.Capacity.Total.CPU, 1e-9)
		}
	}, 5*time.Second, 10*time.Millisecond)
}

func TestCutToBudget(t *testing.T) {
	res := func(cpu float64) types.Resources { return types.Resources{CPU: cpu, RAMGB: cpu * 2} }
	own := types.Capacity{Total: res(4), Usable: res(4), Overbook: res(2), Used: res(1), Reserved: res(0)}
	budget := types.Capacity{Usable: res(4), Overbook: res(2), Used: res(3), Reserved: res(0.5)}
	got := cutToBudget(own, budget)
	assert.InDelta(t, 1.5, got.Usable.CPU, 1e-9, "own taken 1 + host room 0.5")
	assert.InDelta(t, 2, got.Overbook.CPU, 1e-9, "overbook room: min(4+2-1, 4+2-3.5) - 0.5")
	assert.InDelta(t, 0.5, got.Free.CPU, 1e-9)
	assert.InDelta(t, 3, got.Usable.RAMGB, 1e-9)
	alone := cutToBudget(own, types.Capacity{Usable: res(4), Overbook: res(2), Used: res(1)})
	assert.Equal(t, own.Usable, alone.Usable, "alone on the host, nothing is cut")
}
