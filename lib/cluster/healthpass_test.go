package cluster

import (
	"context"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/internal/intern"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// countingDriver is the test driver, counting its Status calls: one a
// machine each health pass.
type countingDriver struct {
	*testdriver.Driver
	statuses atomic.Int64
}

func (d *countingDriver) Status(ctx context.Context, r *types.Resource) (types.MachinePhase, error) {
	d.statuses.Add(1)
	return d.Driver.Status(ctx, r)
}

// The health pass reads no machine record of a machine outside a set: the
// cache keeps machines packed, and the pass used to decode each one every
// StatusInterval to look at its set (2.5 % of a core for 10,000 idle
// machines). Cool drops the decoded copies, and they are decoded again
// when read.
func TestHealthPassDecodesNothing(t *testing.T) {
	dir := t.TempDir()
	log := testLogger()
	st, err := store.Open(store.Config{Dir: filepath.Join(dir, "store"), NodeID: "n1"}, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() }) // after the node stops (cleanups run last first)
	td := testdriver.New(drivers.Env{Instance: "test", DataDir: filepath.Join(dir, "test"), NodeName: "n1", Log: log})
	require.NoError(t, td.Prepare(context.Background(), []byte(`{"cpus": 64, "ram_gb": 64}`)))
	drv := &countingDriver{Driver: td.(*testdriver.Driver)}
	const claims = 20
	n := startBound(t, Config{Name: "n1", OfferTimeout: time.Second, StatusInterval: 10 * time.Millisecond}, st, drv, claims, nil)
	// The machines decoded no longer (as on an idle node after a trim, or
	// past the last 1,024 written), passes over every machine, counted by
	// the driver, decode none of them. (A reconciler still finishing the
	// bindings may read a claim in a window: a few windows are allowed, and
	// the old pass decoded every machine in every one.)
	var got []uint64
	for range 5 {
		n.Cool()
		from, decodes := drv.statuses.Load(), n.cache.Decodes()
		require.Eventually(t, func() bool { return drv.statuses.Load()-from >= 5*claims }, 10*time.Second, 5*time.Millisecond)
		if got = append(got, n.cache.Decodes()-decodes); got[len(got)-1] == 0 {
			return
		}
	}
	t.Fatalf("decodes in windows of 5 health passes over %d machines: %v, want a window with none", claims, got)
}

// coolingPeers are local peers that keep what Cool handed them.
type coolingPeers struct {
	localPeers
	tabs []*intern.Table
}

func (p *coolingPeers) Cool(tab *intern.Table) { p.tabs = append(p.tabs, tab) }

// coolingDriver is the test driver, counting its Cool calls.
type coolingDriver struct {
	*testdriver.Driver
	cools int
	tab   *intern.Table
}

func (d *coolingDriver) Cool(tab *intern.Table) { d.cools, d.tab = d.cools+1, tab; d.Driver.Cool(tab) }

// The node's Cool reaches its peers (with the table its own copies took
// their names from: one copy of each name for both) and its drivers, and
// the node goes on as before.
func TestCoolReachesPeersAndDrivers(t *testing.T) {
	st, td := memStoreAndDriver(t)
	drv := &coolingDriver{Driver: td}
	var peers *coolingPeers
	const claims = 5
	n := startBound(t, Config{Name: "n1", OfferTimeout: time.Second}, st, drv, claims, func(n *Node) {
		peers = &coolingPeers{localPeers: *n.peers.(*localPeers)} // alone, as before, and cooling
		n.peers = peers
	})
	bound := func() int { return n.cache.Count(idxClaimPhase, string(types.ClaimBound)) }

	n.Cool()
	require.Len(t, peers.tabs, 1, "the peers cooled once")
	assert.GreaterOrEqual(t, peers.tabs[0].Len(), 2*claims, "with the table that holds the node's names (claims and machines)")
	assert.Equal(t, 1, drv.cools, "the driver cooled once")
	assert.Same(t, peers.tabs[0], drv.tab, "with the same table: names and data the ledger keeps too are kept once")
	assert.Equal(t, claims, bound())
	assert.Len(t, n.acc.appendNames(nil), claims, "the ledger holds every machine")

	_, err := st.Put(claim("c-after", "small", time.Minute), store.PutOptions{Create: true})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return bound() == claims+1 }, 10*time.Second, 5*time.Millisecond, "a claim after the cool is bound")
}

// infoDriver is the test driver, keeping the Info of the resources its
// Status and Deallocate were given.
type infoDriver struct {
	*testdriver.Driver
	mu       sync.Mutex
	statuses []map[string]string
	released []map[string]string
}

func (d *infoDriver) Status(ctx context.Context, r *types.Resource) (types.MachinePhase, error) {
	d.mu.Lock()
	d.statuses = append(d.statuses, r.Info)
	d.mu.Unlock()
	return d.Driver.Status(ctx, r)
}

func (d *infoDriver) Deallocate(ctx context.Context, r *types.Resource) error {
	d.mu.Lock()
	d.released = append(d.released, r.Info)
	d.mu.Unlock()
	return d.Driver.Deallocate(ctx, r)
}

// Cool keeps the ledger's resources' Info apart (a small map each was a
// tenth of an idle node's heap): the health pass hands the driver the
// resource without it, as drivers.Driver allows, while a release hands it
// whole, and the machine's record keeps it; a second Cool keeps it too.
func TestCoolKeepsResourceInfoApart(t *testing.T) {
	st, td := memStoreAndDriver(t)
	drv := &infoDriver{Driver: td}
	n := startBound(t, Config{Name: "n1", OfferTimeout: time.Second, StatusInterval: 10 * time.Millisecond}, st, drv, 2, nil)
	statuses := func() []map[string]string {
		drv.mu.Lock()
		defer drv.mu.Unlock()
		return slices.Clone(drv.statuses)
	}
	require.Eventually(t, func() bool { return len(statuses()) > 0 }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, "n1", statuses()[0]["host"], "before the cool the pass hands the resource as allocated")

	n.Cool()
	n.Cool()
	from := len(statuses())
	require.Eventually(t, func() bool { return len(statuses()) >= from+4 }, 10*time.Second, 5*time.Millisecond)
	for _, info := range statuses()[from+2:] { // past a pass that may have begun before the cool
		assert.Nil(t, info, "the pass hands the resource without its Info")
	}
	e, ok := n.acc.get(machineOf(t, n, "c0"))
	require.True(t, ok)
	assert.Nil(t, e.Resource.Info)
	whole := e.whole()
	assert.Equal(t, map[string]string{"host": "n1", "id": whole.ID}, whole.Info, "whole puts it back")

	_, err := st.Delete(types.KindMachineClaim, "c0", types.Version{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		drv.mu.Lock()
		defer drv.mu.Unlock()
		return len(drv.released) == 1
	}, 10*time.Second, 5*time.Millisecond, "c0's machine is released")
	assert.Equal(t, whole.Info, drv.released[0], "a release hands the driver the whole resource")
	m, err := store.Get[types.Machine](st, types.KindMachine, machineOf(t, n, "c1"))
	require.NoError(t, err)
	assert.Equal(t, "n1", m.Status.Resource.Info["host"], "the machine's record keeps its Info")
}

// machineOf is the machine that claim is bound to.
func machineOf(t *testing.T, n *Node, claim string) string {
	t.Helper()
	c, err := store.Get[types.MachineClaim](n.st, types.KindMachineClaim, claim)
	require.NoError(t, err)
	require.NotEmpty(t, c.Status.Machine)
	return c.Status.Machine
}

// memStoreAndDriver is an in-memory store of node n1, closed after the
// node stops, and a prepared test driver of 64 CPUs and 64 GB.
func memStoreAndDriver(t *testing.T) (*store.Store, *testdriver.Driver) {
	t.Helper()
	log := testLogger()
	st, err := store.Open(store.Config{InMemory: true, NodeID: "n1"}, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() }) // after the node stops (cleanups run last first)
	td := testdriver.New(drivers.Env{Instance: "test", NodeName: "n1", Log: log})
	require.NoError(t, td.Prepare(context.Background(), []byte(`{"cpus": 64, "ram_gb": 64}`)))
	return st, td.(*testdriver.Driver)
}

// A health pass keeps nothing of the ledger between passes, only the room
// of its slices: the last batch's entries held the resources and names a
// cool had just copied, so the trim after it could not free the burst-time
// pages they were the last objects of.
func TestHealthPassKeepsNoEntries(t *testing.T) {
	st, _ := memStoreAndDriver(t)
	td := testdriver.New(drivers.Env{Instance: "test", NodeName: "n1", Log: testLogger()})
	require.NoError(t, td.Prepare(context.Background(), []byte(`{"cpus": 512, "ram_gb": 512}`)))
	const machines = healthBatch + 10 // a full batch, and a short one after it
	n := startBound(t, Config{Name: "n1", OfferTimeout: time.Second}, st, td, machines, nil)
	var s healthScratch
	n.acc.healthPass(&s, map[string]meterReading{})
	require.Len(t, s.names, machines, "the pass read every machine's name")
	require.GreaterOrEqual(t, cap(s.batch), healthBatch, "and a full batch of entries")
	for i, e := range s.batch[:cap(s.batch)] {
		assert.True(t, e.Machine == "" && e.Claim == "" && e.Resource == nil && e.info == nil, "entry %d kept: %s", i, e.Machine)
	}
	for i, name := range s.names {
		assert.Empty(t, name, "name %d kept", i)
	}
	assert.Empty(t, s.seen)
}
