package cluster

import (
	"errors"
	"time"

	"github.com/hf-fleet/hf/lib/cluster/cache"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// reconcileGone looks after a known member that is not alive, for the
// rendezvous owner of "node/<name>": after DownAfter its Node object gets
// the down verdict, after LostGrace its live machines the lost verdict
// (their electors then re-bind or fail the claims, per onNodeLoss), and the
// records of its lost machines whose claims have moved on are deleted. Only
// a node that reaches a majority of the members it knows passes these
// verdicts: a node cut off on its own keeps serving what it holds but never
// takes over the others'. A member that comes back overrides the verdicts
// with its next report and write of its machines.
func (d *duties) reconcileGone(name string) time.Duration {
	n := d.n
	if name == n.cfg.Name || n.view.alive(name) {
		d.mu.Lock()
		delete(d.absent, name)
		d.mu.Unlock()
		return 0
	}
	now := n.cfg.Now()
	d.mu.Lock()
	since, ok := d.absent[name]
	if !ok {
		since = now
		d.absent[name] = now
	}
	d.mu.Unlock()
	if !n.view.quorum() {
		return 0 // looked at again when membership changes
	}
	gone := now.Sub(n.view.since(since))
	node, known := cacheNode(n, name)
	if known && gone >= n.cfg.DownAfter && !node.DownHolds() {
		d.markDown(node, gone)
	}
	machines := cache.TypedIndex[types.Machine](n.cache, idxMachineNode, name)
	left := false
	for _, m := range machines {
		switch {
		case m.LostHolds():
			if now.Sub(m.Status.Lost.At) >= lostKeep && d.sweep(m) {
				continue
			}
			left = true
		case !m.Live():
		case gone >= n.cfg.LostGrace:
			d.markLost(m, "node "+name+" is gone for "+gone.Round(time.Second).String())
			left = true
		default:
			left = true
		}
	}
	var next time.Duration
	switch {
	case known && !node.DownHolds() && gone < n.cfg.DownAfter:
		next = n.cfg.DownAfter - gone
	case left && gone < n.cfg.LostGrace:
		next = n.cfg.LostGrace - gone
	case left:
		next = 5 * time.Second // sweep what the electors have re-bound
	}
	return next
}

// markDown passes the down verdict on a gone node's Node object.
func (d *duties) markDown(node *types.Node, gone time.Duration) {
	n := d.n
	marked := false
	_, err := store.UpdateFacet(n.st, types.KindNode, node.Metadata.Name, types.FacetLiveness, func(o *types.Node) error {
		marked = false
		if o.DownHolds() {
			return store.ErrNoChange
		}
		o.Status.Down = &types.NodeVerdict{Reason: "gone for " + gone.Round(time.Second).String(), At: n.cfg.Now(), By: n.cfg.Name,
			Report: o.Metadata.Facets.Get(types.FacetReport), Was: o.Status.Phase}
		marked = true
		return nil
	})
	if err != nil && !isNotFound(err) {
		n.log.Warn("mark node down", "member", node.Metadata.Name, "err", err)
		return
	}
	if err != nil || !marked {
		return // gone, or the verdict was in the store before the cache
	}
	n.log.Info("node marked down", "member", node.Metadata.Name)
}

// markLost passes the lost verdict on a gone node's machine.
func (d *duties) markLost(m *types.Machine, reason string) {
	n := d.n
	// marked: this call wrote the verdict. The duty runs on the cache,
	// which may not hold the verdict it wrote a moment ago; the store
	// answers ErrNoChange then, and the loss was counted already.
	marked := false
	_, err := store.UpdateFacet(n.st, types.KindMachine, m.Metadata.Name, types.FacetLost, func(o *types.Machine) error {
		marked = false
		if o.LostHolds() {
			return store.ErrNoChange
		}
		o.Status.Lost = &types.MachineVerdict{Reason: reason, At: n.cfg.Now(), By: n.cfg.Name,
			Owner: o.Metadata.Facets.Get(types.FacetOwner), Was: o.Status.Phase, WasReason: o.Status.Reason}
		marked = true
		return nil
	})
	if err != nil && !isNotFound(err) {
		n.log.Warn("mark machine lost", "machine", m.Metadata.Name, "err", err)
		return
	}
	if err != nil || !marked {
		return
	}
	n.metrics.lost.Inc()
	n.log.Info("machine lost", "machine", m.Metadata.Name, "claim", m.Spec.Claim, "reason", reason)
}

// lostKeep is how long a lost machine's record stays after the verdict,
// for people to see what was lost, before sweep may delete it.
const lostKeep = 30 * time.Second

// sweep deletes the record of a gone node's lost machine once nothing needs
// it: its claim is gone, over or at a later round, or it was a warm machine.
// The node that owned it, if it comes back, finds its ledger entry without a
// record and releases the machine.
func (d *duties) sweep(m *types.Machine) bool {
	n := d.n
	if m.Spec.Claim != "" {
		if c, ok := n.claim(m.Spec.Claim); ok {
			cs := n.claimState(c)
			over := c.Status.Phase == types.ClaimTerminated || c.Status.Phase == types.ClaimFailed
			if !over && cs.Round() <= m.Spec.Round {
				return false
			}
		}
	}
	if _, err := n.st.Delete(types.KindMachine, m.Metadata.Name, m.Metadata.Version); err != nil && !isNotFound(err) && !errors.Is(err, store.ErrConflict) {
		n.log.Warn("sweep lost machine", "machine", m.Metadata.Name, "err", err)
		return false
	}
	return true
}
