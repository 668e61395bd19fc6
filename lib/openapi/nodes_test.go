package openapi

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Node objects are the nodes' own: a POST is refused (it made a "fake"
// node that read Down for ever), and a node that is Up or Draining is not
// deleted (it came straight back with a new createdAt); a Down one is,
// whether it stopped or was found gone.
func TestNodesAreTheirOwn(t *testing.T) {
	e := newTestEnv(t)
	e.makeUser("olga", RoleOperator)
	opTok := e.makeToken("olga-1", "olga", RoleOperator)

	for _, tok := range []string{adminTok, opTok} {
		r := e.do("POST", path(types.KindNode), tok, map[string]any{"metadata": map[string]any{"name": "fake"}})
		require.Equal(t, http.StatusMethodNotAllowed, r.code, "%s", r.body)
		assert.Contains(t, r.errBody(t).Message, "nodes are made by the nodes themselves")
	}
	assert.Equal(t, http.StatusForbidden, e.do("POST", path(types.KindNode), aliceTok, map[string]any{"metadata": map[string]any{"name": "fake"}}).code)
	assert.Equal(t, http.StatusNotFound, e.do("GET", path(types.KindNode, "fake"), adminTok, nil).code)

	e.reportNode("b2", types.NodeUp)
	r := e.do("DELETE", path(types.KindNode, "b2"), adminTok, nil)
	require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
	assert.Contains(t, r.errBody(t).Message, "node b2 is Up")
	assert.Contains(t, r.errBody(t).Message, "stop hf-node on it first")
	require.Equal(t, http.StatusOK, e.do("POST", "/api/v1/nodes/b2/drain", adminTok, nil).code)
	r = e.do("DELETE", path(types.KindNode, "b2"), opTok, nil)
	require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
	assert.Contains(t, r.errBody(t).Message, "node b2 is Draining")
	assert.Equal(t, http.StatusOK, e.do("GET", path(types.KindNode, "b2"), adminTok, nil).code)

	e.reportNode("b2", types.NodeDown) // stopped
	assert.Equal(t, http.StatusOK, e.do("DELETE", path(types.KindNode, "b2"), adminTok, nil).code)

	// Gone by the cluster's verdict, its last report still Up.
	e.reportNode("b3", types.NodeUp)
	_, err := store.UpdateFacet(e.st, types.KindNode, "b3", types.FacetLiveness, func(o *types.Node) error {
		o.Status.Down = &types.NodeVerdict{Reason: "gone", Report: o.Metadata.Facets.Get(types.FacetReport), Was: types.NodeUp}
		return nil
	})
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, e.do("DELETE", path(types.KindNode, "b3"), adminTok, nil).code)
}

// A PUT of a machine or a node may not change what the node writes: it
// used to answer 200 and change nothing (a new spec.node, say). It is a
// 409 naming the field; the object as read goes back unchanged, and a
// node's maintenance flag is still the API's.
func TestNodeWrittenFieldsAreRefused(t *testing.T) {
	e := newTestEnv(t)
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachine), adminTok, minimal(types.KindMachine, "m1")).code)
	asRead := e.do("GET", path(types.KindMachine, "m1"), adminTok, nil)
	require.Equal(t, http.StatusOK, asRead.code)

	for _, tc := range []struct {
		name  string
		mod   func(o map[string]any)
		field string
	}{
		{"spec.node", func(o map[string]any) { o["spec"].(map[string]any)["node"] = "n2" }, "spec.node"},
		{"spec.claim", func(o map[string]any) { o["spec"].(map[string]any)["claim"] = "c1" }, "spec.claim"},
		{"labels", func(o map[string]any) { o["metadata"].(map[string]any)["labels"] = map[string]any{"tier": "gold"} }, "metadata.labels"},
		{"annotations", func(o map[string]any) { o["metadata"].(map[string]any)["annotations"] = map[string]any{"a": "b"} }, "metadata.annotations"},
	} {
		t.Run("machine "+tc.name, func(t *testing.T) {
			o := asRead.obj(t)
			tc.mod(o)
			r := e.do("PUT", path(types.KindMachine, "m1"), adminTok, o)
			require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
			b := r.errBody(t)
			assert.Equal(t, tc.field, b.Field)
			assert.Contains(t, b.Message, "is written by the machine's node only")
		})
	}
	r := e.do("GET", path(types.KindMachine, "m1"), adminTok, nil)
	assert.Equal(t, asRead.obj(t), r.obj(t), "nothing changed")
	r = e.do("PUT", path(types.KindMachine, "m1"), adminTok, json.RawMessage(asRead.body))
	assert.Equal(t, http.StatusOK, r.code, "the machine as read: %s", r.body)

	e.reportNode("n1", types.NodeUp)
	node := e.do("GET", path(types.KindNode, "n1"), adminTok, nil).obj(t)
	node["spec"].(map[string]any)["apiAddress"] = "10.0.0.9:8080"
	r = e.do("PUT", path(types.KindNode, "n1"), adminTok, node)
	require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
	assert.Equal(t, "spec.apiAddress", r.errBody(t).Field)
	r = e.do("PUT", path(types.KindNode, "n1"), adminTok, map[string]any{"metadata": map[string]any{"name": "n1"}, "spec": map[string]any{"maintenance": true}})
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	assert.Equal(t, map[string]any{"apiAddress": "127.0.0.1:8080", "maintenance": true}, r.obj(t)["spec"])
}

// The node list and a node's get carry the answering node's own view
// (Config.NodeView): a node it cannot reach shows Reachable False beside
// the phase the cluster gave it, which stays what the record says (a node
// without a majority passes no down verdict, so that may be Up). The view
// is the answer's only: the record is unchanged, and a watch sends records.
func TestNodeListShowsWhatThisNodeReaches(t *testing.T) {
	e := newTestEnv(t, func(c *Config) {
		c.NodeView = func(n *types.Node) {
			cond := types.Condition{Type: types.ConditionReachable, Status: types.ConditionTrue, Reason: types.ReasonMember}
			if n.Metadata.Name == "b2" {
				cond.Status, cond.Reason, cond.Message = types.ConditionFalse, types.ReasonNoQuorum, "not a live member as n1 sees it"
			}
			n.Status.Conditions = types.Conditions{cond}
		}
	})
	e.reportNode("n1", types.NodeUp)
	e.reportNode("b2", types.NodeUp)

	reach := func(o map[string]any) (phase, status, reason string) {
		st := o["status"].(map[string]any)
		conds, _ := st["conditions"].([]any)
		require.Len(t, conds, 1, "%v", st)
		c := conds[0].(map[string]any)
		assert.Equal(t, types.ConditionReachable, c["type"])
		return st["phase"].(string), c["status"].(string), c["reason"].(string)
	}
	r := e.do("GET", path(types.KindNode), adminTok, nil)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	items := r.obj(t)["items"].([]any)
	require.Len(t, items, 2)
	got := map[string][3]string{}
	for _, it := range items {
		o := it.(map[string]any)
		phase, status, reason := reach(o)
		got[o["metadata"].(map[string]any)["name"].(string)] = [3]string{phase, status, reason}
	}
	assert.Equal(t, map[string][3]string{
		"b2": {"Up", "False", types.ReasonNoQuorum},
		"n1": {"Up", "True", types.ReasonMember},
	}, got)

	r = e.do("GET", path(types.KindNode, "b2"), adminTok, nil)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	phase, status, reason := reach(r.obj(t))
	assert.Equal(t, [3]string{"Up", "False", types.ReasonNoQuorum}, [3]string{phase, status, reason})
	r = e.do("GET", path(types.KindNode)+"?fieldSelector=status.phase%3DUp", adminTok, nil)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	assert.Len(t, r.obj(t)["items"], 2, "selectors read the record's phase")

	stored, err := store.Get[types.Node](e.st, types.KindNode, "b2")
	require.NoError(t, err)
	assert.Empty(t, stored.Status.Conditions, "the view is not stored")
}
