package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ignoredSignals reads the mask of the signals process pid ignores
// (SigIgn in its status).
func ignoredSignals(t require.TestingT, pid int) uint64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			require.NoError(t, err, line)
			return mask
		}
	}
	require.Fail(t, "no SigIgn line", "in /proc/%d/status", pid)
	return 0
}

// sigBit is a signal's bit in a SigIgn mask.
func sigBit(s syscall.Signal) uint64 { return 1 << (s - 1) }

// TestNativeUnderNohup: a node started with SIGHUP, SIGINT and SIGQUIT
// ignored (as nohup ignores SIGHUP, and a script's background job SIGINT and
// SIGQUIT) keeps ignoring a hang-up, but its machines do not inherit the
// ignoring: an entry starts with every signal at its default, and a shell
// dies of the hang-up the driver sends it when its client leaves (under
// the ignoring it lived on until it was killed).
func TestNativeUnderNohup(t *testing.T) {
	needRoot(t)
	prefix := "hfh" + randHex(2) + "-"
	cleanupUsers(t, prefix)
	host := nativeHost(t)
	cfg := filepath.Join(t.TempDir(), "hf.yml")
	require.NoError(t, os.WriteFile(cfg, []byte(nativeConfig(prefix, host)), 0o600))
	n, lines := launchNodeUnder(t, []string{"sh", "-c", `trap "" HUP INT QUIT; exec "$0" "$@"`}, "", "--config", cfg)
	n.await(lines)
	pid := n.cmd.Process.Pid
	held := sigBit(syscall.SIGHUP) | sigBit(syscall.SIGINT) | sigBit(syscall.SIGQUIT)
	assert.Zero(t, ignoredSignals(t, pid)&held, "the node catches the signals it was started ignoring")
	assert.Contains(t, n.out.String(), "signals=hangup,interrupt", "the node says which signals it holds")

	// The node itself still ignores a hang-up.
	require.NoError(t, syscall.Kill(pid, syscall.SIGHUP))
	_, err := n.run("node", "list")
	require.NoError(t, err, "the node answers after a SIGHUP:\n%s", n.out.String())

	_, machine := sleeperClaim(t, n, "c1")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var entry hostProc
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var ps []hostProc
		for _, p := range entryProcs(prefix) {
			ps = append(ps, p...)
		}
		if assert.Len(c, ps, 1) {
			assert.Equal(c, "sleep 300", ps[0].Cmd)
			entry = ps[0]
		}
	}, 10*time.Second, 20*time.Millisecond, "the entry settles in its sleep")
	assert.Zero(t, ignoredSignals(t, entry.PID)&held, "the entry %d ignores none of SIGHUP, SIGINT, SIGQUIT", entry.PID)

	// A shell ignores no hang-up either: it dies of one.
	out, errOut, code := n.cli(ctx, strings.NewReader("grep SigIgn /proc/$$/status; kill -HUP $$; echo survived\n"), "machine", "shell", machine)
	assert.Equal(t, 129, code, out+errOut)
	assert.NotContains(t, out, "survived")
	assert.Equal(t, "hf-cli: machine "+machine+": the shell was killed by SIGHUP\n", errOut)
	if f := strings.Fields(out); assert.Len(t, f, 2, out) {
		mask, err := strconv.ParseUint(f[1], 16, 64)
		require.NoError(t, err, out)
		assert.Zero(t, mask&held, "the shell ignores none of SIGHUP, SIGINT, SIGQUIT: %s", out)
	}

	n.mustCLI("claim", "delete", "c1", "--wait")
	assert.Empty(t, usersWithPrefix(t, prefix))
}
