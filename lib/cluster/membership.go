package cluster

import (
	"errors"
	"time"

	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// MembershipChanged tells the node that a member joined, left or died. It never
// blocks (memberlist's event callbacks call it).
func (n *Node) MembershipChanged() {
	select {
	case n.memberQ <- struct{}{}:
	default:
	}
}

// duty is the key whose rendezvous owner looks after a node that cannot look
// after itself (marking it down, declaring its machines lost).
func duty(node string) string { return "node/" + node }

// memberLoop reacts to membership changes: the elector learns of dead nodes,
// claims whose elector moved are picked up, dead nodes are marked Down after
// DownAfter and their machines Lost after LostGrace.
func (n *Node) memberLoop() {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	prev := map[string]bool{}
	for _, m := range n.peers.Members() {
		prev[m] = true
	}
	absent := map[string]time.Time{} // node -> first seen absent
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.memberQ:
			now := n.cfg.Now()
			cur := map[string]bool{}
			for _, m := range n.peers.Members() {
				cur[m] = true
			}
			changed := false
			for m := range prev {
				if !cur[m] {
					changed = true
					n.log.Info("member gone", "member", m)
					n.elect.Push(electEvent{in: scheduler.NodeDown{Node: m}})
					if _, ok := absent[m]; !ok {
						absent[m] = now
					}
				}
			}
			for m := range cur {
				if !prev[m] {
					changed = true
					n.log.Info("member joined", "member", m)
					delete(absent, m)
				}
			}
			prev = cur
			if changed {
				// Report ourselves (a partition may have marked us down) and look
				// at every claim again: some may have a new elector now.
				select {
				case n.reportQ <- struct{}{}:
				default:
				}
				n.resync()
				n.kickSets()
			}
			n.checkAbsent(cur, absent)
		case <-tick.C:
			cur := map[string]bool{}
			for _, m := range n.peers.Members() {
				cur[m] = true
			}
			n.checkAbsent(cur, absent)
		}
	}
}

// checkAbsent marks Node objects of absent members Down and, after LostGrace,
// their machines Lost, when this node holds the duty for them.
func (n *Node) checkAbsent(cur map[string]bool, absent map[string]time.Time) {
	nodes, err := store.List[types.Node](n.st, types.KindNode)
	if err != nil {
		n.log.Warn("list nodes", "err", err)
		return
	}
	machines, err := store.List[types.Machine](n.st, types.KindMachine)
	if err != nil {
		n.log.Warn("list machines", "err", err)
		return
	}
	// Every node we know of: by its Node object, or only by machines it owns
	// (its Node object may not have reached us before it went away).
	phase := map[string]types.NodePhase{}
	for _, o := range nodes {
		phase[o.Metadata.Name] = o.Status.Phase
	}
	for _, m := range machines {
		if _, ok := phase[m.Spec.Node]; !ok && m.Live() {
			phase[m.Spec.Node] = ""
		}
	}
	now := n.cfg.Now()
	members := n.peers.Members()
	for name, ph := range phase {
		if cur[name] {
			delete(absent, name)
			continue
		}
		since, ok := absent[name]
		if !ok {
			absent[name] = now
			continue
		}
		if scheduler.Owner(duty(name), members) != n.cfg.Name {
			continue
		}
		if ph != types.NodeDown && ph != "" && now.Sub(since) >= n.cfg.DownAfter {
			n.markDown(name)
		}
		if now.Sub(since) >= n.cfg.LostGrace {
			n.loseMachinesOf(name, now.Sub(since))
		}
	}
}

func (n *Node) markDown(name string) {
	_, err := store.Update(n.st, types.KindNode, name, func(o *types.Node) error {
		if o.Status.Phase == types.NodeDown {
			return store.ErrNoChange
		}
		o.Status.Phase = types.NodeDown
		return nil
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		n.log.Warn("mark node down", "member", name, "err", err)
		return
	}
	n.log.Info("node marked down", "member", name)
}

// loseMachinesOf marks the live machines of a dead node Lost and applies their
// templates' policy to their claims.
func (n *Node) loseMachinesOf(node string, gone time.Duration) {
	machines, err := store.List[types.Machine](n.st, types.KindMachine)
	if err != nil {
		n.log.Warn("list machines", "err", err)
		return
	}
	for _, m := range machines {
		if m.Spec.Node != node || !m.Live() {
			continue
		}
		n.machineLost(m, "node "+node+" is gone for "+gone.Round(time.Second).String())
	}
}

// sweepLost removes Lost machine records nobody needs any more: their claim is
// gone or bound to another machine. Each record is swept by its node, or by the
// duty owner when the node is not a member.
func (n *Node) sweepLost() {
	machines, err := store.List[types.Machine](n.st, types.KindMachine)
	if err != nil {
		return
	}
	members := n.peers.Members()
	alive := map[string]bool{}
	for _, m := range members {
		alive[m] = true
	}
	for _, m := range machines {
		if m.Status.Phase != types.MachineLost {
			continue
		}
		owner := m.Spec.Node
		if !alive[owner] {
			owner = scheduler.Owner(duty(m.Spec.Node), members)
		}
		if owner != n.cfg.Name {
			continue
		}
		c, err := store.Get[types.MachineClaim](n.st, types.KindMachineClaim, m.Spec.Claim)
		if err == nil && c.Status.Machine == m.Metadata.Name {
			continue
		}
		if _, err := n.st.Delete(types.KindMachine, m.Metadata.Name, m.Metadata.Version); err != nil &&
			!errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrConflict) {
			n.log.Warn("sweep lost machine", "machine", m.Metadata.Name, "err", err)
		}
	}
}
