package docker

import (
	"io"
	"net"
	"strings"
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
