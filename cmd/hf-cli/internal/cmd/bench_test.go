package cmd

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// benchFleet gives the fake server templates "small" and "bad" and a node
// with room for 24 of them, for the bench's first check.
func benchFleet(c *cli) {
	for _, n := range []string{"small", "bad"} {
		c.srv.Put(&types.MachineTemplate{TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate}, Metadata: types.ObjectMeta{Name: n},
			Spec: types.MachineTemplateSpec{Resources: types.Resources{CPU: 1, RAMGB: 1}, ProviderConfiguration: map[string]json.RawMessage{"test": json.RawMessage(`{}`)}}})
	}
	room := types.Resources{CPU: 24, RAMGB: 48}
	c.srv.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "n1"},
		Spec:   types.NodeSpec{Drivers: []types.NodeDriver{{Name: "test", Driver: "test", Capacity: types.Capacity{Total: room, Usable: room, Free: room}}}},
		Status: types.NodeStatus{Phase: types.NodeUp}})
}

// playCluster binds every created claim of template "small" after a delay
// that grows with its number (1 ms, 2 ms, ...) and fails those of "bad".
func playCluster(c *cli) {
	benchFleet(c)
	var created atomic.Int64
	c.srv.OnCreate(func(o types.Object) {
		cl, ok := o.(*types.MachineClaim)
		if !ok {
			return
		}
		n := created.Add(1)
		t0 := cl.Metadata.CreatedAt
		cl.Status = types.MachineClaimStatus{Phase: types.ClaimBound, Node: "n1", Machine: "m-" + cl.Metadata.Name,
			PhaseTimes: types.MakePhaseTimes(types.PhaseTime{Phase: "Requested", At: t0}, types.PhaseTime{Phase: "Bound", At: t0.Add(time.Duration(n) * time.Millisecond)})}
		if cl.Spec.MachineTemplate == "bad" {
			cl.Status = types.MachineClaimStatus{Phase: types.ClaimFailed, Reason: "no capacity"}
		}
		c.srv.Put(cl)
	})
}

func TestBenchClaims(t *testing.T) {
	c := newCLI(t)
	playCluster(c)
	r := c.run("bench", "claims", "--template", "small", "--count", "20", "--concurrency", "4", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	var got benchResult
	require.NoError(t, json.Unmarshal([]byte(r.out), &got), r.out)
	assert.Equal(t, 20, got.Claims)
	assert.Equal(t, 20, got.Bound)
	assert.Equal(t, 0, got.Failed)
	assert.Equal(t, "small", got.Template)
	assert.Equal(t, 10.0, got.Latency.P50, "nearest rank of 1..20 ms")
	assert.Equal(t, 18.0, got.Latency.P90)
	assert.Equal(t, 20.0, got.Latency.P99)
	assert.Equal(t, 20.0, got.Latency.Max)
	assert.Positive(t, got.PerSecond)
	assert.Contains(t, r.err, "deleted 20 claims")
	assert.Empty(t, c.srv.Objects(types.KindMachineClaim), "the run's claims are deleted")
	q := watchQueries(t, c)
	require.Len(t, q, 1)
	assert.Equal(t, "hf-bench="+got.Run, q[0].Get("labelSelector"), "the server sends this run's claims only")
	assert.Equal(t, "status.phase!=Requested", q[0].Get("fieldSelector"), "once they settled")

	// Failures are counted with their reason; --keep keeps the claims.
	r = c.run("bench", "claims", "--template", "bad", "--count", "3", "--keep")
	require.Equal(t, 0, r.code, r.err)
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	require.Len(t, lines, 2, r.out)
	assert.Equal(t, "CLAIMS\tBOUND\tFAILED\tSECONDS\tCLAIMS/S\tP50-MS\tP90-MS\tP99-MS\tMAX-MS", lines[0])
	assert.True(t, strings.HasPrefix(lines[1], "3\t0\t3\t"), lines[1])
	assert.Contains(t, r.err, "failed (3): no capacity")
	assert.Contains(t, r.err, "kept the claims labelled hf-bench=")
	assert.Len(t, c.srv.Objects(types.KindMachineClaim), 3)

	assert.Equal(t, ExitUsage, c.run("bench", "claims").code, "--template is required")
	assert.Equal(t, ExitUsage, c.run("bench", "claims", "--template", "small", "--count", "0").code)
}

// --endpoints spreads the creates over the nodes in turn, as a cluster's
// clients would (here two names of one fake server).
func TestBenchClaimsEndpoints(t *testing.T) {
	c := newCLI(t)
	playCluster(c)
	other := strings.Replace(c.srv.URL, "127.0.0.1", "localhost", 1)
	r := c.run("bench", "claims", "--template", "small", "--count", "10", "--concurrency", "2",
		"--endpoints", c.srv.URL+","+other, "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	var got benchResult
	require.NoError(t, json.Unmarshal([]byte(r.out), &got), r.out)
	assert.Equal(t, 10, got.Bound)
	hosts, warm := map[string]int{}, map[string]int{}
	for _, req := range c.srv.Requests() {
		host := strings.Split(req.Host, ":")[0]
		switch {
		case req.Method == "POST" && strings.HasSuffix(req.Path, "/machineclaims"):
			hosts[host]++
		case req.Path == "/healthz" && len(hosts) == 0:
			warm[host]++
		}
	}
	assert.Equal(t, map[string]int{"127.0.0.1": 5, "localhost": 5}, hosts)
	assert.Equal(t, map[string]int{"127.0.0.1": 1, "localhost": 1}, warm,
		"before the clock starts, as many connections as claims in flight there are opened to each endpoint")
	assert.Contains(t, r.err, "through 2 endpoint(s)")
}

// The warm-up opens a connection for each claim an endpoint will have in
// flight, and never more than the client keeps.
func TestWarmPerEndpoint(t *testing.T) {
	assert.Equal(t, 64, warmPerEndpoint(64, 10000, 1))
	assert.Equal(t, 22, warmPerEndpoint(64, 10000, 3), "64 spread over 3 endpoints")
	assert.Equal(t, 5, warmPerEndpoint(64, 5, 1), "no more than the run's claims")
	assert.Equal(t, keptPerHost, warmPerEndpoint(99999, 99999, 1), "no more than the client keeps idle")
	assert.Equal(t, 1, warmPerEndpoint(1, 1, 3))
}

// A claim that never settles ends the wait with the timeout exit code, and
// the claims are still deleted.
func TestBenchClaimsTimeout(t *testing.T) {
	c := newCLI(t)
	benchFleet(c)
	r := c.run("bench", "claims", "--template", "small", "--count", "2", "--wait-timeout", "300ms")
	assert.Equal(t, ExitTimeout, r.code, r.err)
	assert.Contains(t, r.err, "0 of 2 claims settled")
	assert.Contains(t, r.err, "deleted 2 claims")
	assert.Empty(t, c.srv.Objects(types.KindMachineClaim))
}

// A bench the cluster cannot hold (not one machine, or fewer than --count)
// fails at once with the reason, instead of waiting for its timeout.
func TestBenchFailsFastWhenNothingFits(t *testing.T) {
	c := newCLI(t)
	benchFleet(c)
	c.srv.Put(&types.MachineTemplate{TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate}, Metadata: types.ObjectMeta{Name: "huge"},
		Spec: types.MachineTemplateSpec{Resources: types.Resources{CPU: 64, RAMGB: 1}, ProviderConfiguration: map[string]json.RawMessage{"test": json.RawMessage(`{}`)}}})
	start := time.Now()
	r := c.run("bench", "claims", "--template", "huge", "--count", "20")
	assert.Equal(t, ExitTimeout, r.code, r.err)
	assert.Contains(t, r.err, "no node has room for one machine of template huge (64 CPU, 1 GiB RAM) now: n1/test has 24 CPU, 48 GiB free")
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Empty(t, c.srv.Objects(types.KindMachineClaim), "no claim was made")

	// The run holds every claim until it ends: more than the cluster has
	// room for would wait for their bind timeout (found on a quick-start
	// node, whose test driver has room for a few: 4 of 200 settled in 5 min).
	r = c.run("bench", "claims", "--template", "small", "--count", "25")
	assert.Equal(t, ExitTimeout, r.code, r.err)
	assert.Contains(t, r.err, "the cluster has room for 24 machines of template small (1 CPU, 1 GiB RAM) now, and the run holds all 25 of its claims until it ends: lower --count or add capacity (n1/test has 24 CPU, 48 GiB free)")
	assert.Empty(t, c.srv.Objects(types.KindMachineClaim), "no claim was made")
	r = c.run("bench", "claims", "--template", "smal")
	assert.Equal(t, ExitNotFound, r.code)
	assert.Contains(t, r.err, "did you mean small")
}

// A run right after another finds the nodes' reports still counting the
// machines the last run's deletes give back: it waits (up to
// benchRoomWait) for the reports to show them free, and runs. Capacity in
// use that stays is the shortfall of before, after the wait.
func TestBenchWaitsForCapacityGivenBack(t *testing.T) {
	defer func(d time.Duration) { benchRoomWait = d }(benchRoomWait)
	benchRoomWait = 20 * time.Second
	c := newCLI(t)
	playCluster(c)
	full := func(used float64) {
		total := types.Resources{CPU: 24, RAMGB: 48}
		usedRes := types.Resources{CPU: used, RAMGB: used}
		c.srv.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "n1"},
			Spec: types.NodeSpec{Drivers: []types.NodeDriver{{Name: "test", Driver: "test",
				Capacity: types.Capacity{Total: total, Usable: total, Used: usedRes, Free: types.Resources{CPU: 24 - used, RAMGB: 48 - used}}}}},
			Status: types.NodeStatus{Phase: types.NodeUp}})
	}
	full(24)
	go func() {
		// The next report, once the run has read the nodes twice (it
		// waits between reads: the first found too little room).
		for len(queriesOf(c, "/api/v1/nodes")) < 2 {
			time.Sleep(10 * time.Millisecond)
		}
		full(0)
	}()
	r := c.run("bench", "claims", "--template", "small", "--count", "20")
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.err, "room for 0 of 20 machines now, some capacity in use: waiting up to 20s for the nodes to report it given back")
	assert.True(t, strings.HasPrefix(strings.Split(strings.TrimSpace(r.out), "\n")[1], "20\t20\t0\t"), r.out)

	full(10)
	benchRoomWait = time.Second
	start := time.Now()
	r = c.run("bench", "claims", "--template", "small", "--count", "20")
	assert.Equal(t, ExitTimeout, r.code, r.err)
	assert.Contains(t, r.err, "the cluster has room for 14 machines of template small")
	assert.GreaterOrEqual(t, time.Since(start), benchRoomWait)
}
