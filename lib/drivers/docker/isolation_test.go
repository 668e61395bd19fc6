package docker

import (
	"sync"
	"testing"

	"github.com/docker/docker/api/types/network"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/docker/dockertest"
	"github.com/hf-fleet/hf/lib/types"
)

// TestOwnersDoNotSeeEachOther: drivers that differ in label namespace, node
// name or instance name share one engine and one network, and each lists,
// reports and removes only its own containers.
func TestOwnersDoNotSeeEachOther(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	other := newFixtureNamespace(t, f)
	owners := []struct {
		name string
		d    *Driver
	}{
		{"ns1/node-a/docker", f.driver(t, "node-a", "docker", nil)},
		{"ns1/node-b/docker", f.driver(t, "node-b", "docker", nil)},
		{"ns1/node-a/docker-big", f.driver(t, "node-a", "docker/big", nil)},
		{"ns2/node-a/docker", other.driver(t, "node-a", "docker", nil)},
	}
	tmpl := f.template("iso", types.Resources{CPU: 0.1, RAMGB: 0.1}, nil)
	held := make([]*types.Resource, len(owners))
	errs := make([]error, len(owners))
	var wg sync.WaitGroup
	for i, o := range owners {
		wg.Go(func() { held[i], errs[i] = o.d.Allocate(t.Context(), tmpl, map[string]string{"HF_MACHINE": o.name}) })
	}
	wg.Wait()
	for i, o := range owners {
		deallocateLater(t, o.d, held[i])
		require.NoError(t, errs[i], o.name)
	}
	for i, o := range owners {
		list, err := o.d.List(t.Context())
		require.NoError(t, err)
		require.Len(t, list, 1, "%s lists only its own container", o.name)
		assert.Equal(t, held[i].ID, list[0].ID, o.name)
		for j, r := range held {
			if i == j {
				continue
			}
			_, err := o.d.Status(t.Context(), r)
			assert.ErrorIs(t, err, drivers.ErrNotFound, "%s does not report %s's container", o.name, owners[j].name)
			assert.ErrorIs(t, o.d.Deallocate(t.Context(), r), ErrForeign, "%s refuses %s's container", o.name, owners[j].name)
		}
	}
	for i, o := range owners {
		phase, err := o.d.Status(t.Context(), held[i])
		require.NoError(t, err)
		assert.Equal(t, types.MachineRunning, phase, "%s's container survived the others' attempts", o.name)
	}
}

// newFixtureNamespace is a second fixture on the same engine, network and
// image as f, with a label namespace of its own.
func newFixtureNamespace(t *testing.T, f *fixture) *fixture {
	t.Helper()
	return &fixture{cli: f.cli, ns: dockertest.Namespace(t, f.cli), network: f.network, image: f.image}
}

// TestNetworkCreatedAndReused: Prepare creates the network with the driver's
// label, a second driver reuses it, and an allocation recreates it when it was
// removed behind the driver's back.
func TestNetworkCreatedAndReused(t *testing.T) {
	t.Parallel()
	f := newNetworkFixture(t)
	_, err := f.cli.NetworkInspect(t.Context(), f.network, network.InspectOptions{})
	require.Error(t, err, "the network does not exist before Prepare")

	first := f.driver(t, "node-a", "docker", nil)
	net1, err := f.cli.NetworkInspect(t.Context(), f.network, network.InspectOptions{})
	require.NoError(t, err)
	assert.Equal(t, "bridge", net1.Driver)
	assert.Equal(t, f.network, net1.Labels[f.ns+".network"])
	assert.Equal(t, "node-a", net1.Labels[f.ns+".node"])

	second := f.driver(t, "node-b", "docker", nil)
	net2, err := f.cli.NetworkInspect(t.Context(), f.network, network.InspectOptions{})
	require.NoError(t, err)
	assert.Equal(t, net1.ID, net2.ID, "the second driver reuses the network")
	_ = second

	require.NoError(t, f.cli.NetworkRemove(t.Context(), f.network))
	r, err := first.Allocate(t.Context(), f.template("net", types.Resources{CPU: 0.1, RAMGB: 0.1}, nil), nil)
	require.NoError(t, err)
	deallocateLater(t, first, r)
	net3, err := f.cli.NetworkInspect(t.Context(), f.network, network.InspectOptions{})
	require.NoError(t, err)
	assert.NotEqual(t, net1.ID, net3.ID)
	assert.Contains(t, net3.Containers, r.ID)
	assert.Equal(t, net3.Containers[r.ID].IPv4Address[:len(r.Info["ip"])], r.Info["ip"])
}

// TestConcurrentNetworkCreation: nodes starting at once on an engine without
// the network end up on one network, not several of the same name.
func TestConcurrentNetworkCreation(t *testing.T) {
	t.Parallel()
	f := newNetworkFixture(t)
	done := make(chan error, 3)
	cfg := f.config(t, nil)
	for _, node := range []string{"n1", "n2", "n3"} {
		go func() {
			d := newDriver(drivers.Env{Instance: "docker", NodeName: node})
			err := d.Prepare(t.Context(), cfg)
			if err == nil {
				err = d.Close()
			}
			done <- err
		}()
	}
	for range 3 {
		require.NoError(t, <-done)
	}
	nets, err := f.cli.NetworkList(t.Context(), network.ListOptions{})
	require.NoError(t, err)
	count := 0
	for _, n := range nets {
		if n.Name == f.network {
			count++
		}
	}
	assert.Equal(t, 1, count)
}
