package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shellKeepalive is the nodes' api.shell_keepalive in these tests: short,
// so that a client gone is noticed at once.
const shellKeepalive = "api:\n  shell_keepalive: 250ms\n"

// hangUpBound is how long a shell whose client or node is gone may take to
// be hung up here: a few keep-alive intervals and the driver's grace,
// many times over.
const hangUpBound = 20 * time.Second

// shellClient is a running `hf-cli machine shell`.
type shellClient struct {
	cmd      *exec.Cmd
	out, err bytes.Buffer
	done     chan struct{}
}

// startShell starts `hf-cli machine shell machine` against p with stdin
// as its input, which ends at once (as `echo ... | hf-cli machine shell`
// ends it), and waits until the shell runs cmd (the last line of stdin):
// a process of that command line is on the host.
func (p *proc) startShell(machine, stdin, cmd string) *shellClient {
	p.t.Helper()
	c := &shellClient{done: make(chan struct{})}
	c.cmd = exec.Command(filepath.Join(bin, "hf-cli"), "machine", "shell", machine)
	c.cmd.Env = append(os.Environ(), "HF_ENDPOINT="+p.API, "HF_TOKEN="+p.Token, "HF_CA_FILE="+p.caFile(), "HF_CONFIG_DIR="+p.t.TempDir())
	c.cmd.Stdin = strings.NewReader(stdin)
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.err
	require.NoError(p.t, c.cmd.Start())
	go func() {
		_ = c.cmd.Wait()
		close(c.done)
	}()
	p.t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.done
	})
	require.Eventually(p.t, func() bool { return len(procsRunning(cmd)) > 0 }, 30*time.Second, 20*time.Millisecond,
		"the shell runs %q", cmd)
	return c
}

// exited waits for hf-cli to exit and returns its exit code.
func (c *shellClient) exited(t *testing.T) int {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(hangUpBound):
		require.FailNow(t, "hf-cli did not exit", "stdout %q, stderr %q", c.out.String(), c.err.String())
	}
	return c.cmd.ProcessState.ExitCode()
}

// procsRunning lists the host's processes whose command line is cmd.
func procsRunning(cmd string) []hostProc {
	var out []hostProc
	for _, p := range hostProcs() {
		if p.Cmd == cmd {
			out = append(out, p)
		}
	}
	return out
}

// assertGone checks that no process runs cmd within hangUpBound, and
// returns how long they took to go.
func assertGone(t *testing.T, cmd string, since time.Time, msg string) {
	t.Helper()
	if assert.Eventually(t, func() bool { return len(procsRunning(cmd)) == 0 }, hangUpBound, 20*time.Millisecond,
		"%s: %q still runs: %v", msg, cmd, procsRunning(cmd)) {
		t.Logf("%s: %q gone %s after", msg, cmd, time.Since(since).Round(time.Millisecond))
	}
}

// TestNativeShellClientKilled: a shell whose hf-cli is killed (kill -9)
// after its input ended, while the shell runs a long command, is hung up
// with what it runs, from the machine's node and through another node;
// so is one whose hf-cli reached it through a node that stops.
func TestNativeShellClientKilled(t *testing.T) {
	needRoot(t)
	prefix := "hfk" + randHex(2) + "-"
	cleanupUsers(t, prefix)
	host := nativeHost(t)
	n1 := startWithConfig(t, "", nativeConfig(prefix, host+"/a")+shellKeepalive)
	n2 := startWithConfig(t, "", nativeConfig(prefix, host+"/b")+shellKeepalive, "--join", n1.Gossip)
	node, machine := sleeperClaim(t, n1, "c1")
	home, other := n1, n2
	if node == n2.Name {
		home, other = n2, n1
	}

	for i, via := range []*proc{home, other} {
		cmd := "sleep " + []string{"601", "602"}[i]
		c := via.startShell(machine, cmd+"\n", cmd)
		start := time.Now()
		require.NoError(t, c.cmd.Process.Kill())
		<-c.done
		assertGone(t, cmd, start, "hf-cli killed, through node "+via.Name)
	}

	// The node between stops: it resets both of its connections, hf-cli
	// learns that the shell's status will not come, and the machine's
	// node hangs the shell up.
	c := other.startShell(machine, "sleep 603\n", "sleep 603")
	start := time.Now()
	other.stop()
	t.Logf("node %s stopped in %s", other.Name, time.Since(start).Round(time.Millisecond))
	assert.Less(t, time.Since(start), hangUpBound, "the node does not wait long for its shells")
	assertGone(t, "sleep 603", start, "the node between stopped")
	assert.Equal(t, 255, c.exited(t), "stderr: %s", c.err.String())
	assert.Contains(t, c.err.String(), "no exit status from the shell")

	home.mustCLI("claim", "delete", "c1", "--wait")
	assert.Empty(t, usersWithPrefix(t, prefix), "the machine's user is gone, shells and all")
}

// TestNativeShellNodeStops: stopping a node hangs up the shells it runs,
// whose hf-cli says why and exits 255, and the node stops without waiting
// for them to end by themselves.
func TestNativeShellNodeStops(t *testing.T) {
	needRoot(t)
	prefix := "hfn" + randHex(2) + "-"
	cleanupUsers(t, prefix)
	host := nativeHost(t)
	n := startWithConfig(t, "", nativeConfig(prefix, host)+shellKeepalive)
	_, machine := sleeperClaim(t, n, "c1")

	c := n.startShell(machine, "sleep 604\n", "sleep 604")
	start := time.Now()
	n.stop()
	t.Logf("node stopped in %s", time.Since(start).Round(time.Millisecond))
	assert.Less(t, time.Since(start), hangUpBound, "the node does not wait long for its shells")
	assert.Empty(t, procsRunning("sleep 604"), "the shell is gone once the node stopped")
	assert.Equal(t, 255, c.exited(t), "stderr: %s", c.err.String())
	assert.Equal(t, "hf-cli: machine "+machine+": no exit status from the shell: its node says: the shell was hung up: node "+n.Name+" is stopping\n", c.err.String())

	// The machine lives on with its node's next start.
	n = n.restart()
	n.mustCLI("claim", "delete", "c1", "--wait")
	assert.Empty(t, usersWithPrefix(t, prefix), "the machine's user is gone")
}
