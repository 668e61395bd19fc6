package openapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

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

// A node that is Up by its last report but not a live member as the
// answering node sees it is deleted with force=true: a node that reaches
// no majority passes no down verdict, so in a cluster of two the survivor
// never found its dead peer Down, and the peer could not be deleted ("stop
// hf-node on it first", which was stopped). A live one is refused even so.
func TestUnreachableNodeIsDeletedWithForce(t *testing.T) {
	reach := newFakeReach()
	e := newTestEnv(t, reach.config)
	e.reportNode("n1", types.NodeUp)
	e.reportNode("b2", types.NodeUp)
	e.reportNode("b3", types.NodeUp)
	reach.set("b2", types.ReasonNoQuorum)

	r := e.do("DELETE", path(types.KindNode, "b2"), adminTok, nil)
	require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
	assert.Contains(t, r.errBody(t).Message, "node n1 cannot reach it (NoQuorum)")
	assert.Contains(t, r.errBody(t).Message, "hf-cli node delete b2 --force")
	r = e.do("DELETE", path(types.KindNode, "b2")+"?force=maybe", adminTok, nil)
	require.Equal(t, http.StatusBadRequest, r.code, "%s", r.body)
	assert.Equal(t, "force", r.errBody(t).Field)
	assert.Equal(t, http.StatusForbidden, e.do("DELETE", path(types.KindNode, "b2")+"?force=true", aliceTok, nil).code)

	for _, live := range []string{"b3", "n1"} {
		r = e.do("DELETE", path(types.KindNode, live)+"?force=true", adminTok, nil)
		require.Equal(t, http.StatusConflict, r.code, "%s: %s", live, r.body)
		assert.Contains(t, r.errBody(t).Message, "stop hf-node on it first")
	}
	r = e.do("DELETE", path(types.KindNode, "b2")+"?force=true", adminTok, nil)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	assert.Equal(t, http.StatusNotFound, e.do("GET", path(types.KindNode, "b2"), adminTok, nil).code)
}

// A PUT of a machine or a node may not change what the node writes: it
// used to answer 200 and change nothing (a new spec.node, say). It is a
// 409 naming the field; the object as read goes back unchanged, and a
// node's maintenance flag is still the API's.
func TestNodeWrittenFieldsAreRefused(t *testing.T) {
	e := newTestEnv(t)
	// A machine its node made (through the store: the API makes none).
	_, err := e.st.Put(&types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: "m1"},
		Spec: types.MachineSpec{MachineTemplate: "small", Node: "n1", Driver: "test"}}, store.PutOptions{Create: true})
	require.NoError(t, err)
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
// is the answer's only: the record is unchanged.
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

// fakeReach is a node's view of the others for Config.NodeView, which the
// test moves, telling the streams through Config.NodeViewChanged as the
// cluster does when membership changes.
type fakeReach struct {
	mu      sync.Mutex
	reasons map[string]string // node -> reason it is unreachable ("": Member)
	changed chan struct{}
}

func newFakeReach() *fakeReach {
	return &fakeReach{reasons: map[string]string{}, changed: make(chan struct{})}
}

func (r *fakeReach) config(c *Config) { c.NodeView, c.NodeViewChanged = r.view, r.wait }

func (r *fakeReach) view(n *types.Node) {
	r.mu.Lock()
	defer r.mu.Unlock()
	cond := types.Condition{Type: types.ConditionReachable, Status: types.ConditionTrue, Reason: types.ReasonMember}
	if reason := r.reasons[n.Metadata.Name]; reason != "" {
		cond.Status, cond.Reason, cond.Message = types.ConditionFalse, reason, "not a live member as n1 sees it"
	}
	n.Status.Conditions = types.Conditions{cond}
}

func (r *fakeReach) wait() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.changed
}

// set moves the view of node and tells the streams.
func (r *fakeReach) set(node, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons[node] = reason
	close(r.changed)
	r.changed = make(chan struct{})
}

// reachOfEvent is the Reachable condition of the Node a put carries.
func reachOfEvent(t *testing.T, ev sseEvent) (status, reason string) {
	t.Helper()
	require.Equal(t, WatchPut, ev.name, "%+v", ev)
	var n types.Node
	require.NoError(t, json.Unmarshal(ev.data.Object, &n), "%s", ev.data.Object)
	assert.Equal(t, types.NodeUp, n.Status.Phase, "the record's phase")
	c := n.Status.Conditions.Get(types.ConditionReachable)
	require.NotNil(t, c, "%s", ev.data.Object)
	return string(c.Status), c.Reason
}

// A watch's Nodes carry the streaming node's view as the list does, and
// when that view moves with no record changing (this node lost its
// majority, say) every stream that sent the Node sends it again: the same
// record (version, seq) with the new view. A stream whose selector left
// the Node out, or that sends no Nodes, gets nothing; a user's stream gets
// it as an admin's does (every role reads nodes). A resumed stream sends
// the view of the Nodes its replay did not send, as its snapshot.
func TestNodeWatchFollowsWhatThisNodeReaches(t *testing.T) {
	reach := newFakeReach()
	e := newTestEnv(t, reach.config)
	e.reportNode("b2", types.NodeUp)
	e.reportNode("n1", types.NodeUp)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	open := func(path, tok string) <-chan sseEvent {
		ch, res := e.openStream(ctx, path, tok)
		require.NotNil(t, ch, "%s: %d", path, res.StatusCode)
		return ch
	}
	streams := map[string]<-chan sseEvent{
		"events, admin":      open("/api/v1/events?kinds=nodes,machinetemplates", adminTok),
		"watch=true, a user": open(path(types.KindNode)+"?watch=true", aliceTok),
	}
	selected := open(path(types.KindNode)+"?watch=true&fieldSelector=metadata.name%3Dn1", adminTok)
	templates := open("/api/v1/events?kinds=machinetemplates", adminTok)
	assert.Equal(t, WatchSynced, nextEvent(t, templates).name)
	snap := map[string]WatchEvent{}
	for name, ch := range streams {
		for _, want := range []string{"b2", "n1"} {
			ev := nextEvent(t, ch)
			require.Equal(t, want, ev.data.Name, name)
			status, reason := reachOfEvent(t, ev)
			assert.Equal(t, [2]string{"True", types.ReasonMember}, [2]string{status, reason}, "%s: %s in the snapshot", name, want)
			snap[want] = ev.data
		}
		assert.Equal(t, WatchSynced, nextEvent(t, ch).name, name)
	}
	ev := nextEvent(t, selected)
	require.Equal(t, "n1", ev.data.Name)
	assert.Equal(t, WatchSynced, nextEvent(t, selected).name)

	// n1 loses its majority: b2's record is unchanged, its view is not.
	reach.set("b2", types.ReasonNoQuorum)
	for name, ch := range streams {
		ev := next(t, ch)
		require.Equal(t, "b2", ev.data.Name, name)
		status, reason := reachOfEvent(t, ev)
		assert.Equal(t, [2]string{"False", types.ReasonNoQuorum}, [2]string{status, reason}, name)
		assert.Equal(t, snap["b2"].Version, ev.id, "%s: the same record", name)
		assert.Equal(t, snap["b2"].Seq, ev.data.Seq, "%s: the same record", name)
	}
	// Nothing else was sent: the next event anywhere is the next change.
	require.Equal(t, 201, e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "t1")).code)
	_, err := store.UpdateFacet(e.st, types.KindNode, "n1", types.FacetReport, func(o *types.Node) error {
		o.Status.Machines++ // n1's next report
		return nil
	})
	require.NoError(t, err)
	for name, ch := range streams {
		if name == "events, admin" {
			assert.Equal(t, "t1", next(t, ch).data.Name, name)
		}
		ev := next(t, ch)
		assert.Equal(t, "n1", ev.data.Name, "%s: n1's view did not move, its record did", name)
		assert.Greater(t, ev.data.Seq, snap["n1"].Seq, name)
	}
	assert.Equal(t, "t1", next(t, templates).data.Name, "a stream without nodes")
	ev = next(t, selected)
	assert.Equal(t, "n1", ev.data.Name, "the selector left b2 out")
	status, reason := reachOfEvent(t, ev)
	assert.Equal(t, [2]string{"True", types.ReasonMember}, [2]string{status, reason})

	// A stream resumed after every record it has: b2's view moved while
	// it was away, and no record says so.
	resume := strconv.FormatUint(e.st.Seq(), 10)
	reach.set("b2", types.ReasonUnreachable)
	ch := open("/api/v1/events?kinds=nodes&since="+resume, adminTok)
	var got []string
	for ev := nextEvent(t, ch); ev.name != WatchSynced; ev = nextEvent(t, ch) {
		status, reason := reachOfEvent(t, ev)
		got = append(got, ev.data.Name+" "+status+" "+reason)
	}
	assert.Equal(t, []string{"b2 False " + types.ReasonUnreachable, "n1 True " + types.ReasonMember}, got,
		"the resumed stream's snapshot: the Nodes with the view of now")
	reach.set("n1", types.ReasonUnreachable)
	ev = next(t, ch)
	assert.Equal(t, "n1", ev.data.Name, "the resumed stream follows the view too")

	stored, err := store.Get[types.Node](e.st, types.KindNode, "b2")
	require.NoError(t, err)
	assert.Empty(t, stored.Status.Conditions, "the view is not stored")
}

// A stream that fell behind (resync) takes the Nodes as the store has them
// now, as the client lists them again: their older events still queued are
// not sent, and a view that moves later is sent with the newest record.
func TestNodeWatchAfterResync(t *testing.T) {
	reach := newFakeReach()
	e := newTestEnv(t, reach.config)
	e.reportNode("b2", types.NodeUp)
	rec, err := e.st.Get(types.KindNode, "b2")
	require.NoError(t, err)
	f := &streamFilter{p: Principal{Name: "admin", Role: RoleAdmin}, kinds: map[string]bool{types.KindNode: true},
		view: e.srv.withView, nodes: map[string]sentNode{}}
	out, sent := f.apply(store.Event{Type: store.EventPut, Record: rec}, t.Logf)
	require.True(t, sent)
	assert.Equal(t, rec.Seq, out.Seq)

	// Events are lost; b2 reports again meanwhile.
	report := func(machines int) store.Record {
		_, err := store.UpdateFacet(e.st, types.KindNode, "b2", types.FacetReport, func(o *types.Node) error {
			o.Status.Machines = machines
			return nil
		})
		require.NoError(t, err)
		rec, err := e.st.Get(types.KindNode, "b2")
		require.NoError(t, err)
		return rec
	}
	queued, newer := report(1), report(2)
	require.NoError(t, f.seedNodes(e.st, true, t.Logf))
	assert.Empty(t, f.viewChanged(t.Logf), "the client lists the views of now again")
	_, sent = f.apply(store.Event{Type: store.EventPut, Record: queued}, t.Logf)
	assert.False(t, sent, "an event older than what the client lists")

	reach.set("b2", types.ReasonNoQuorum)
	outs := f.viewChanged(t.Logf)
	require.Len(t, outs, 1)
	assert.Equal(t, newer.Seq, outs[0].Seq)
	var n types.Node
	require.NoError(t, json.Unmarshal(outs[0].Object, &n))
	assert.Equal(t, 2, n.Status.Machines, "the newest record")
	assert.Equal(t, types.ReasonNoQuorum, n.Status.Conditions.Get(types.ConditionReachable).Reason)
	assert.Empty(t, f.viewChanged(t.Logf), "sent once")
}

// A Node a stream's selector stops matching is sent as deleted and its
// view is no longer followed; an object of another kind under the same
// name that stops matching leaves the Node's alone.
func TestNodeWatchSelectorStopsFollowing(t *testing.T) {
	reach := newFakeReach()
	e := newTestEnv(t, reach.config)
	sel, err := parseSelectors("team=a", "", []string{types.KindNode, types.KindMachineTemplate})
	require.NoError(t, err)
	f := &streamFilter{p: Principal{Name: "admin", Role: RoleAdmin}, kinds: map[string]bool{types.KindNode: true, types.KindMachineTemplate: true},
		view: e.srv.withView, nodes: map[string]sentNode{}, sel: sel, matched: map[string]bool{}}
	put := func(o types.Object, team string) store.Event {
		o.Meta().Labels = map[string]string{"team": team}
		rec, err := e.st.Put(o, store.PutOptions{})
		require.NoError(t, err)
		return store.Event{Type: store.EventPut, Record: rec}
	}
	node := &types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "b2"}, Status: types.NodeStatus{Phase: types.NodeUp}}
	tmpl := &types.MachineTemplate{TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate}, Metadata: types.ObjectMeta{Name: "b2"},
		Spec: types.MachineTemplateSpec{ProviderConfiguration: map[string]json.RawMessage{"test": json.RawMessage(`{}`)}}}
	for _, ev := range []store.Event{put(node, "a"), put(tmpl, "a")} {
		_, sent := f.apply(ev, t.Logf)
		require.True(t, sent)
	}
	out, sent := f.apply(put(tmpl, "b"), t.Logf)
	require.True(t, sent)
	require.Equal(t, WatchDelete, out.Type)

	reach.set("b2", types.ReasonNoQuorum)
	outs := f.viewChanged(t.Logf)
	require.Len(t, outs, 1, "the Node's view is still followed")
	assert.Equal(t, types.KindNode, outs[0].Kind)

	out, sent = f.apply(put(node, "b"), t.Logf)
	require.True(t, sent)
	require.Equal(t, WatchDelete, out.Type)
	reach.set("b2", types.ReasonUnreachable)
	assert.Empty(t, f.viewChanged(t.Logf), "a Node the stream no longer sends")
}

// A Machine created through the API names no node, nor what a node writes
// of the machines it makes: an operator's or an admin's token could POST
// one naming node n1, a record n1 never made, which showed a machine
// nobody holds and whose reap n1 never carried out. Each such field is a
// 403 naming it, and nothing is stored; an external machine (as the
// proposal writes one) is still created.
func TestMachineCreateNamingANodeIsRefused(t *testing.T) {
	e := newTestEnv(t)
	e.reportNode("n1", types.NodeUp)
	e.makeUser("olga", RoleOperator)
	opTok := e.makeToken("olga-1", "olga", RoleOperator)
	spec := func(kv ...any) func(o map[string]any) {
		return func(o map[string]any) {
			for i := 0; i < len(kv); i += 2 {
				o["spec"].(map[string]any)[kv[i].(string)] = kv[i+1]
			}
		}
	}
	label := func(k, v string) func(o map[string]any) {
		return func(o map[string]any) { o["metadata"].(map[string]any)["labels"] = map[string]any{k: v} }
	}
	for _, tc := range []struct {
		name, field string
		mod         func(o map[string]any)
	}{
		// (spec.node alone was a 400 asking for spec.driver.)
		{"node and driver", "spec.node", spec("node", "n1", "driver", "test")},
		{"node", "spec.node", spec("node", "n1")},
		{"driver", "spec.driver", spec("driver", "test")},
		{"claim", "spec.claim", spec("claim", "c1")},
		{"round", "spec.round", spec("round", 3)},
		{"node label", "metadata.labels.hf/node", label("hf/node", "n1")},
		{"claim label", "metadata.labels.hf/claim", label("hf/claim", "c1")},
	} {
		for role, tok := range map[string]string{"operator": opTok, "admin": adminTok} {
			t.Run(fmt.Sprintf("%s as an %s", tc.name, role), func(t *testing.T) {
				o := minimal(types.KindMachine, "m1")
				tc.mod(o)
				r := e.do("POST", path(types.KindMachine), tok, o)
				require.Equal(t, http.StatusForbidden, r.code, "%s", r.body)
				b := r.errBody(t)
				assert.Equal(t, tc.field, b.Field)
				assert.Contains(t, b.Message, " is written by the node that makes the machine, when it allocates it")
				assert.Contains(t, b.Message, strings.TrimPrefix(tc.field, "metadata.labels."), "the message names it too")
				assert.Equal(t, http.StatusNotFound, e.do("GET", path(types.KindMachine, "m1"), adminTok, nil).code, "nothing stored")
			})
		}
	}
	r := e.do("POST", path(types.KindMachine), opTok, minimal(types.KindMachine, "ext-1"))
	require.Equal(t, http.StatusCreated, r.code, "an external machine: %s", r.body)
	assert.Nil(t, r.obj(t)["spec"].(map[string]any)["node"])
}

// An error that quotes what was sent does not send it all back: a 1 MB
// spec.node was echoed whole in the 403 (and a 1 MB ttl in a join
// token's 400). Messages are cut at 1 KB, at a character's start.
func TestErrorMessagesAreClipped(t *testing.T) {
	e := newTestEnv(t)
	o := minimal(types.KindMachine, "m1")
	o["spec"].(map[string]any)["node"] = "é" + strings.Repeat("n", 512<<10)
	r := e.do("POST", path(types.KindMachine), adminTok, o)
	require.Equal(t, http.StatusForbidden, r.code)
	assert.Less(t, len(r.body), 2<<10, "the body")
	b := r.errBody(t)
	assert.Equal(t, "spec.node", b.Field)
	assert.Contains(t, b.Message, "bytes more)")
	assert.True(t, utf8.ValidString(b.Message))

	assert.Equal(t, "short", clipMessage("short"))
	long := strings.Repeat("a", maxMessage-1) + "é" + "tail"
	got := clipMessage(long)
	assert.True(t, utf8.ValidString(got), "not cut inside a character")
	assert.True(t, strings.HasPrefix(got, strings.Repeat("a", maxMessage-1)+"... ("), got[maxMessage-8:])
}
