package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/internal/syncbuf"
	"github.com/hf-fleet/hf/lib/types"
)

// testDriversConfig is a node config with two test driver instances, "fast"
// and "slow", of cpus each; slowDelay is the slow one's allocation delay.
func testDriversConfig(cpus int, slowDelay string) string {
	return fmt.Sprintf(`scheduler:
  lost_grace: 2s
drivers:
  - name: test
    instance: fast
    config: {cpus: %d, ram_gb: 16}
  - name: test
    instance: slow
    config: {cpus: %d, ram_gb: 16, delay: %q}
`, cpus, cpus, slowDelay)
}

// TestNodeKilledClaimsMove is issue 4 acceptance 3 with real processes: node
// A, the only one with room, holds a bound claim (template q) and has
// accepted another whose allocation takes 30 s (template s). A is killed with
// SIGKILL while a node with room (D) is up: within 10 s the accepted claim is
// bound on D, and, once A is gone for lost_grace, A's machine is marked Lost
// and its claim bound again on D.
func TestNodeKilledClaimsMove(t *testing.T) {
	a := startWithConfig(t, "", testDriversConfig(4, "30s"))
	b := startWithConfig(t, "", testDriversConfig(1, "0s"), "--join", a.Gossip)
	waitUp(t, a, b)
	for name, inst := range map[string]string{"q": "fast", "s": "slow"} {
		b.createTemplate(types.MachineTemplate{
			Metadata: types.ObjectMeta{Name: name},
			Spec: types.MachineTemplateSpec{
				Resources:             types.Resources{CPU: 2, RAMGB: 1},
				ProviderConfiguration: map[string]json.RawMessage{inst: json.RawMessage(`{}`)},
				OnNodeLoss:            types.LostRebind,
			},
		})
	}

	node, qMachine := b.claimWait("q1", "q")
	require.Equal(t, a.Name, node, "only A has room")
	b.mustCLI("claim", "create", "s1", "--template", "s")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cl, err := b.claim("s1")
		if assert.NoError(c, err) {
			assert.Equal(c, types.ClaimRequested, cl.Status.Phase)
			assert.Equal(c, a.Name, cl.Status.Node, "accepted by A")
		}
	}, 20*time.Second, 50*time.Millisecond) // an offer that overtakes the claim waits for A's next report

	d := startWithConfig(t, "", testDriversConfig(8, "0s"), "--join", b.Gossip)
	waitUp(t, a, b, d)
	s1, err := b.claim("s1")
	require.NoError(t, err)
	require.Equal(t, types.ClaimRequested, s1.Status.Phase, "still allocating on A")
	require.Equal(t, a.Name, s1.Status.Node)

	a.kill()
	killed := time.Now()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		s, err := b.claim("s1")
		if assert.NoError(c, err) && assert.Equal(c, types.ClaimBound, s.Status.Phase) {
			assert.Equal(c, d.Name, s.Status.Node)
		}
	}, 10*time.Second, 50*time.Millisecond, "the claim A had accepted is bound on D within 10 s of the kill")
	t.Logf("after kill -9 of A: the accepted claim is bound on D in %s", time.Since(killed).Round(time.Millisecond))

	// A's machine is marked Lost once A is gone for lost_grace, and its
	// claim is bound again on D. That takes lost_grace plus, when the offer
	// overtakes the claim's replication to D (see the report), up to one
	// capacity report interval (10 s).
	seenLost := false
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		if m, err := b.machine(qMachine); err == nil && m.Status.Phase == types.MachineLost {
			seenLost = true
		}
		q, err := b.claim("q1")
		if assert.NoError(c, err) && assert.Equal(c, types.ClaimBound, q.Status.Phase) {
			assert.NotEqual(c, qMachine, q.Status.Machine, "bound to a new machine")
			assert.Equal(c, d.Name, q.Status.Node)
		}
	}, 20*time.Second, 50*time.Millisecond, "the claim of A's machine is bound again on D")
	t.Logf("after kill -9 of A: the lost machine's claim is bound again in %s", time.Since(killed).Round(time.Millisecond))
	if m, err := b.machine(qMachine); err == nil {
		assert.Equal(t, types.MachineLost, m.Status.Phase, "A's machine")
		seenLost = true
	}
	assert.True(t, seenLost, "A's machine %s was marked Lost", qMachine)
	out, err := b.run("node", "list")
	require.NoError(t, err)
	assert.Equal(t, "Down", nodeRows(out)[a.Name])

	// Nothing is left on A's account: every live machine is on D.
	ms, err := d.machines()
	require.NoError(t, err)
	for _, m := range ms {
		if m.Live() {
			assert.Equal(t, d.Name, m.Spec.Node, "machine %s", m.Metadata.Name)
		}
	}
}

// TestNodeAloneShowsPeersUnreachable: of three nodes two are killed with
// SIGKILL. The one left reaches no majority, so it passes no down verdict
// and its records keep the other two Up; its node list says it cannot
// reach them, and a node's get says why. A node watch open on it shows
// them turn unreachable though no record changed.
func TestNodeAloneShowsPeersUnreachable(t *testing.T) {
	const cfg = "drivers:\n  - name: test\n    config: {cpus: 2, ram_gb: 4}\n"
	a := startWithConfig(t, "", cfg)
	b := startWithConfig(t, "", cfg, "--join", a.Gossip)
	c := startWithConfig(t, "", cfg, "--join", a.Gossip)
	waitUp(t, a, b, c)
	watch := a.cliStart("node", "watch")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		rows := watchRows(watch.String())
		for _, p := range []*proc{a, b, c} {
			assert.Equal(ct, "Up", rows[p.Name], "%s", watch)
		}
	}, 20*time.Second, 100*time.Millisecond)

	b.kill()
	c.kill()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		rows := watchRows(watch.String())
		assert.Equal(ct, "Up,Unreachable", rows[b.Name], "%s", watch)
		assert.Equal(ct, "Up,Unreachable", rows[c.Name], "%s", watch)
	}, 20*time.Second, 100*time.Millisecond, "the watch follows a's view")
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		out, err := a.run("node", "list")
		if !assert.NoError(ct, err) {
			return
		}
		rows := nodeRows(out)
		assert.Equal(ct, "Up", rows[a.Name], "%v", rows)
		assert.Equal(ct, "Up,Unreachable", rows[b.Name], "%v", rows)
		assert.Equal(ct, "Up,Unreachable", rows[c.Name], "%v", rows)
	}, 20*time.Second, 200*time.Millisecond)

	out, err := a.run("node", "get", b.Name, "-o", "json")
	require.NoError(t, err)
	var node types.Node
	require.NoError(t, json.Unmarshal([]byte(out), &node), out)
	assert.Equal(t, types.NodeUp, node.Status.Phase, "no verdict without a majority")
	cond := node.Status.Conditions.Get(types.ConditionReachable)
	require.NotNil(t, cond, out)
	assert.Equal(t, types.ConditionFalse, cond.Status)
	assert.Equal(t, types.ReasonNoQuorum, cond.Reason)
	assert.Contains(t, cond.Message, "reaches 1 of the 3 members it knows")
}

// cliStart starts hf-cli against p, for a command that runs until it is
// stopped (a watch), and returns its output as it comes; the process is
// ended at the test's end.
func (p *proc) cliStart(args ...string) *syncbuf.Buffer {
	p.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "hf-cli"), args...)
	cmd.Env = append(os.Environ(), "HF_ENDPOINT="+p.API, "HF_TOKEN="+p.Token, "HF_CA_FILE="+p.caFile(), "HF_CONFIG_DIR="+p.t.TempDir())
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(p.t, cmd.Start())
	p.t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	return out
}

// watchRows returns the phase column of each node in `hf-cli node watch`
// output (piped: tab-separated, the event type first), the latest event's.
func watchRows(out string) map[string]string {
	rows := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Split(l, "\t"); len(f) > 2 && f[0] == "PUT" {
			rows[f[1]] = f[2]
		}
	}
	return rows
}
