package openapi

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// A machine's logs come from its node: this one serves its own, passes on
// a request for another node's machine with the caller's token, and a user
// reads no machine of another's (e2e TestMachineLogsThroughAnyNode runs
// it through real nodes).
func TestMachineLogs(t *testing.T) {
	served := func(node string) func(context.Context, string, drivers.LogOptions, io.Writer) error {
		return func(_ context.Context, m string, o drivers.LogOptions, w io.Writer) error {
			_, err := fmt.Fprintf(w, "%s of %s, tail %d follow %v\n", node, m, o.Tail, o.Follow)
			return err
		}
	}
	st := openStore(t)
	far := newTestEnvOn(t, st, func(c *Config) { c.NodeName = "n2"; c.MachineLogs = served("n2") })
	e := newTestEnvOn(t, st, func(c *Config) {
		c.MachineLogs = served("n1")
		c.PeerClient, c.PeerScheme = far.http.Client(), "http"
	})
	put := func(o types.Object) {
		_, err := st.Put(o, store.PutOptions{Create: true})
		require.NoError(t, err)
	}
	put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "n2"},
		Spec: types.NodeSpec{APIAddress: strings.TrimPrefix(far.http.URL, "http://")}, Status: types.NodeStatus{Phase: types.NodeUp}})
	for _, m := range []struct{ name, node string }{{"m-here", "n1"}, {"m-far", "n2"}} {
		put(&types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: m.name},
			Spec: types.MachineSpec{Node: m.node, Driver: "test", Claim: "c-" + m.name}})
	}
	r := e.do("GET", "/api/v1/machines/m-here/logs?tail=3", adminTok, nil)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	assert.Equal(t, "n1 of m-here, tail 3 follow false\n", string(r.body))
	assert.Equal(t, "text/plain; charset=utf-8", r.header.Get("Content-Type"))
	r = e.do("GET", "/api/v1/machines/m-far/logs?follow=true", adminTok, nil)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	assert.Equal(t, "n2 of m-far, tail 0 follow true\n", string(r.body), "passed to the machine's node, with the caller's token")

	assert.Equal(t, http.StatusNotFound, e.do("GET", "/api/v1/machines/m-far/logs", bobTok, nil).code, "a user reads no machine of another's")
	assert.Equal(t, http.StatusNotFound, e.do("GET", "/api/v1/machines/m-none/logs", adminTok, nil).code)
	for q, field := range map[string]string{"tail=-1": "tail", "tail=x": "tail", "tail=100001": "tail", "follow=maybe": "follow"} {
		r := e.do("GET", "/api/v1/machines/m-here/logs?"+q, adminTok, nil)
		assert.Equal(t, http.StatusBadRequest, r.code, q)
		assert.Equal(t, field, r.errBody(t).Field, q)
	}
}

// A shell: the connection is upgraded once the node knows it can run one;
// the machine's node runs it, another splices it through; operators and
// other users get none.
func TestMachineShell(t *testing.T) {
	shell := func(node string) func(context.Context, string, drivers.ShellOptions, func() (io.ReadWriteCloser, error)) error {
		return func(_ context.Context, m string, o drivers.ShellOptions, open func() (io.ReadWriteCloser, error)) error {
			if m == "m-noshell" {
				return ErrNoShell
			}
			rw, err := open()
			if err != nil {
				return err
			}
			defer rw.Close()
			if !o.TTY {
				// Commands from a pipe: all of them, up to the client's
				// end of input, then the answer.
				in, err := io.ReadAll(rw)
				if err != nil {
					return err
				}
				_, err = fmt.Fprintf(rw, "%s read %q for %s\n", node, in, m)
				return err
			}
			line, _ := bufio.NewReader(rw).ReadString('\n')
			_, err = fmt.Fprintf(rw, "%s ran %q for %s, tty %v %dx%d\n", node, strings.TrimSpace(line), m, o.TTY, o.Rows, o.Cols)
			return err
		}
	}
	st := openStore(t)
	far := newTestEnvOn(t, st, func(c *Config) { c.NodeName = "n2"; c.MachineShell = shell("n2") })
	e := newTestEnvOn(t, st, func(c *Config) {
		c.MachineShell = shell("n1")
		c.PeerClient, c.PeerScheme = far.http.Client(), "http"
	})
	put := func(o types.Object) {
		_, err := st.Put(o, store.PutOptions{Create: true})
		require.NoError(t, err)
	}
	put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "n2"},
		Spec: types.NodeSpec{APIAddress: strings.TrimPrefix(far.http.URL, "http://")}, Status: types.NodeStatus{Phase: types.NodeUp}})
	for _, m := range []struct{ name, node string }{{"m-here", "n1"}, {"m-far", "n2"}, {"m-noshell", "n1"}, {"m-paused", "n2"}} {
		put(&types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: m.name},
			Spec: types.MachineSpec{Node: m.node, Driver: "test"}, Status: types.MachineStatus{Paused: m.name == "m-paused"}})
	}
	cl, err := client.New(e.http.URL, adminTok, client.WithHTTPClient(e.http.Client()))
	require.NoError(t, err)
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
	// A paused machine's shell is refused before the upgrade, saying why:
	// it was an empty session that exited 0.
	_, err = cl.MachineShell(t.Context(), "m-paused", false, 0, 0)
	assert.True(t, client.IsConflict(err), "%v", err)
	assert.ErrorContains(t, err, "machine m-paused is paused")
	r := e.do("GET", "/api/v1/machines/m-here/shell", adminTok, nil)
	assert.Equal(t, http.StatusBadRequest, r.code, "no upgrade asked")
	assert.Equal(t, "Upgrade", r.errBody(t).Field)
	r = e.do("GET", "/api/v1/machines/m-here/shell?rows=0", adminTok, nil, "Connection", "Upgrade", "Upgrade", "hf-shell")
	assert.Equal(t, http.StatusBadRequest, r.code)
	assert.Equal(t, http.StatusNotFound, e.do("GET", "/api/v1/machines/m-here/shell", bobTok, nil, "Connection", "Upgrade", "Upgrade", "hf-shell").code)
	// The handler logs the end after the client has read the last byte.
	assert.Eventually(t, func() bool {
		return strings.Contains(e.logs.String(), `msg="machine shell ended" machine=m-here user=admin`)
	}, 5*time.Second, 10*time.Millisecond)
}
