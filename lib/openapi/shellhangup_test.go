package openapi

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/http"
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

// testKeepalive is the shells' keep-alive interval in these tests.
const testKeepalive = 20 * time.Millisecond

// waitingShell is a node's shell that reads its input to the end, says
// "waiting", and waits to be hung up (as `sleep 600` would): it hands the
// cause of its context's end to hungUp, and exits as a hang-up would.
func waitingShell(hungUp chan<- error) func(context.Context, string, drivers.ShellOptions, func() (io.ReadWriter, error)) (drivers.ShellExit, error) {
	return func(ctx context.Context, _ string, _ drivers.ShellOptions, open func() (io.ReadWriter, error)) (drivers.ShellExit, error) {
		rw, err := open()
		if err != nil {
			return drivers.ShellExit{}, err
		}
		_, _ = io.Copy(io.Discard, rw)
		_, _ = io.WriteString(rw, "waiting\n")
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
			// Never hung up: the test fails; the shell ends, so the
			// servers can stop.
			return drivers.ShellExit{}, nil
		}
		hungUp <- context.Cause(ctx)
		return drivers.ShellExit{Code: 129, Signal: "SIGHUP"}, nil
	}
}

// hangupNode is an API node serving waitingShell on a listener of its own,
// which stop stops as hf-node does (Serve's context ends).
type hangupNode struct {
	*testEnv
	addr   string
	hungUp chan error
	stop   context.CancelFunc
	// served is closed when Serve returned serveErr.
	served   chan struct{}
	serveErr error
}

// hangupCluster is two such nodes on one store: n1 holds m-here and splices
// shells through to n2, which holds m-far.
func hangupCluster(t *testing.T) (n1, n2 *hangupNode) {
	t.Helper()
	st := openStore(t)
	serve := func(name string, mod func(*Config)) *hangupNode {
		n := &hangupNode{hungUp: make(chan error, 1), served: make(chan struct{})}
		n.testEnv = newTestEnvOn(t, st, func(c *Config) {
			c.NodeName = name
			c.MachineShell = waitingShell(n.hungUp)
			c.ShellKeepalive = testKeepalive
			c.ShutdownTimeout = time.Minute // far longer than a hang-up takes
			mod(c)
		})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		n.addr = ln.Addr().String()
		var ctx context.Context
		ctx, n.stop = context.WithCancel(context.Background())
		go func() {
			defer close(n.served)
			n.serveErr = n.srv.Serve(ctx, ln)
		}()
		t.Cleanup(func() {
			n.stop()
			<-n.served
		})
		return n
	}
	n2 = serve("n2", func(*Config) {})
	n1 = serve("n1", func(c *Config) { c.PeerClient, c.PeerScheme = &http.Client{}, "http" })
	_, err := st.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "n2"},
		Spec: types.NodeSpec{APIAddress: n2.addr}, Status: types.NodeStatus{Phase: types.NodeUp}}, store.PutOptions{Create: true})
	require.NoError(t, err)
	for _, m := range []struct{ name, node string }{{"m-here", "n1"}, {"m-far", "n2"}} {
		_, err := st.Put(&types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: m.name},
			Spec: types.MachineSpec{Node: m.node, Driver: "test"}}, store.PutOptions{Create: true})
		require.NoError(t, err)
	}
	return n1, n2
}

// openShell opens a shell of machine through the node at addr with token
// proto, sends it a command and the end of its input, and reads up to
// "waiting". The returned stream reads the rest: the shell's output (its
// frames under hf-shell.v2).
func openShell(t *testing.T, addr, machine, proto string) (upgrade.Stream, *bufio.Reader) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/api/v1/machines/"+machine+"/shell", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminTok)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", proto)
	s, res, err := upgrade.Do(&http.Client{}, req)
	require.NoError(t, err)
	require.NotNil(t, s, "status %d", res.StatusCode)
	t.Cleanup(func() { _ = s.Close() })
	_, err = io.WriteString(s, "sleep 600\n")
	require.NoError(t, err)
	require.NoError(t, s.CloseWrite())
	var out io.Reader = s
	if proto == ShellProtocol {
		out = shellframe.NewReader(s)
	}
	r := bufio.NewReader(out)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "waiting\n", line)
	return s, r
}

// hungUpBy waits for the shell's hang-up and returns its cause.
func hungUpBy(t *testing.T, n *hangupNode) error {
	t.Helper()
	select {
	case err := <-n.hungUp:
		return err
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the shell was not hung up", "on node %s:\n%s", n.srv.cfg.NodeName, n.logs.String())
		return nil
	}
}

// A shell whose client is gone, its input ended, is hung up, on its node
// and through another: under hf-shell.v2 a client that closed (as a
// killed hf-cli's host closes its connections) is found out by the
// keep-alive frames; under hf-shell, which has none, a client whose
// connection was reset.
func TestShellHangUpClientGone(t *testing.T) {
	n1, n2 := hangupCluster(t)
	for _, tc := range []struct {
		name, proto string
		end         func(upgrade.Stream)
	}{
		{"closed", ShellProtocol, func(s upgrade.Stream) { _ = s.Close() }},
		{"reset", ShellProtocol, upgrade.Abort},
		{"reset", RawShellProtocol, upgrade.Abort},
	} {
		for _, m := range []struct {
			machine string
			node    *hangupNode
		}{{"m-here", n1}, {"m-far", n2}} {
			t.Run(tc.proto+" "+tc.name+" "+m.machine, func(t *testing.T) {
				s, _ := openShell(t, n1.addr, m.machine, tc.proto)
				tc.end(s)
				assert.ErrorIs(t, hungUpBy(t, m.node), errClientGone)
				assert.Eventually(t, func() bool {
					return strings.Contains(m.node.logs.String(), `msg="machine shell ended" machine=`+m.machine+` user=admin token=admin protocol=`+tc.proto+` exit=129 signal=SIGHUP hangup="the client is gone: `)
				}, 5*time.Second, 10*time.Millisecond, "the node says why it hung the shell up")
			})
		}
	}
}

// Stopping a node hangs up the shells it runs, whose clients get an error
// frame saying so (through another node too), and waits for them; a node
// that splices a shell through, stopping, resets both of its connections,
// and the machine's node hangs that shell up.
func TestShellHangUpNodeStops(t *testing.T) {
	for _, tc := range []struct {
		name    string
		via     string // the node the client reaches: "n1" or "n2"
		machine string
		stop    string
		hungBy  string // the node whose shell is hung up
		cause   string
		client  string // what the client reads at the end
	}{
		{name: "its node", via: "n2", machine: "m-far", stop: "n2", hungBy: "n2", cause: "node n2 is stopping",
			client: "the shell was hung up: node n2 is stopping"},
		{name: "its node, through another", via: "n1", machine: "m-far", stop: "n2", hungBy: "n2", cause: "node n2 is stopping",
			client: "the shell was hung up: node n2 is stopping"},
		{name: "the node between", via: "n1", machine: "m-far", stop: "n1", hungBy: "n2", cause: "the client is gone: ",
			client: "no exit status from the shell: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n1, n2 := hangupCluster(t)
			nodes := map[string]*hangupNode{"n1": n1, "n2": n2}
			s, r := openShell(t, nodes[tc.via].addr, tc.machine, ShellProtocol)
			stopping, hungBy := nodes[tc.stop], nodes[tc.hungBy]
			start := time.Now()
			stopping.stop()
			select {
			case <-stopping.served:
				require.NoError(t, stopping.serveErr)
			case <-time.After(10 * time.Second):
				require.FailNow(t, "Serve did not return")
			}
			t.Logf("Serve returned %s after stop", time.Since(start))
			if tc.stop == tc.hungBy {
				select {
				case err := <-hungBy.hungUp:
					assert.EqualError(t, err, tc.cause)
				default:
					assert.Fail(t, "Serve returned before its shell ended")
				}
			} else {
				assert.ErrorContains(t, hungUpBy(t, hungBy), tc.cause)
			}
			require.NoError(t, s.(net.Conn).SetReadDeadline(time.Now().Add(10*time.Second)))
			_, err := io.ReadAll(r)
			var remote *shellframe.RemoteError
			if tc.stop == tc.hungBy {
				require.ErrorAs(t, err, &remote)
				assert.Equal(t, tc.client, remote.Message)
			} else {
				assert.ErrorIs(t, err, shellframe.ErrNoExit)
				assert.ErrorContains(t, err, tc.client)
			}
			_ = s.Close()
		})
	}
}

// A node that stops takes no new shell.
func TestShellRefusedWhileStopping(t *testing.T) {
	n1, _ := hangupCluster(t)
	n1.srv.stopping()
	n1.srv.shells.stop()
	for _, m := range []string{"m-here", "m-far"} {
		r := n1.do("GET", "/api/v1/machines/"+m+"/shell", adminTok, nil, "Connection", "Upgrade", "Upgrade", ShellProtocol)
		assert.Equal(t, http.StatusServiceUnavailable, r.code, m)
		assert.Contains(t, r.errBody(t).Message, "node n1 is stopping", m)
	}
}

// quietShell exits 0 with "done" once its input ended and it was quiet
// for a while: keep-alives go out meanwhile.
func quietShell(_ context.Context, _ string, _ drivers.ShellOptions, open func() (io.ReadWriter, error)) (drivers.ShellExit, error) {
	rw, err := open()
	if err != nil {
		return drivers.ShellExit{}, err
	}
	_, _ = io.Copy(io.Discard, rw)
	time.Sleep(10 * testKeepalive)
	_, err = io.WriteString(rw, "done\n")
	return drivers.ShellExit{}, err
}

// A quiet shell's keep-alives are empty output frames, which the client
// skips: its output and status come whole, here and through another node;
// the raw hf-shell gets none.
func TestShellKeepAlivesAreNoOutput(t *testing.T) {
	st := openStore(t)
	far := newTestEnvOn(t, st, func(c *Config) { c.NodeName = "n2"; c.MachineShell = quietShell; c.ShellKeepalive = testKeepalive })
	e := newTestEnvOn(t, st, func(c *Config) {
		c.MachineShell = quietShell
		c.ShellKeepalive = testKeepalive
		c.PeerClient, c.PeerScheme = far.http.Client(), "http"
	})
	_, err := st.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "n2"},
		Spec: types.NodeSpec{APIAddress: strings.TrimPrefix(far.http.URL, "http://")}, Status: types.NodeStatus{Phase: types.NodeUp}}, store.PutOptions{Create: true})
	require.NoError(t, err)
	for _, m := range []struct{ name, node string }{{"m-here", "n1"}, {"m-far", "n2"}} {
		_, err := st.Put(&types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: m.name},
			Spec: types.MachineSpec{Node: m.node, Driver: "test"}}, store.PutOptions{Create: true})
		require.NoError(t, err)
	}
	cl, err := client.New(e.http.URL, adminTok, client.WithHTTPClient(e.http.Client()))
	require.NoError(t, err)
	for _, machine := range []string{"m-here", "m-far"} {
		rw, err := cl.MachineShell(t.Context(), machine, false, 0, 0)
		require.NoError(t, err)
		require.NoError(t, rw.CloseWrite())
		out, err := io.ReadAll(rw)
		require.NoError(t, err, "%s\nn1:\n%s\nn2:\n%s", machine, e.logs.String(), far.logs.String())
		assert.Equal(t, "done\n", string(out), machine)
		exit, err := rw.Exit()
		require.NoError(t, err)
		assert.Equal(t, client.ShellExit{}, exit, machine)
		_ = rw.Close()

		for _, proto := range []string{ShellProtocol, RawShellProtocol} {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, e.http.URL+"/api/v1/machines/"+machine+"/shell", nil)
			require.NoError(t, err)
			req.Header.Set("Authorization", "Bearer "+adminTok)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", proto)
			s, _, err := upgrade.Do(e.http.Client(), req)
			require.NoError(t, err)
			require.NoError(t, s.CloseWrite())
			wire, err := io.ReadAll(s)
			require.NoError(t, err, "%s %s\nn1:\n%s\nn2:\n%s", machine, proto, e.logs.String(), far.logs.String())
			_ = s.Close()
			if proto == RawShellProtocol {
				assert.Equal(t, "done\n", string(wire), "%s: raw output, no keep-alives", machine)
				continue
			}
			var keepAlives int
			for len(wire) >= shellframe.HeaderLen {
				n := int(binary.BigEndian.Uint32(wire[1:shellframe.HeaderLen]))
				if wire[0] == shellframe.TypeOutput && n == 0 {
					keepAlives++
				}
				wire = wire[min(len(wire), shellframe.HeaderLen+n):]
			}
			assert.Positive(t, keepAlives, "%s: keep-alives went while the shell was quiet", machine)
		}
	}
}
