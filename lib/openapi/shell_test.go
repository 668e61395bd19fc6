package openapi

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/internal/shellframe"
	"github.com/hf-fleet/hf/lib/internal/upgrade"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// fakeShell is node's shell in these tests. Without a terminal it reads
// all its input up to the client's end of input, then says what it read;
// with one it reads a line and says what it ran. Its last command says how
// it ends: "exit N" exits N, "kill -KILL $$" dies of SIGKILL, "fail" has
// no exit status; anything else exits 0. In m-hasty* it reads nothing,
// writes hastyOutput and exits 3.
func fakeShell(node string) func(context.Context, string, drivers.ShellOptions, func() (io.ReadWriter, error)) (drivers.ShellExit, error) {
	return func(_ context.Context, m string, o drivers.ShellOptions, open func() (io.ReadWriter, error)) (drivers.ShellExit, error) {
		if m == "m-noshell" {
			return drivers.ShellExit{}, ErrNoShell
		}
		rw, err := open()
		if err != nil {
			return drivers.ShellExit{}, err
		}
		if strings.HasPrefix(m, "m-hasty") {
			_, err := io.WriteString(rw, hastyOutput)
			return drivers.ShellExit{Code: 3}, err
		}
		var cmds string
		if !o.TTY {
			in, err := io.ReadAll(rw)
			if err != nil {
				return drivers.ShellExit{}, err
			}
			cmds = string(in)
			_, err = fmt.Fprintf(rw, "%s read %q for %s\n", node, in, m)
			if err != nil {
				return drivers.ShellExit{}, err
			}
		} else {
			line, _ := bufio.NewReader(rw).ReadString('\n')
			cmds = strings.TrimSpace(line)
			_, err = fmt.Fprintf(rw, "%s ran %q for %s, tty %v %dx%d\n", node, cmds, m, o.TTY, o.Rows, o.Cols)
			if err != nil {
				return drivers.ShellExit{}, err
			}
		}
		lines := strings.Split(strings.TrimSpace(cmds), "\n")
		last := lines[len(lines)-1]
		switch {
		case strings.HasPrefix(last, "exit "):
			code, err := strconv.Atoi(strings.TrimPrefix(last, "exit "))
			return drivers.ShellExit{Code: code}, err
		case last == "kill -KILL $$":
			return drivers.ShellExit{Code: 137, Signal: "SIGKILL"}, nil
		case last == "fail":
			return drivers.ShellExit{}, errors.New("exec inspect: no such exec")
		}
		return drivers.ShellExit{}, nil
	}
}

// shellCluster is two API nodes on one store: e (n1) and far (n2), each
// running fakeShell, and machines on both; n3 is a node that upgrades a
// shell's connection and drops it.
func shellCluster(t *testing.T) (e, far *testEnv, cl *client.Client) {
	t.Helper()
	st := openStore(t)
	// Keep-alives go out all along: they change nothing the client sees.
	far = newTestEnvOn(t, st, func(c *Config) {
		c.NodeName = "n2"
		c.MachineShell = fakeShell("n2")
		c.ShellKeepalive = time.Millisecond
	})
	e = newTestEnvOn(t, st, func(c *Config) {
		c.MachineShell = fakeShell("n1")
		c.ShellKeepalive = time.Millisecond
		c.PeerClient, c.PeerScheme = far.http.Client(), "http"
	})
	dropper := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		s, err := upgrade.Accept(conn, buf, r.Header.Get("Upgrade"))
		if err != nil {
			return
		}
		_, _ = shellframe.NewWriter(s).Write([]byte("partial output\n"))
		_ = s.Close()
	}))
	t.Cleanup(dropper.Close)
	put := func(o types.Object) {
		_, err := st.Put(o, store.PutOptions{Create: true})
		require.NoError(t, err)
	}
	for name, addr := range map[string]string{"n2": far.http.URL, "n3": dropper.URL} {
		put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: name},
			Spec: types.NodeSpec{APIAddress: strings.TrimPrefix(addr, "http://")}, Status: types.NodeStatus{Phase: types.NodeUp}})
	}
	for _, m := range []struct{ name, node string }{{"m-here", "n1"}, {"m-far", "n2"}, {"m-noshell", "n1"}, {"m-paused", "n2"},
		{"m-hasty", "n1"}, {"m-hasty-far", "n2"}, {"m-lost", "n3"}, {"m-ext", ""}} {
		put(&types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: m.name},
			Spec: types.MachineSpec{Node: m.node, Driver: "test"}, Status: types.MachineStatus{Paused: m.name == "m-paused"}})
	}
	cl, err := client.New(e.http.URL, adminTok, client.WithHTTPClient(e.http.Client()))
	require.NoError(t, err)
	return e, far, cl
}

// A shell: the connection is upgraded once the node knows it can run one;
// the machine's node runs it, another splices it through; operators and
// other users get none.
func TestMachineShell(t *testing.T) {
	e, _, cl := shellCluster(t)
	for _, tc := range []struct{ machine, want string }{
		{"m-here", `n1 ran "id -u" for m-here, tty true 24x80` + "\n"},
		{"m-far", `n2 ran "id -u" for m-far, tty true 24x80` + "\n"},
	} {
		rw, err := cl.MachineShell(t.Context(), tc.machine, true, 24, 80)
		require.NoError(t, err, tc.machine)
		_, err = io.WriteString(rw, "id -u\n")
		require.NoError(t, err)
		out, err := io.ReadAll(rw)
		require.NoError(t, err)
		assert.Equal(t, tc.want, string(out))
		_ = rw.Close()
	}
	// Without a terminal the end of the client's input reaches the shell,
	// here and through the other node, and its answer still comes back.
	for _, tc := range []struct{ machine, want string }{
		{"m-here", `n1 read "id -u\nexit 3\n" for m-here` + "\n"},
		{"m-far", `n2 read "id -u\nexit 3\n" for m-far` + "\n"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		rw, err := cl.MachineShell(ctx, tc.machine, false, 0, 0)
		require.NoError(t, err, tc.machine)
		_, err = io.WriteString(rw, "id -u\nexit 3\n")
		require.NoError(t, err)
		require.NoError(t, rw.CloseWrite(), tc.machine)
		out, err := io.ReadAll(rw)
		require.NoError(t, err, tc.machine)
		assert.Equal(t, tc.want, string(out))
		_ = rw.Close()
		cancel()
	}
	// The end of the caller's context closes the stream.
	ctx, cancel := context.WithCancel(t.Context())
	rw, err := cl.MachineShell(ctx, "m-far", true, 0, 0)
	require.NoError(t, err)
	cancel()
	_, err = io.ReadAll(rw)
	assert.Error(t, err, "a read after the context ended")
	_, err = cl.MachineShell(t.Context(), "m-noshell", false, 0, 0)
	assert.True(t, client.IsConflict(err), "%v", err)
	// An external machine (no node) has no shell: it was a 503 about node
	// "" that could not be reached.
	_, err = cl.MachineShell(t.Context(), "m-ext", false, 0, 0)
	assert.True(t, client.IsConflict(err), "%v", err)
	assert.ErrorContains(t, err, "machine m-ext is an external machine")
	// A paused machine's shell is refused before the upgrade, saying why:
	// it was an empty session that exited 0.
	_, err = cl.MachineShell(t.Context(), "m-paused", false, 0, 0)
	assert.True(t, client.IsConflict(err), "%v", err)
	assert.ErrorContains(t, err, "machine m-paused is paused")
	r := e.do("GET", "/api/v1/machines/m-here/shell", adminTok, nil)
	assert.Equal(t, http.StatusBadRequest, r.code, "no upgrade asked")
	assert.Equal(t, "Upgrade", r.errBody(t).Field)
	r = e.do("GET", "/api/v1/machines/m-here/shell", adminTok, nil, "Connection", "Upgrade", "Upgrade", "hf-shell.v3")
	assert.Equal(t, http.StatusBadRequest, r.code, "a token the node does not speak")
	assert.Equal(t, "Upgrade", r.errBody(t).Field)
	for _, proto := range []string{"hf-shell", "hf-shell.v2"} {
		r = e.do("GET", "/api/v1/machines/m-here/shell?rows=0", adminTok, nil, "Connection", "Upgrade", "Upgrade", proto)
		assert.Equal(t, http.StatusBadRequest, r.code)
		assert.Equal(t, http.StatusNotFound, e.do("GET", "/api/v1/machines/m-here/shell", bobTok, nil, "Connection", "Upgrade", "Upgrade", proto).code)
	}
	// The handler logs the end after the client has read the last byte.
	assert.Eventually(t, func() bool {
		return strings.Contains(e.logs.String(), `msg="machine shell ended" machine=m-here user=admin`)
	}, 5*time.Second, 10*time.Millisecond)
}

// The shell's exit status reaches the client (hf-shell.v2) after all its
// output, from this node and through the other: 0, 3, a signal's death, and
// no status with the node's reason; with a terminal and without.
func TestMachineShellExit(t *testing.T) {
	e, far, cl := shellCluster(t)
	node := map[string]string{"m-here": "n1", "m-far": "n2"}
	for _, machine := range []string{"m-here", "m-far"} {
		for _, tty := range []bool{false, true} {
			for _, tc := range []struct {
				cmd    string
				want   client.ShellExit
				noExit string
			}{
				{cmd: "id -u", want: client.ShellExit{}},
				{cmd: "exit 3", want: client.ShellExit{Code: 3}},
				{cmd: "exit 255", want: client.ShellExit{Code: 255}},
				{cmd: "kill -KILL $$", want: client.ShellExit{Code: 137, Signal: "SIGKILL"}},
				{cmd: "fail", noExit: "no exit status from the shell: its node says: the shell failed on node " + node[machine] + ", whose log says why"},
			} {
				name := fmt.Sprintf("%s tty %v %q", machine, tty, tc.cmd)
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				rw, err := cl.MachineShell(ctx, machine, tty, 24, 80)
				require.NoError(t, err, name)
				_, err = io.WriteString(rw, tc.cmd+"\n")
				require.NoError(t, err, name)
				if !tty {
					require.NoError(t, rw.CloseWrite(), name)
				}
				out, err := io.ReadAll(rw)
				assert.Contains(t, string(out), "for "+machine, "%s: the output comes before the end", name)
				exit, exitErr := rw.Exit()
				if tc.noExit != "" {
					assert.ErrorIs(t, err, client.ErrNoExitStatus, name)
					assert.EqualError(t, err, tc.noExit, name)
					assert.Equal(t, err, exitErr, name)
				} else {
					require.NoError(t, err, name)
					require.NoError(t, exitErr, name)
					assert.Equal(t, tc.want, exit, name)
				}
				_ = rw.Close()
				cancel()
			}
		}
	}
	assert.Eventually(t, func() bool {
		return strings.Contains(e.logs.String(), `msg="machine shell ended" machine=m-here user=admin token=admin protocol=hf-shell.v2 exit=137 signal=SIGKILL`) &&
			strings.Contains(far.logs.String(), `msg="machine shell ended" machine=m-far user=admin token=admin protocol=hf-shell.v2 err="exec inspect: no such exec"`)
	}, 5*time.Second, 10*time.Millisecond, "the node that ran the shell logs its end, with the error when it has no status")
}

// hastyOutput is more than a connection's buffers hold: when the shell
// ends, some of it is still to be sent.
var hastyOutput = strings.Repeat("bye\n", 1<<18)

// A shell that exits without reading its input still gets all its output
// and its status to the client, here and through the other node, while
// the client's input is still being sent: its node (and the node between)
// do not reset the connection under what the client has yet to receive.
func TestMachineShellExitUnreadInput(t *testing.T) {
	_, _, cl := shellCluster(t)
	for _, machine := range []string{"m-hasty", "m-hasty-far"} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		rw, err := cl.MachineShell(ctx, machine, false, 0, 0)
		require.NoError(t, err, machine)
		go func() { _, _ = rw.Write(make([]byte, 8<<20)) }()
		out, err := io.ReadAll(rw)
		require.NoError(t, err, machine)
		assert.Equal(t, len(hastyOutput), len(out))
		exit, err := rw.Exit()
		require.NoError(t, err)
		assert.Equal(t, client.ShellExit{Code: 3}, exit, machine)
		_ = rw.Close()
		cancel()
	}
}

// A connection that drops before the shell's exit status, here through a
// node that splices it, ends the client's stream with an error that says
// so, after the output that came.
func TestMachineShellLost(t *testing.T) {
	_, _, cl := shellCluster(t)
	rw, err := cl.MachineShell(t.Context(), "m-lost", false, 0, 0)
	require.NoError(t, err)
	require.NoError(t, rw.CloseWrite())
	out, err := io.ReadAll(rw)
	assert.Equal(t, "partial output\n", string(out))
	assert.ErrorIs(t, err, client.ErrNoExitStatus)
	assert.EqualError(t, err, "no exit status from the shell: the connection ended before it")
	_, exitErr := rw.Exit()
	assert.Equal(t, err, exitErr)
	_ = rw.Close()
}

// The old token, hf-shell, still carries raw bytes both ways with no
// status, here and through the other node, for clients from before
// hf-shell.v2.
func TestMachineShellRaw(t *testing.T) {
	e, _, _ := shellCluster(t)
	for _, tc := range []struct{ machine, want string }{
		{"m-here", `n1 read "id -u\nexit 3\n" for m-here` + "\n"},
		{"m-far", `n2 read "id -u\nexit 3\n" for m-far` + "\n"},
	} {
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.http.URL+"/api/v1/machines/"+tc.machine+"/shell", nil)
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer "+adminTok)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "hf-shell")
		s, res, err := upgrade.Do(e.http.Client(), req)
		require.NoError(t, err, tc.machine)
		require.NotNil(t, s, "status %d", res.StatusCode)
		assert.Equal(t, "hf-shell", res.Header.Get("Upgrade"))
		_, err = io.WriteString(s, "id -u\nexit 3\n")
		require.NoError(t, err)
		require.NoError(t, s.CloseWrite())
		out, err := io.ReadAll(s)
		require.NoError(t, err, tc.machine)
		assert.Equal(t, tc.want, string(out), "raw output, no frames")
		_ = s.Close()
		cancel()
	}
}
