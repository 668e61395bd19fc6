package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/internal/testclock"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// testNode is one node with a test driver, on a data dir that survives restarts.
type testNode struct {
	// config, when set, changes the node's config before it starts.
	config func(*Config)
	t      *testing.T
	name   string
	dir    string
	driver string // test driver config JSON
	// instance names the test driver's instance ("": test).
	instance string
	// now is the clock of the node and its store (nil: time.Now).
	now func() time.Time
	// free is the free space its store sees on its disk (nil: the disk's).
	free func(dir string) (int64, error)
	// log, when set, is the node's and its store's logger (nil: testLogger).
	log  *slog.Logger
	st   *store.Store
	drv  drivers.Driver
	node *Node
}

func testLogger() *slog.Logger {
	if os.Getenv("HF_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func newTestNode(t *testing.T, name, driverCfg string) *testNode {
	t.Helper()
	tn := &testNode{t: t, name: name, dir: t.TempDir(), driver: driverCfg}
	tn.start()
	t.Cleanup(tn.stop)
	return tn
}

// clockedNode starts node n1 with a test driver of driverCfg whose clock
// stands still at t0, today's second, until the test moves it, and stops it
// at the test's end; config, when set, changes its config. Today, not a
// fixed day: the acceptor bounds an allocation by a context deadline at the
// claim's bind timeout, which the real clock reads, so a clock set to a day
// in the past would time every allocation out.
func clockedNode(t *testing.T, driverCfg string, config func(*Config)) (tn *testNode, clk *testclock.Clock, t0 time.Time) {
	t0 = time.Now().UTC().Truncate(time.Second)
	clk = testclock.New(t0)
	tn = &testNode{t: t, name: "n1", dir: t.TempDir(), driver: driverCfg, now: clk.Now, config: config}
	tn.start()
	t.Cleanup(tn.stop)
	return tn, clk, t0
}

func (tn *testNode) start() {
	t := tn.t
	t.Helper()
	log := tn.log
	if log == nil {
		log = testLogger()
	}
	st, err := store.Open(store.Config{Dir: filepath.Join(tn.dir, "store"), NodeID: tn.name, Now: tn.now, FreeSpace: tn.free}, log)
	require.NoError(t, err)
	env := driversEnv(tn)
	env.Log = log
	drv := testdriver.New(env)
	require.NoError(t, drv.Prepare(context.Background(), []byte(tn.driver)))
	cfg := Config{Name: tn.name, OfferTimeout: time.Second, ResyncInterval: time.Second, Now: tn.now}
	if tn.config != nil {
		tn.config(&cfg)
	}
	n, err := New(cfg, log, st, []Instance{{Name: env.Instance, Type: "test", Driver: drv}}, nil)
	require.NoError(t, err)
	require.NoError(t, n.Start(context.Background()))
	tn.st, tn.drv, tn.node = st, drv, n
}

func (tn *testNode) stop() {
	if tn.node == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(tn.t, tn.node.Stop(ctx))
	require.NoError(tn.t, tn.st.Close())
	tn.node, tn.st = nil, nil
}

func (tn *testNode) put(obj types.Object) {
	tn.t.Helper()
	require.NoError(tn.t, obj.Validate())
	_, err := tn.st.Put(obj, store.PutOptions{Create: true})
	require.NoError(tn.t, err)
}

// startBound starts a node of cfg on st with drv as its one driver
// instance ("test"), stopped at the test's end (before, when not nil, gets
// the node first), and has claims "c0", "c1", ... of a template "small"
// (1 CPU, 1 GB) bound on it.
func startBound(t *testing.T, cfg Config, st *store.Store, drv drivers.Driver, claims int, before func(*Node)) *Node {
	t.Helper()
	n, err := New(cfg, testLogger(), st, []Instance{{Name: "test", Type: "test", Driver: drv}}, nil)
	require.NoError(t, err)
	if before != nil {
		before(n)
	}
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, n.Stop(ctx))
	})
	_, err = st.Put(template("small", 1, 1, `{}`), store.PutOptions{Create: true})
	require.NoError(t, err)
	for i := range claims {
		_, err := st.Put(claim(fmt.Sprintf("c%d", i), "small", time.Minute), store.PutOptions{Create: true})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return n.cache.Count(idxClaimPhase, string(types.ClaimBound)) == claims },
		10*time.Second, 5*time.Millisecond, "%d claims bound", claims)
	return n
}

func template(name string, cpu, ram float64, testCfg string) *types.MachineTemplate {
	return &types.MachineTemplate{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate},
		Metadata: types.ObjectMeta{Name: name},
		Spec: types.MachineTemplateSpec{
			Resources:             types.Resources{CPU: cpu, RAMGB: ram},
			ProviderConfiguration: map[string]json.RawMessage{"test": json.RawMessage(testCfg)},
			ClaimMetadata:         []types.MetadataKey{{Name: "REPO"}},
		},
	}
}

func claim(name, tmpl string, timeout time.Duration) *types.MachineClaim {
	c := &types.MachineClaim{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
		Metadata: types.ObjectMeta{Name: name},
		Spec:     types.MachineClaimSpec{MachineTemplate: tmpl, BindTimeout: types.D(timeout), Metadata: map[string]string{"REPO": "hf"}},
	}
	return c
}

func (tn *testNode) claim(name string) *types.MachineClaim {
	tn.t.Helper()
	c, err := store.Get[types.MachineClaim](tn.st, types.KindMachineClaim, name)
	require.NoError(tn.t, err)
	return c
}

func (tn *testNode) waitPhase(name string, phase types.ClaimPhase) *types.MachineClaim {
	tn.t.Helper()
	var last *types.MachineClaim
	require.EventuallyWithT(tn.t, func(c *assert.CollectT) {
		got, err := store.Get[types.MachineClaim](tn.st, types.KindMachineClaim, name)
		if !assert.NoError(c, err) {
			return
		}
		last = got
		assert.Equal(c, phase, got.Status.Phase, "claim %s: reason %q", name, got.Status.Reason)
	}, 10*time.Second, 5*time.Millisecond)
	return last
}

func (tn *testNode) machines() []*types.Machine {
	tn.t.Helper()
	ms, err := store.List[types.Machine](tn.st, types.KindMachine)
	require.NoError(tn.t, err)
	return ms
}

func driversEnv(tn *testNode) drivers.Env {
	inst := tn.instance
	if inst == "" {
		inst = "test"
	}
	return drivers.Env{Instance: inst, DataDir: filepath.Join(tn.dir, inst), NodeName: tn.name, Log: testLogger()}
}

// appendAll appends a copy of every entry to out.
func (a *acceptor) appendAll(out []entry) []entry {
	return a.appendEntries(out, a.appendNames(nil))
}
