package openapi

import (
	"slices"

	fastjson "github.com/goccy/go-json"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// A stream's Nodes carry this node's view of them (Config.NodeView: the
// Reachable condition), as the node list and get do. That view moves with
// membership, not with records: a node that loses its majority sees the
// others go unreachable while their records stay Up. So a stream keeps
// each Node it sent with the view it went with, and when NodeViewChanged
// says the view moved it sends again, as a put of the same record (its
// version and seq), each Node whose view is no longer the one sent. A
// change of membership costs a stream one view per Node it sent, and an
// idle cluster nothing.

// sentNode is a Node a stream sent, or is to send: its record, and the
// view it went with.
type sentNode struct {
	seq     uint64
	version types.Version
	obj     *types.Node // shared with other streams: read only
	reach   types.Condition
	// due: not sent yet (seedNodes); the next viewChanged sends it.
	due bool
}

// putNode returns the put of Node n (its record's seq and version) with
// this node's view v of it (f.view(n)), and notes it as sent.
func (f *streamFilter) putNode(n, v *types.Node, seq uint64, version types.Version) (WatchEvent, error) {
	data, err := fastjson.Marshal(v)
	if err != nil {
		return WatchEvent{}, err
	}
	f.nodes[n.Metadata.Name] = sentNode{seq: seq, version: version, obj: n, reach: reachOf(v)}
	return WatchEvent{Type: WatchPut, Kind: types.KindNode, Name: n.Metadata.Name, Seq: seq, Version: version.String(), Object: data}, nil
}

// reachOf is n's Reachable condition, zero when it has none.
func reachOf(n *types.Node) types.Condition {
	if c := n.Status.Conditions.Get(types.ConditionReachable); c != nil {
		return *c
	}
	return types.Condition{}
}

// stale reports whether a Node's event is older than what the stream sent
// of it (seedNodes read it from the store after the event was queued).
func (f *streamFilter) stale(rec store.Record) bool {
	if f.nodes == nil || rec.Kind != types.KindNode {
		return false
	}
	s, ok := f.nodes[rec.Name]
	return ok && rec.Seq <= s.seq
}

// viewChanged returns a put of each Node the stream sent whose view, as
// this node has it now, is not the one it went with, in name order.
func (f *streamFilter) viewChanged(warn func(string, ...any)) []WatchEvent {
	if f.nodes == nil {
		return nil
	}
	names := make([]string, 0, len(f.nodes))
	for name := range f.nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []WatchEvent
	for _, name := range names {
		s := f.nodes[name]
		v := f.view(s.obj)
		if !s.due && sameCondition(reachOf(v), s.reach) {
			continue
		}
		ev, err := f.putNode(s.obj, v, s.seq, s.version)
		if err != nil {
			warn("watch: unassembled record", "kind", types.KindNode, "name", name, "err", err)
			continue
		}
		out = append(out, ev)
	}
	return out
}

// seedNodes takes every Node of the store that the stream would send as
// sent: with the view of now when the client lists again (resync), or with
// none, which the next viewChanged sends, when the stream resumes (its
// replay sends only the Nodes whose records changed since, and the view
// of the others may have moved while the client was away).
func (f *streamFilter) seedNodes(st *store.Store, listed bool, warn func(string, ...any)) error {
	if f.nodes == nil {
		return nil
	}
	f.nodes = map[string]sentNode{}
	return st.Each(types.KindNode, func(rec store.Record) error {
		obj, err := store.Decode(rec)
		if err != nil {
			warn("watch: undecodable record", "kind", rec.Kind, "name", rec.Name, "err", err)
			return nil
		}
		n, ok := obj.(*types.Node)
		if !ok {
			return nil
		}
		if f.filters() {
			if !f.sel.matches(n) {
				return nil
			}
			f.matched[types.KindNode+"/"+rec.Name] = true
		}
		s := sentNode{seq: rec.Seq, version: rec.Version, obj: n, due: !listed}
		if listed {
			s.reach = reachOf(f.view(n))
		}
		f.nodes[rec.Name] = s
		return nil
	})
}

// sameCondition reports whether a and b say the same.
func sameCondition(a, b types.Condition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message &&
		a.LastTransitionTime.Equal(b.LastTransitionTime) && a.LastUpdateTime.Equal(b.LastUpdateTime)
}
