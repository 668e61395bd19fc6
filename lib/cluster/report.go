package cluster

import (
	"time"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// reportLoop keeps this node's Node object fresh: soon after every capacity
// change (coalesced) and on a heartbeat interval.
func (n *Node) reportLoop() {
	tick := time.NewTicker(n.cfg.ReportInterval)
	defer tick.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
		case <-n.reportQ:
		}
		if err := n.report(types.NodeUp); err != nil {
			n.log.Warn("report", "err", err)
		}
		// Coalesce bursts: every report is replicated to every member, and the
		// acceptor's own check, not the report, keeps capacity exact.
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(reportMinGap):
		}
	}
}

// reportMinGap is the least time between two reports of this node's capacity.
const reportMinGap = 100 * time.Millisecond

// report writes the Node object. Maintenance is kept as stored: it is set by
// operators through the API.
func (n *Node) report(phase types.NodePhase) error {
	now := n.cfg.Now()
	spec := types.NodeSpec{
		APIAddress: n.cfg.APIAddress, GossipAddress: n.cfg.GossipAddress,
		SoftwareVersion: n.cfg.SoftwareVersion,
	}
	machines := 0
	for _, name := range n.order {
		in := n.instances[name]
		_, _, count := n.ledger.usage(in.Name)
		machines += count
		status := "ok"
		if s, ok := in.Driver.(interface{ StatusText() string }); ok {
			status = s.StatusText()
		}
		spec.Drivers = append(spec.Drivers, types.NodeDriver{
			Name: in.Name, Driver: in.Type, Remote: in.Driver.IsRemote(), Status: status,
			Capacity: n.capacityOf(in),
		})
	}
	_, err := store.UpdateFacet(n.st, types.KindNode, n.cfg.Name, types.FacetReport, func(o *types.Node) error {
		spec.Maintenance = o.Spec.Maintenance
		o.Spec = spec
		o.Metadata.Labels = n.cfg.Labels
		o.Status = types.NodeStatus{Phase: phase, StartedAt: n.startedAt, Heartbeat: now, Machines: machines}
		if phase == types.NodeUp && spec.Maintenance {
			o.Status.Phase = types.NodeDraining
		}
		return nil
	})
	if err == nil {
		return nil
	}
	if !isNotFound(err) {
		return err
	}
	o := &types.Node{
		TypeMeta: types.TypeMeta{Kind: types.KindNode},
		Metadata: types.ObjectMeta{Name: n.cfg.Name, Labels: n.cfg.Labels},
		Spec:     spec,
		Status:   types.NodeStatus{Phase: phase, StartedAt: n.startedAt, Heartbeat: now, Machines: machines},
	}
	_, err = n.st.Put(o, store.PutOptions{Create: true})
	return err
}
