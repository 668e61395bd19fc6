package docker

import (
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers/docker/dockertest"
	"github.com/hf-fleet/hf/lib/types"
)

// listener is a container command that answers "hi" to every connection on
// port 9000, as the container's (unprivileged) user.
var listener = []string{"/bin/sh", "-c", "trap 'exit 0' TERM; while true; do echo hi | nc -l -p 9000; done"}

// TestContainersAreConfined runs machines on the real engine as a user's
// shell would meet them: not root, without capabilities or a way to gain
// them, with a bounded number of processes, and unable to reach another
// machine on the network the driver made (while the host still reaches
// them); with network_icc the machines reach each other.
func TestContainersAreConfined(t *testing.T) {
	t.Parallel()
	f := newNetworkFixture(t)
	d := f.driver(t, "node-a", "docker", map[string]any{"pids_limit": 12})
	serve := f.template("serve", types.Resources{CPU: 0.1, RAMGB: 0.1}, map[string]any{"command": listener})
	a, err := d.Allocate(t.Context(), serve, map[string]string{"HF_MACHINE": "a"})
	require.NoError(t, err)
	deallocateLater(t, d, a)
	b, err := d.Allocate(t.Context(), f.template("as-1000", types.Resources{CPU: 0.1, RAMGB: 0.1}, map[string]any{"user": "1000:1000"}),
		map[string]string{"HF_MACHINE": "b"})
	require.NoError(t, err)
	deallocateLater(t, d, b)

	assert.Equal(t, "65534 65534", strings.TrimSpace(f.exec(t, a.ID, "sh", "-c", "echo $(id -u) $(id -g)")))
	assert.Equal(t, "1000 1000", strings.TrimSpace(f.exec(t, b.ID, "sh", "-c", "echo $(id -u) $(id -g)")), "the template's user")
	status := f.exec(t, a.ID, "cat", "/proc/self/status")
	for _, want := range []string{"CapEff:\t0000000000000000", "CapBnd:\t0000000000000000", "NoNewPrivs:\t1"} {
		assert.Contains(t, status, want)
	}

	// The host reaches a's port: the listener works.
	ipA := f.ip(t, a.ID)
	assert.Equal(t, "hi", dialHi(t, ipA))
	// b does not reach a on the driver's network.
	out := f.exec(t, b.ID, "sh", "-c", "echo x | nc -w 2 "+ipA+" 9000; true")
	assert.NotContains(t, out, "hi", "a machine reached another on the driver's network")

	// A fork bomb stops at the limit, inside the machine (last: a's
	// processes stay at the limit until it is released).
	out = f.exec(t, a.ID, "sh", "-c", "sh -c 'n=0; while [ $n -lt 40 ]; do sleep 60 & n=$((n+1)); done; echo forked all' 2>&1; true")
	assert.Contains(t, out, "can't fork")
	assert.NotContains(t, out, "forked all")

	// With network_icc the driver's network lets machines talk.
	g := newNetworkFixture(t)
	open := g.driver(t, "node-a", "docker", map[string]any{"network_icc": true})
	c, err := open.Allocate(t.Context(), g.template("serve", types.Resources{CPU: 0.1, RAMGB: 0.1}, map[string]any{"command": listener}),
		map[string]string{"HF_MACHINE": "c"})
	require.NoError(t, err)
	deallocateLater(t, open, c)
	e, err := open.Allocate(t.Context(), g.template("plain", types.Resources{CPU: 0.1, RAMGB: 0.1}, nil), map[string]string{"HF_MACHINE": "e"})
	require.NoError(t, err)
	deallocateLater(t, open, e)
	assert.Equal(t, "hi", dialHi(t, g.ip(t, c.ID)))
	out = g.exec(t, e.ID, "sh", "-c", "echo x | nc -w 2 "+g.ip(t, c.ID)+" 9000; true")
	assert.Contains(t, out, "hi")

	// What the driver's start checks (it warns of a network that is not
	// isolated).
	for _, tc := range []struct {
		network string
		want    bool
	}{{f.network, true}, {g.network, false}} {
		list, err := networksNamed(t.Context(), f.cli, tc.network)
		require.NoError(t, err)
		require.Len(t, list, 1)
		assert.Equal(t, tc.want, isolated(list[0]), tc.network)
	}
}

// exec runs cmd in container id as its user and returns what it printed.
func (f *fixture) exec(t *testing.T, id string, cmd ...string) string {
	t.Helper()
	return dockertest.Exec(t, f.cli, id, cmd...)
}

// ip is the container's address on the fixture's network.
func (f *fixture) ip(t *testing.T, id string) string {
	t.Helper()
	n, ok := f.inspect(t, id).NetworkSettings.Networks[f.network]
	require.True(t, ok, "container %s is not on network %s", id, f.network)
	require.NotEmpty(t, n.IPAddress)
	return n.IPAddress
}

// dialHi connects to port 9000 of ip, a container on a network the test
// made, and returns what it says.
func dialHi(t *testing.T, ip string) string {
	t.Helper()
	var last error
	for range 50 {
		conn, err := net.DialTimeout("tcp", net.JoinHostPort(ip, "9000"), 2*time.Second)
		if err == nil {
			_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
			b, _ := io.ReadAll(conn)
			_ = conn.Close()
			if s := strings.TrimSpace(string(b)); s != "" {
				return s
			}
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no answer from %s:9000: %v", ip, last)
	return ""
}

// TestNetworkPerUser: with network_per_user a user's machines share a
// network of their own and reach each other, while another user's machine
// and a machine of no user (a pool's) reach none of them; the network goes
// with the user's last machine, and one left behind goes at the next start.
func TestNetworkPerUser(t *testing.T) {
	t.Parallel()
	f := newNetworkFixture(t)
	extra := map[string]any{"network_per_user": true}
	d := f.driver(t, "node-a", "docker", extra)
	res := types.Resources{CPU: 0.1, RAMGB: 0.1}
	serve, plain := f.template("serve", res, map[string]any{"command": listener}), f.template("plain", res, nil)
	alloc := func(tmpl types.MachineTemplate, machine, user string) *types.Resource {
		meta := map[string]string{types.MetaMachine: machine}
		if user != "" {
			meta[types.MetaUser] = user
		}
		r, err := d.Allocate(t.Context(), tmpl, meta)
		require.NoError(t, err)
		deallocateLater(t, d, r)
		return r
	}
	a1, a2 := alloc(serve, "a1", "alice"), alloc(plain, "a2", "alice")
	b, pool := alloc(plain, "b", "bob"), alloc(plain, "p", "")

	alice, bob := userNetwork(f.network, "alice"), userNetwork(f.network, "bob")
	on := func(id string) []string {
		var names []string
		for name := range f.inspect(t, id).NetworkSettings.Networks {
			names = append(names, name)
		}
		return names
	}
	assert.Equal(t, []string{alice}, on(a1.ID))
	assert.Equal(t, []string{alice}, on(a2.ID))
	assert.Equal(t, []string{bob}, on(b.ID))
	assert.Equal(t, []string{f.network}, on(pool.ID), "a machine of no user stays on the driver's network")
	ipA1 := f.inspect(t, a1.ID).NetworkSettings.Networks[alice].IPAddress
	assert.Contains(t, fmt.Sprint(a1.Info), ipA1, "the machine's address is the one on its user's network")

	assert.Equal(t, "hi", dialHi(t, ipA1), "the host reaches a user's machine")
	out := f.exec(t, a2.ID, "sh", "-c", "echo x | nc -w 2 "+ipA1+" 9000; true")
	assert.Contains(t, out, "hi", "a user's machines reach each other")
	for _, other := range []*types.Resource{b, pool} {
		out := f.exec(t, other.ID, "sh", "-c", "echo x | nc -w 2 "+ipA1+" 9000; true")
		assert.NotContains(t, out, "hi", "another's machine reached alice's")
	}

	// The network goes with the user's last machine.
	require.NoError(t, d.Deallocate(t.Context(), a1))
	assert.Len(t, f.networks(t, alice), 1, "alice still has a machine")
	require.NoError(t, d.Deallocate(t.Context(), a2))
	assert.Empty(t, f.networks(t, alice))
	assert.Len(t, f.networks(t, f.network), 1, "the driver's network stays")

	// A machine of a user that fails to start takes the network made for it
	// along.
	_, err := d.Allocate(t.Context(), f.template("exits", res, map[string]any{"command": []string{"false"}}),
		map[string]string{types.MetaMachine: "d1", types.MetaUser: "dave"})
	require.ErrorIs(t, err, ErrExited)
	assert.Empty(t, f.networks(t, userNetwork(f.network, "dave")))

	// A network left behind (its node stopped between the removal of the
	// container and of the network) goes at the next start.
	c, err := f.cli.ContainerInspect(t.Context(), b.ID)
	require.NoError(t, err)
	require.NoError(t, removeContainer(t.Context(), snapshot{cli: f.cli}, c.ID, 0))
	assert.Len(t, f.networks(t, bob), 1)
	f.driver(t, "node-b", "docker", extra)
	assert.Empty(t, f.networks(t, bob))
	require.NoError(t, d.Deallocate(t.Context(), b), "a machine already gone is released")
	require.NoError(t, d.Deallocate(t.Context(), pool))

	// A user's machines made and released at once: one network, used by
	// all, gone with the last.
	carol := make([]*types.Resource, 3)
	var wg sync.WaitGroup
	for i := range carol {
		wg.Go(func() {
			var err error
			carol[i], err = d.Allocate(t.Context(), plain, map[string]string{types.MetaMachine: fmt.Sprintf("c%d", i), types.MetaUser: "carol"})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	for _, r := range carol {
		require.NotNil(t, r)
		deallocateLater(t, d, r)
	}
	nets := f.networks(t, userNetwork(f.network, "carol"))
	require.Len(t, nets, 1)
	for _, r := range carol {
		assert.Equal(t, []string{userNetwork(f.network, "carol")}, on(r.ID))
	}
	for _, r := range carol {
		wg.Go(func() { assert.NoError(t, d.Deallocate(t.Context(), r)) })
	}
	wg.Wait()
	assert.Empty(t, f.networks(t, userNetwork(f.network, "carol")))
	f.assertNothingLeft(t)
}

// networks lists the engine's networks called name.
func (f *fixture) networks(t *testing.T, name string) []string {
	t.Helper()
	list, err := networksNamed(t.Context(), f.cli, name)
	require.NoError(t, err)
	var ids []string
	for _, n := range list {
		ids = append(ids, n.ID)
	}
	return ids
}
