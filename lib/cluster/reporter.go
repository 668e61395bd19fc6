package cluster

import (
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// reportMinGap is the least time between two reports of this node's capacity:
// every report is replicated to every member, and the acceptor's own check,
// not the report, keeps capacity exact.
const reportMinGap = 100 * time.Millisecond

// reporter keeps this node's Node object (its report facet) fresh: soon
// after every capacity change and membership change (a (re)join among
// them), coalesced, on a heartbeat interval, and at once when a down
// verdict on this node, which runs, holds (see answer).
type reporter struct {
	n  *Node
	ch chan struct{}

	mu sync.Mutex
	// answered is when a verdict was last answered (see answer).
	answered time.Time
}

func newReporter(n *Node) *reporter { return &reporter{n: n, ch: make(chan struct{}, 1)} }

// kick asks for a report soon. It never blocks.
func (r *reporter) kick() {
	select {
	case r.ch <- struct{}{}:
	default:
	}
}

// answer is told that the down verdict on this node holds while it runs: a
// member wrongly found it gone (it was slow to answer probes, or its
// report crossed the verdict as it came back), and it would read Down
// everywhere until its next heartbeat. It asks for a report at once, which
// ends the verdict, at most once per ReportInterval (see answerDue). It
// never blocks.
func (r *reporter) answer() {
	now := r.n.cfg.Now()
	r.mu.Lock()
	due := answerDue(now, r.answered, r.n.cfg.ReportInterval)
	if due {
		r.answered = now
	}
	r.mu.Unlock()
	if due {
		r.kick()
	}
}

// answerDue says whether a down verdict seen at now is answered at once,
// the last one having been answered at last. The verdict is passed on what
// membership says, and answering every one could loop: a majority that
// cannot reach this node but gets its reports (a link that works one way,
// or through a third node) passes a new verdict on each report. Then the
// node answers the first at once and the others with its heartbeat, so
// such a node costs at most twice its heartbeat's writes, and reads Down
// between them, as the majority sees it.
func answerDue(now, last time.Time, gap time.Duration) bool {
	return last.IsZero() || now.Sub(last) >= gap || now.Before(last)
}

func (r *reporter) start() { r.n.spawn(r.loop) }

func (r *reporter) loop() {
	tick := time.NewTicker(r.n.cfg.ReportInterval)
	defer tick.Stop()
	for {
		select {
		case <-r.n.ctx.Done():
			return
		case <-tick.C:
		case <-r.ch:
		}
		if err := r.report(types.NodeUp); err != nil {
			r.n.refused.refused(writeReport, r.n.cfg.Name, err, r.n.cfg.ReportInterval)
		} else {
			r.n.refused.settled(writeReport, r.n.cfg.Name)
		}
		select {
		case <-r.n.ctx.Done():
			return
		case <-time.After(reportMinGap):
		}
	}
}

// report writes the report facet: addresses, drivers and their capacity, and
// phase (Up, or Down when the node stops). The maintenance flag and the down
// verdict are other facets; reporting overrides a down verdict.
func (r *reporter) report(phase types.NodePhase) error {
	n := r.n
	now := n.cfg.Now()
	spec := types.NodeSpec{
		APIAddress: n.cfg.APIAddress, GossipAddress: n.cfg.GossipAddress,
		SoftwareVersion: n.cfg.SoftwareVersion,
	}
	machines := 0
	for _, name := range n.order {
		in := n.instances[name]
		capa, count := n.acc.capacityOf(in)
		machines += count
		status := "ok"
		if s, ok := in.Driver.(interface{ StatusText() string }); ok {
			status = s.StatusText()
		}
		nd := types.NodeDriver{Name: in.Name, Driver: in.Type, Remote: in.Driver.IsRemote(), Status: status, Capacity: capa}
		if g, ok := in.Driver.(drivers.GroupLimiter); ok {
			nd.AllowedGroups = append([]string{}, g.AllowedGroups()...)
		}
		spec.Drivers = append(spec.Drivers, nd)
	}
	status := types.NodeStatus{Phase: phase, StartedAt: n.startedAt, Heartbeat: now, Machines: machines}
	_, err := store.UpdateFacet(n.st, types.KindNode, n.cfg.Name, types.FacetReport, func(o *types.Node) error {
		spec.Maintenance = o.Spec.Maintenance
		status.Down = o.Status.Down
		o.Spec, o.Status, o.Metadata.Labels = spec, status, n.cfg.Labels
		return nil
	})
	if err == nil || !isNotFound(err) {
		return err
	}
	o := &types.Node{
		TypeMeta: types.TypeMeta{Kind: types.KindNode},
		Metadata: types.ObjectMeta{Name: n.cfg.Name, Labels: n.cfg.Labels},
		Spec:     spec,
		Status:   status,
	}
	_, err = n.st.Put(o, store.PutOptions{Create: true, Facets: []string{types.FacetReport}})
	return err
}
