package openapi

import (
	"encoding/json"
	"fmt"
	"net/http"

	fastjson "github.com/goccy/go-json"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Node objects are made by the nodes themselves: each hf-node writes its
// own report facet (lib/cluster/reporter.go), and the API writes only the
// maintenance flag. A Node made through the API would be no node: nothing
// reports for it, it reads Down for ever, and a node of that name that
// starts later takes it over.

// errNodeCreate answers a POST of a Node.
var errNodeCreate = newErr(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "",
	"nodes are made by the nodes themselves: start hf-node (with --join to add a host to this cluster) and it reports itself")

// checkMachineCreate refuses a Machine created through the API that names
// what a node writes of the machines it makes: the node (spec.node, the
// label hf/node), its driver instance there, the claim and round it
// allocated the machine for (spec.claim, spec.round, the label hf/claim).
// A node makes its machines when it allocates them and is their only
// writer; a record naming a node that never made it showed a machine
// nobody holds, counted in its set and its node's machines, whose reap or
// release that node never carried out. Through the API a Machine is an
// external one, as the proposal writes it, naming none of these. Refused
// whatever the role, as a write of a part the cluster owns is (403); the
// message names the field too, as clients show a 403's message alone.
func checkMachineCreate(o types.Object) error {
	m, ok := o.(*types.Machine)
	if !ok {
		return nil
	}
	const why = "is written by the node that makes the machine, when it allocates it; a Machine created through the API is an external one, which names no node, driver, claim or round"
	for _, f := range []struct {
		field string
		set   bool
		value any
	}{
		{"spec.node", m.Spec.Node != "", m.Spec.Node},
		{"spec.driver", m.Spec.Driver != "", m.Spec.Driver},
		{"spec.claim", m.Spec.Claim != "", m.Spec.Claim},
		{"spec.round", m.Spec.Round != 0, m.Spec.Round},
	} {
		if f.set {
			return forbidden(f.field, "%s %s (got %q)", f.field, why, fmt.Sprint(f.value))
		}
	}
	for _, l := range []string{types.LabelNode, types.LabelClaim} {
		if v, ok := m.Metadata.Labels[l]; ok {
			return forbidden("metadata.labels."+l, "label %s %s (got %q)", l, why, v)
		}
	}
	return nil
}

// presentView is present, with this node's own view added to a Node
// (Config.NodeView): whether it reaches it. The phase is the cluster's,
// the same on every node; a node cut off from the others passes no
// verdict on them and would show them Up.
func (s *Server) presentView(p Principal, rec store.Record, obj types.Object) (json.RawMessage, error) {
	n, ok := obj.(*types.Node)
	if !ok || s.cfg.NodeView == nil {
		return present(p, rec, obj)
	}
	return fastjson.Marshal(s.withView(n))
}

// withView returns a copy of n with this node's own view added
// (Config.NodeView), or n itself when there is none. n is not changed: it
// may be shared (a stream's event is decoded once for every stream).
func (s *Server) withView(n *types.Node) *types.Node {
	if s.cfg.NodeView == nil {
		return n
	}
	c := *n // NodeView replaces the conditions, and touches nothing else
	s.cfg.NodeView(&c)
	return &c
}

// checkNodeDown refuses to delete a node that is Up (or Draining): it
// reports again within a heartbeat and is back at once, with a new
// createdAt. A node that is stopped (it reported Down) or gone (the down
// verdict) may be deleted; one that never reported too. So may, with
// force, one that is not a live member as this node sees it (Config.
// NodeView): a node that cannot reach a majority passes no down verdict,
// so in a cluster of two the survivor never finds its dead peer Down, and
// without force its operator could neither delete the peer nor get its
// machines' claims bound again (the peer stays among the members whose
// majority the verdicts need, for ever).
func (s *Server) checkNodeDown(o types.Object, force bool) error {
	n, ok := o.(*types.Node)
	if !ok || (n.Status.Phase != types.NodeUp && n.Status.Phase != types.NodeDraining) {
		return nil
	}
	name := n.Metadata.Name
	if reach := s.withView(n).Status.Conditions.Get(types.ConditionReachable); reach != nil && reach.Status == types.ConditionFalse && n.Metadata.Name != s.cfg.NodeName {
		if force {
			return nil
		}
		return newErr(http.StatusConflict, CodeConflict, "", "node %s is %s by its last report, and node %s cannot reach it (%s): if it is gone for good, delete it with ?force=true (hf-cli node delete %s --force); if it comes back, it reports itself again",
			name, n.Status.Phase, s.cfg.NodeName, reach.Reason, name)
	}
	return newErr(http.StatusConflict, CodeConflict, "", "node %s is %s: it would report itself again at once; stop hf-node on it first (it then reads Down and may be deleted), or drain it (hf-cli node drain %s) to stop new placements on it",
		name, n.Status.Phase, name)
}
