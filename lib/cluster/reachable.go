package cluster

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// NodeView adds to o what this node's membership says of it and no record
// holds: the Reachable condition (see types.NodeStatus.Conditions). The
// phase stays the cluster's: a node with a majority passes the down
// verdict on a member it cannot reach, but one without a majority passes
// none, and would show the members it cannot reach as they last reported,
// Up. The condition is this node's view at the time of the call, for the
// API to answer with; it is never written. It changes with o's phase (a
// record change) and otherwise only when NodeViewChanged says so. Safe for
// concurrent use.
func (n *Node) NodeView(o *types.Node) {
	name := o.Metadata.Name
	live, known := n.view.members()
	_, alive := slices.BinarySearch(live, name)
	alive = alive || name == n.cfg.Name
	since, _ := n.duties.absentSince(name)
	cs, _ := o.Status.Conditions.Remove(types.ConditionReachable)
	o.Status.Conditions = append(cs, reachability(n.cfg.Name, o.Status.Phase, alive, len(live), known, since))
}

// NodeViewChanged returns a channel that is closed at the next change of
// what NodeView adds that no record change brings: a member joined, left or
// died (which moves the live and known counts, and when a member was first
// seen absent), or a Node object came or went (the known count). A watcher
// takes the channel before it reads NodeView, so a change in between closes
// the channel it waits on. Nothing else moves the view, as time passing
// does not: a verdict is due as soon as a member is absent from a
// majority's view, and view.members counts the known members again only
// when membership or the Node objects change. So the view costs nothing
// while membership holds. Safe for concurrent use; it never blocks.
func (n *Node) NodeViewChanged() <-chan struct{} { return n.viewNotice.wait() }

// reachability is the Reachable condition of a node whose phase is phase,
// as self sees it: alive says whether it is a live member (or self), live
// and known count the live and the known members (see view.members), since
// is when self first saw it absent (zero if not known).
func reachability(self string, phase types.NodePhase, alive bool, live, known int, since time.Time) types.Condition {
	c := types.Condition{Type: types.ConditionReachable, Status: types.ConditionTrue, Reason: types.ReasonMember,
		Message: "a live member as " + self + " sees it"}
	if alive {
		return c
	}
	c.Status, c.LastTransitionTime = types.ConditionFalse, since
	c.Reason, c.Message = types.ReasonUnreachable, "not a live member as "+self+" sees it"
	switch {
	case phase == types.NodeDown:
	case 2*live <= known:
		c.Reason = types.ReasonNoQuorum
		c.Message += fmt.Sprintf("; %s reaches %d of the %d members it knows, no majority: it passes no down verdict, and the phase is the last report that reached it", self, live, known)
	default:
		c.Message += fmt.Sprintf("; %s reaches %d of the %d members it knows, a majority: the down verdict is due", self, live, known)
	}
	return c
}

// notice wakes every waiter at once, by closing the channel they hold:
// however many wait, a notice costs one close, and nothing when none
// waits. The zero value is ready.
type notice struct {
	mu sync.Mutex
	ch chan struct{} // nil until someone waits
}

// wait returns the channel the next notify closes.
func (c *notice) wait() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil {
		c.ch = make(chan struct{})
	}
	return c.ch
}

// notify closes the channel of those waiting. It never blocks.
func (c *notice) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch != nil {
		close(c.ch)
		c.ch = nil
	}
}
