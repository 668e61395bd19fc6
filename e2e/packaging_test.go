package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSystemdUnit: the unit in packaging/ starts hf-node with arguments it
// accepts, on the data dir systemd makes for it, and systemd-analyze (where
// the host has it) finds nothing wrong with it.
func TestSystemdUnit(t *testing.T) {
	unit, err := os.ReadFile("../packaging/systemd/hf-node.service")
	require.NoError(t, err)
	keys := map[string]string{}
	for _, line := range strings.Split(string(unit), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			keys[k] = v
		}
	}
	exe := strings.Fields(keys["ExecStart"])
	require.NotEmpty(t, exe)
	assert.Equal(t, "/usr/local/bin/hf-node", exe[0])
	assert.Equal(t, "hf", keys["StateDirectory"], "systemd makes /var/lib/hf")
	assert.Contains(t, keys["ExecStart"], "--data-dir /var/lib/hf")
	assert.Equal(t, "on-failure", keys["Restart"])
	assert.Equal(t, "root", keys["User"], "the native driver makes users")

	// hf-node takes the arguments (--help parses them and exits).
	out, err := exec.Command(filepath.Join(bin, "hf-node"), append(exe[1:], "--help")...).CombinedOutput()
	require.NoError(t, err, "%s", out)

	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("systemd-analyze not on this host: the unit is not verified by systemd")
		return
	}
	dir := t.TempDir()
	local := strings.Replace(string(unit), "ExecStart="+exe[0], "ExecStart="+filepath.Join(bin, "hf-node"), 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "hf-node.service"), []byte(local), 0o644))
	out, err = exec.Command(sa, "verify", filepath.Join(dir, "hf-node.service")).CombinedOutput()
	assert.NoError(t, err, "systemd-analyze verify: %s", out)
	assert.Empty(t, strings.TrimSpace(string(out)), "no warnings")
}
