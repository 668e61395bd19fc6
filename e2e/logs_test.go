package e2e

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

var boundOnMachine = regexp.MustCompile(`Bound on node (\S+) \(machine (m-[0-9a-f]+)\)`)

// TestMachineLogsThroughAnyNode: a machine's output is served by its node
// and reached through any other node of the cluster, with the caller's
// token; a user reads only their own machines' logs.
func TestMachineLogsThroughAnyNode(t *testing.T) {
	n1 := startNode(t, "")
	n2 := startNode(t, "", "--join", n1.Gossip)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	_, errOut, code := n1.cli(ctx, strings.NewReader(smallTemplate), "template", "create", "-f", "-")
	require.Equal(t, 0, code, errOut)
	out, errOut, code := n1.cli(ctx, nil, "claim", "create", "c1", "--template", "small", "--wait")
	require.Equal(t, 0, code, out+errOut)
	m := boundOnMachine.FindStringSubmatch(out + errOut)
	require.NotNil(t, m, out+errOut)
	other := n1
	if m[1] == n1.Name {
		other = n2
	}
	logs := other.mustCLI("machine", "logs", m[2])
	assert.Regexp(t, `^test machine test-\S+ started\ntest machine test-\S+ has no output of its own\n$`, logs, "through node %s", other.Name)
	assert.Regexp(t, `^test machine test-\S+ has no output of its own\n$`, other.mustCLI("machine", "logs", m[2], "--tail", "1"))
	_, errOut, code = other.cli(ctx, nil, "machine", "logs", "m-nope")
	assert.Equal(t, 3, code, errOut)
	_, errOut, code = other.cli(ctx, nil, "machine", "logs", m[2], "--tail", "-1")
	assert.Equal(t, 2, code, errOut)

	n1.mustCLI("user", "create", "bob", "--role", "user")
	var tok struct{ Token string }
	require.NoError(t, json.Unmarshal([]byte(n1.mustCLI("token", "create", "bob-1", "--user", "bob", "--role", "user", "-o", "json")), &tok))
	bob := *other
	bob.Token = tok.Token
	require.Eventually(t, func() bool { _, err := bob.run("whoami"); return err == nil }, 10*time.Second, 50*time.Millisecond)
	_, err := bob.run("machine", "logs", m[2])
	assert.ErrorIs(t, err, errNotFound, "another user's machine is not found")

	// Bob's own machine, while his claim is Bound to it.
	out, err = bob.run("claim", "create", "b1", "--template", "small", "--wait")
	require.NoError(t, err)
	mb := boundOnMachine.FindStringSubmatch(out)
	if mb == nil {
		var cl types.MachineClaim
		require.NoError(t, other.getJSON(&cl, "claim", "get", "b1"))
		mb = []string{"", cl.Status.Node, cl.Status.Machine}
	}
	logs, err = bob.run("machine", "logs", mb[2])
	require.NoError(t, err)
	assert.Contains(t, logs, "has no output of its own")
}

// TestNativeMachineLogs: a native entry's output, its last lines, and more
// of it as it comes with --follow.
func TestNativeMachineLogs(t *testing.T) {
	needRoot(t)
	prefix := "hfl" + randHex(2) + "-"
	cleanupUsers(t, prefix)
	host := nativeHost(t)
	n := startWithConfig(t, "", nativeConfig(prefix, host))
	n.createTemplate(types.MachineTemplate{
		Metadata: types.ObjectMeta{Name: "talk"},
		Spec: types.MachineTemplateSpec{
			Resources: types.Resources{CPU: 0.1, RAMGB: 0.1},
			ProviderConfiguration: map[string]json.RawMessage{"native": rawJSON(t, map[string]any{
				"entry": `echo one; echo two; echo three; sleep 1; echo four; exec sleep 300`,
			})},
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, errOut, code := n.cli(ctx, nil, "claim", "create", "c1", "--template", "talk", "--wait")
	require.Equal(t, 0, code, out+errOut)
	m := boundOnMachine.FindStringSubmatch(out + errOut)
	require.NotNil(t, m, out+errOut)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		out, err := n.run("machine", "logs", m[2], "--tail", "2")
		assert.NoError(c, err)
		assert.Equal(c, "three\nfour\n", out)
	}, 20*time.Second, 100*time.Millisecond)
	fctx, fcancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer fcancel()
	out, _, _ = n.cli(fctx, nil, "machine", "logs", m[2], "-f")
	assert.Equal(t, "one\ntwo\nthree\nfour\n", out, "follow prints what there is and waits for more")
	n.mustCLI("claim", "delete", "c1", "--wait")
}

// TestNativeMachineShell: a shell in a native machine, opened through the
// other node of the cluster, runs as the machine's own user, never root,
// and runs the commands piped to it up to their end; hf-cli exits with the
// shell's exit status.
func TestNativeMachineShell(t *testing.T) {
	needRoot(t)
	prefix := "hfs" + randHex(2) + "-"
	cleanupUsers(t, prefix)
	host := nativeHost(t)
	n1 := startWithConfig(t, "", nativeConfig(prefix, host+"/a"))
	n2 := startWithConfig(t, "", nativeConfig(prefix, host+"/b"), "--join", n1.Gossip)
	node, machine := sleeperClaim(t, n1, "c1")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	other := n1
	if node == n1.Name {
		other = n2
	}
	// No exit: the end of the commands (stdin) ends the shell, through
	// both nodes, after it ran them.
	out, errOut, code := other.cli(ctx, strings.NewReader("id -u; id -un; echo $HF_NATIVE_ID\n"), "machine", "shell", machine)
	require.Equal(t, 0, code, out+errOut)
	lines := strings.Fields(out)
	require.Len(t, lines, 3, out)
	assert.NotEqual(t, "0", lines[0], "not root")
	assert.True(t, strings.HasPrefix(lines[1], prefix), "the machine's own user: %s", lines[1])
	assert.NotEmpty(t, lines[2])
	// hf-cli exits with the shell's own status, from the machine's node
	// and through the other.
	for _, n := range []*proc{n1, n2} {
		for _, tc := range []struct {
			stdin  string
			code   int
			stderr string
		}{
			{stdin: "echo hi; exit 3\n", code: 3},
			{stdin: "echo hi; false\n", code: 1},
			{stdin: "echo hi; true\n", code: 0},
			{stdin: "echo hi; kill -KILL $$\n", code: 137, stderr: "hf-cli: machine " + machine + ": the shell was killed by SIGKILL\n"},
		} {
			out, errOut, code = n.cli(ctx, strings.NewReader(tc.stdin), "machine", "shell", machine)
			assert.Equal(t, tc.code, code, "%s via %s: %s%s", tc.stdin, n.Name, out, errOut)
			assert.Equal(t, "hi\n", out, "%s via %s", tc.stdin, n.Name)
			assert.Equal(t, tc.stderr, errOut, "%s via %s", tc.stdin, n.Name)
		}
	}
	n1.mustCLI("claim", "delete", "c1", "--wait")
	assert.Empty(t, usersWithPrefix(t, prefix), "the machine's user is gone, shell and all")
}

// sleeperClaim makes template "box" on p (a native machine whose entry
// sleeps) and claim name of it, and returns the node and the machine it is
// bound to.
func sleeperClaim(t *testing.T, p *proc, name string) (node, machine string) {
	t.Helper()
	p.createTemplate(types.MachineTemplate{
		Metadata: types.ObjectMeta{Name: "box"},
		Spec: types.MachineTemplateSpec{
			Resources:             types.Resources{CPU: 0.1, RAMGB: 0.1},
			ProviderConfiguration: map[string]json.RawMessage{"native": rawJSON(t, map[string]any{"entry": `exec sleep 300`})},
		},
	})
	return p.claimWait(name, "box")
}
