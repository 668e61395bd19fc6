package openapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
	// An external machine, as the proposal writes one: no node holds it.
	put(&types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: "m-ext"},
		Spec: types.MachineSpec{MachineTemplate: "small"}})
	r := e.do("GET", "/api/v1/machines/m-here/logs?tail=3", adminTok, nil)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	assert.Equal(t, "n1 of m-here, tail 3 follow false\n", string(r.body))
	assert.Equal(t, "text/plain; charset=utf-8", r.header.Get("Content-Type"))
	r = e.do("GET", "/api/v1/machines/m-far/logs?follow=true", adminTok, nil)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	assert.Equal(t, "n2 of m-far, tail 0 follow true\n", string(r.body), "passed to the machine's node, with the caller's token")

	assert.Equal(t, http.StatusNotFound, e.do("GET", "/api/v1/machines/m-far/logs", bobTok, nil).code, "a user reads no machine of another's")
	assert.Equal(t, http.StatusNotFound, e.do("GET", "/api/v1/machines/m-none/logs", adminTok, nil).code)
	// An external machine has no node to serve its logs: a 409 saying so,
	// not a 503 about node "" that cannot be reached.
	r = e.do("GET", "/api/v1/machines/m-ext/logs", adminTok, nil)
	assert.Equal(t, http.StatusConflict, r.code, "%s", r.body)
	assert.Contains(t, r.errBody(t).Message, "machine m-ext is an external machine: it names no node")
	for q, field := range map[string]string{"tail=-1": "tail", "tail=x": "tail", "tail=100001": "tail", "follow=maybe": "follow"} {
		r := e.do("GET", "/api/v1/machines/m-here/logs?"+q, adminTok, nil)
		assert.Equal(t, http.StatusBadRequest, r.code, q)
		assert.Equal(t, field, r.errBody(t).Field, q)
	}
}
