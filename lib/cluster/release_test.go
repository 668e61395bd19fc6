package cluster

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// gatedDriver is the test driver whose Deallocate waits for gate, when
// one is set, and then fails with fail, when one is set.
type gatedDriver struct {
	*testdriver.Driver
	gate atomic.Pointer[chan struct{}]
	fail atomic.Pointer[error]
}

func (d *gatedDriver) Deallocate(ctx context.Context, r *types.Resource) error {
	if g := d.gate.Load(); g != nil {
		select {
		case <-*g:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if err := d.fail.Load(); err != nil {
		return *err
	}
	return d.Driver.Deallocate(ctx, r)
}

// phasesOf collects the phases written to machine name's record from the
// store's watch, from seq on; deleted is true once the watch has brought
// the record's delete, and with it every write before it.
func phasesOf(ctx context.Context, st *store.Store, seq uint64, name string) (got func() (phases []types.MachinePhase, deleted bool)) {
	type seen struct {
		phases  []types.MachinePhase
		deleted bool
	}
	var last atomic.Pointer[seen]
	last.Store(&seen{})
	events := st.Watch(ctx, seq)
	go func() {
		for ev := range events {
			if ev.Record.Kind != types.KindMachine || ev.Record.Name != name {
				continue
			}
			s := *last.Load()
			switch ev.Type {
			case store.EventDelete:
				s.deleted = true
			case store.EventPut:
				o, err := ev.View()
				if err != nil {
					continue
				}
				s.phases = append(slices.Clip(s.phases), o.(*types.Machine).Status.Phase)
			}
			last.Store(&s)
		}
	}()
	return func() ([]types.MachinePhase, bool) { s := last.Load(); return s.phases, s.deleted }
}

// The machine of a deleted claim is shown Terminating only when its
// release takes longer than provisioningShownAfter (the record goes right
// after), and stays Terminating when its driver fails to release it.
func TestReleaseOfAGoneClaimShowsTerminatingOnlyWhenSlow(t *testing.T) {
	dir := t.TempDir()
	log := testLogger()
	st, err := store.Open(store.Config{Dir: filepath.Join(dir, "store"), NodeID: "n1"}, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	td := testdriver.New(drivers.Env{Instance: "test", DataDir: filepath.Join(dir, "test"), NodeName: "n1", Log: log})
	require.NoError(t, td.Prepare(context.Background(), []byte(`{"cpus": 64, "ram_gb": 64}`)))
	drv := &gatedDriver{Driver: td.(*testdriver.Driver)}
	n := startBound(t, Config{Name: "n1", OfferTimeout: time.Second}, st, drv, 3, nil)
	machineOf := func(claim string) string {
		c, err := store.Get[types.MachineClaim](st, types.KindMachineClaim, claim)
		require.NoError(t, err)
		return c.Status.Machine
	}
	gone := func(name string) func() bool {
		return func() bool {
			_, err := st.Get(types.KindMachine, name)
			return isNotFound(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	t.Run("fast", func(t *testing.T) {
		name := machineOf("c0")
		phases := phasesOf(ctx, st, st.Seq(), name)
		_, err := st.Delete(types.KindMachineClaim, "c0", types.Version{})
		require.NoError(t, err)
		require.Eventually(t, func() bool { _, deleted := phases(); return deleted }, 5*time.Second, 5*time.Millisecond,
			"the watch brings the delete, after any write before it")
		written, _ := phases()
		assert.Empty(t, written, "no write before the delete")
	})

	t.Run("slow", func(t *testing.T) {
		name := machineOf("c1")
		gate := make(chan struct{})
		drv.gate.Store(&gate)
		_, err := st.Delete(types.KindMachineClaim, "c1", types.Version{})
		require.NoError(t, err)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			m, err := store.Get[types.Machine](st, types.KindMachine, name)
			if assert.NoError(c, err) {
				assert.Equal(c, types.MachineTerminating, m.Status.Phase)
				assert.Contains(c, m.Status.Reason, "claim c1 is gone")
			}
		}, 5*time.Second, 5*time.Millisecond, "shown once the release takes long")
		drv.gate.Store(nil)
		close(gate)
		require.Eventually(t, gone(name), 5*time.Second, 5*time.Millisecond)
	})

	t.Run("failed", func(t *testing.T) {
		name := machineOf("c2")
		fail := errors.New("engine unreachable")
		drv.fail.Store(&fail)
		_, err := st.Delete(types.KindMachineClaim, "c2", types.Version{})
		require.NoError(t, err)
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			m, err := store.Get[types.Machine](st, types.KindMachine, name)
			if assert.NoError(c, err) {
				assert.Equal(c, types.MachineTerminating, m.Status.Phase, "a machine that stays shows why")
			}
		}, 5*time.Second, 5*time.Millisecond)
		drv.fail.Store(nil)
		n.acc.q.Add("c2") // (the acceptor tries again after 5 s)
		require.Eventually(t, gone(name), 10*time.Second, 5*time.Millisecond)
	})
}

// A node that stopped between releasing a gone claim's machine and
// deleting its record (which shows it Running: see release) finds the
// record at its start, without the resource: it drops the record and
// counts no machine lost.
func TestRestartDropsTheReleasedMachineOfAGoneClaim(t *testing.T) {
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(claim("c", "small", time.Minute))
	bound := tn.waitPhase("c", types.ClaimBound)
	tn.stop()

	st, err := store.Open(store.Config{Dir: tn.dir + "/store", NodeID: "n1"}, testLogger())
	require.NoError(t, err)
	m, err := store.Get[types.Machine](st, types.KindMachine, bound.Status.Machine)
	require.NoError(t, err)
	require.Equal(t, types.MachineRunning, m.Status.Phase)
	_, err = st.Delete(types.KindMachineClaim, "c", types.Version{})
	require.NoError(t, err)
	require.NoError(t, st.Close())
	drv := testdriver.New(driversEnv(tn))
	require.NoError(t, drv.Prepare(context.Background(), []byte(tn.driver)))
	require.NoError(t, drv.Deallocate(context.Background(), m.Status.Resource))

	tn.start()
	_, err = tn.st.Get(types.KindMachine, m.Metadata.Name)
	assert.ErrorIs(t, err, store.ErrNotFound, "the record is dropped")
	assert.Zero(t, testutil.ToFloat64(tn.node.metrics.lost), "nothing was lost")
}
