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

	"github.com/hf-fleet/hf/lib/types"
)

// TestUserTokenGetsNoRootShell is the security issue's first finding, through
// the real binaries as root: a user's claim metadata written as shell code
// stays data, runs as the machine's own user (never root), and hook variables
// such as NODE_OPTIONS are refused with the key named. The native driver is
// configured without a mode, so root's default (a user per machine) is what
// is tested; and root cannot ask for the unprivileged mode.
func TestUserTokenGetsNoRootShell(t *testing.T) {
	needRoot(t)
	run := randHex(2)
	prefix := "hfx" + run + "-"
	cleanupUsers(t, prefix)
	host := nativeHost(t)
	userTok := "alice-" + randHex(12)
	cfg := fmt.Sprintf(`api:
  tokens:
    - {name: alice, token: %q, role: user}
drivers:
  - name: native
    config: {user_prefix: %q, workspace_path: %q, home_path: %q, stop_grace: 2s}
`, userTok, prefix, filepath.Join(host, "ws"), filepath.Join(host, "home"))
	n := startWithConfig(t, "", cfg)

	pwned := filepath.Join(os.TempDir(), "hf-PWNED-"+run)
	t.Cleanup(func() { _ = os.Remove(pwned) })
	n.createTemplate(types.MachineTemplate{
		Metadata: types.ObjectMeta{Name: "greet"},
		Spec: types.MachineTemplateSpec{
			Resources: types.Resources{CPU: 0.1, RAMGB: 0.1},
			ProviderConfiguration: map[string]json.RawMessage{"native": rawJSON(t, map[string]any{
				// The careless form: the value unquoted in the entry's shell.
				"entry": `echo greeting $name > "$HOME/greet.txt"; id -u >> "$HOME/greet.txt"; exec sleep 300`,
			})},
			ClaimMetadata: []types.MetadataKey{{Name: "name"}},
		},
	})

	alice := func(args ...string) (string, string, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "hf-cli"), args...)
		cmd.Env = append(os.Environ(), "HF_ENDPOINT="+n.API, "HF_TOKEN="+userTok, "HF_CA_FILE="+n.caFile(), "HF_CONFIG_DIR="+t.TempDir())
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return out.String(), errb.String(), code
	}

	attack := "x; id > " + pwned + " #"
	out, errOut, code := alice("claim", "create", "c1", "--template", "greet", "--meta", "name="+attack, "--wait", "--wait-timeout", "60s")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	m := boundOn.FindStringSubmatch(out + errOut)
	require.NotNil(t, m, out+errOut)
	mach, err := n.machine(m[2])
	require.NoError(t, err)
	home := mach.Status.MachineInformation["home"]
	require.NotEmpty(t, home)
	u := usersWithPrefix(t, prefix)[mach.Status.Resource.ID]
	require.NotZero(t, u.UID, "the machine has a user of its own")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		b, err := os.ReadFile(filepath.Join(home, "greet.txt"))
		assert.NoError(c, err)
		assert.Equal(c, fmt.Sprintf("greeting %s\n%d\n", attack, u.UID), string(b), "the value is printed, not run; the entry is not root")
	}, 15*time.Second, 50*time.Millisecond)
	assert.NoFileExists(t, pwned, "the claim's text never ran")

	for _, key := range []string{"NODE_OPTIONS", "PYTHONPATH", "PERL5OPT", "GIT_SSH_COMMAND", "LD_PRELOAD", "colour"} {
		out, errOut, code := alice("claim", "create", "c-"+strings.ToLower(strings.ReplaceAll(key, "_", "-")), "--template", "greet", "--meta", key+"=/tmp/evil")
		assert.NotEqual(t, 0, code, "%s accepted: %s", key, out)
		assert.Contains(t, errOut, "spec.metadata."+key, "the error names the key")
	}
	n.mustCLI("claim", "delete", "c1", "--wait")
	assert.Empty(t, usersWithPrefix(t, prefix), "the machine's user is gone")

	// Root may not run machines as itself.
	bad := filepath.Join(t.TempDir(), "hf.yml")
	require.NoError(t, os.WriteFile(bad, []byte("drivers:\n  - name: native\n    config: {unprivileged: true}\n"), 0o600))
	res, err := exec.Command(filepath.Join(bin, "hf-node"), "--config", bad, "--data-dir", t.TempDir(),
		"--api", "127.0.0.1:0", "--gossip", "127.0.0.1:0").CombinedOutput()
	require.Error(t, err, "hf-node started with an unprivileged native driver as root:\n%s", res)
	assert.Contains(t, string(res), "drivers[0].config")
	assert.Contains(t, string(res), "unprivileged: true is refused as root")
}

// TestFailingEntryFailsOnce: an entry that fails at start is re-bound at
// most scheduler.max_rebinds times, then the claim is Failed with a reason
// that carries the entry's exit status and last output.
func TestFailingEntryFailsOnce(t *testing.T) {
	needRoot(t)
	prefix := "hff" + randHex(2) + "-"
	cleanupUsers(t, prefix)
	host := nativeHost(t)
	n := startWithConfig(t, "", fmt.Sprintf(`scheduler:
  max_rebinds: 1
drivers:
  - name: native
    config: {user_prefix: %q, workspace_path: %q, home_path: %q, stop_grace: 2s}
`, prefix, filepath.Join(host, "ws"), filepath.Join(host, "home")))
	n.createTemplate(types.MachineTemplate{
		Metadata: types.ObjectMeta{Name: "broken"},
		Spec: types.MachineTemplateSpec{
			Resources: types.Resources{CPU: 0.1, RAMGB: 0.1},
			ProviderConfiguration: map[string]json.RawMessage{"native": rawJSON(t, map[string]any{
				"entry": `echo "config.yml: no such file" >&2; exit 3`,
			})},
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// It may be seen Bound first, until the node finds its entry dead.
	out, errOut, code := n.cli(ctx, nil, "claim", "create", "c1", "--template", "broken", "--wait", "--wait-timeout", "60s")
	assert.Contains(t, []int{0, 6}, code, "%s%s", out, errOut)
	var claim types.MachineClaim
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		out, err := n.run("claim", "get", "c1", "-o", "json")
		require.NoError(c, err)
		require.NoError(c, json.Unmarshal([]byte(out), &claim))
		assert.Equal(c, types.ClaimFailed, claim.Status.Phase)
	}, 60*time.Second, 200*time.Millisecond)
	t.Logf("reason: %s", claim.Status.Reason)
	assert.Contains(t, claim.Status.Reason, "entry exit status 3")
	assert.Contains(t, claim.Status.Reason, "last output: config.yml: no such file")
	assert.Contains(t, claim.Status.Reason, "scheduler.max_rebinds")
	require.Eventually(t, func() bool { return len(usersWithPrefix(t, prefix)) == 0 }, 30*time.Second, 100*time.Millisecond,
		"the failed machines' users are gone")
}
