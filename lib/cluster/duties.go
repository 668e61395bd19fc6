package cluster

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/cluster/internal/workqueue"
	"github.com/hf-fleet/hf/lib/internal/intern"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/types"
)

// Duty keys: what the rendezvous owner of the key among the live members
// looks after. When the owner dies its duties move to the next owner, who
// finds them queued by the membership change.
const (
	dutySet     = "set/"
	dutyEvent   = "event/"
	dutySession = "session/"
	dutyNode    = "node/"
	dutyCode    = "code/"
	dutyUser    = "user/"
)

// duties runs the cluster-wide reconciles: every MachineSet, ScheduledEvent
// and Session, and every member that is gone, is looked after by one node at
// a time. Work is per key, level-triggered, and asks to run again when the
// next limit trips (requeue after), so nothing lists a kind on a timer.
type duties struct {
	n *Node
	q *workqueue.Queue

	mu     sync.Mutex
	absent map[string]time.Time // member -> when this node first saw it gone
	// made are the provisioning claims this node wrote lately, by set: the
	// cache may not show them yet when the set is looked at again.
	made map[string]map[string]time.Time
}

func newDuties(n *Node) *duties {
	return &duties{n: n, q: workqueue.New(nil), absent: map[string]time.Time{}, made: map[string]map[string]time.Time{}}
}

// absentSince returns when this node first saw member absent, if it has.
func (d *duties) absentSince(member string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.absent[member]
	return t, ok
}

func (d *duties) start() { d.n.spawn(d.workLoop) }

// compact shrinks the duties' maps and queue to what they hold (see
// intern.Shrunk); the node's Cool calls it.
func (d *duties) compact() {
	d.mu.Lock()
	d.absent, d.made = intern.Shrunk(d.absent), intern.Shrunk(d.made)
	d.mu.Unlock()
	d.q.Compact()
}

func (d *duties) stop() { d.q.ShutDown() }

// changed queues the duties a change concerns. It never blocks.
func (d *duties) changed(kind, name string, old, obj types.Object) {
	switch kind {
	case types.KindMachineSet:
		d.q.Add(dutySet + name)
		for _, o := range []types.Object{old, obj} {
			if s, ok := o.(*types.MachineSet); ok {
				if ev := s.Metadata.Labels[scheduler.LabelScheduledEvent]; ev != "" {
					d.q.Add(dutyEvent + ev)
				}
			}
		}
	case types.KindScheduledEvent:
		d.q.Add(dutyEvent + name)
		// Sessions without a claim wait for their event: for the
		// template it names, or for its start (which may have moved).
		for _, s := range d.n.cache.Names(idxSessionWaiting, name) {
			d.q.Add(dutySession + s)
		}
	case types.KindSession:
		d.q.Add(dutySession + name)
		if se, ok := obj.(*types.Session); ok && old == nil && se.Spec.User != "" {
			d.q.Add(dutyUser + se.Spec.User) // made as its user went?
		}
	case types.KindUser:
		if obj == nil {
			d.q.Add(dutyUser + name)
		}
	case types.KindAccessCode:
		d.q.Add(dutyCode + name)
	case types.KindNode:
		d.q.Add(dutyNode + name)
	case types.KindMachine:
		for _, o := range []types.Object{old, obj} {
			if m, ok := o.(*types.Machine); ok {
				if m.Spec.MachineSet != "" {
					d.q.Add(dutySet + m.Spec.MachineSet)
				}
				if m.Spec.Node != d.n.cfg.Name && m.Spec.Node != "" { // "": an outside provider's machine
					d.q.Add(dutyNode + m.Spec.Node)
				}
			}
		}
	case types.KindMachineClaim:
		if c, ok := obj.(*types.MachineClaim); ok && old == nil && c.Spec.User != "" {
			d.q.Add(dutyUser + c.Spec.User) // made as its user went?
		}
		for _, o := range []types.Object{old, obj} {
			c, ok := o.(*types.MachineClaim)
			if !ok {
				continue
			}
			if set := c.Metadata.Labels[LabelProvisionFor]; set != "" {
				d.q.Add(dutySet + set)
			}
			if s := c.Metadata.Labels[LabelSession]; s != "" {
				d.q.Add(dutySession + s)
			}
			if c.Spec.ScheduledEvent != "" {
				d.q.Add(dutyEvent + c.Spec.ScheduledEvent)
			}
			if m := c.Status.Machine; m != "" {
				if mm, ok := d.n.machine(m); ok && mm.Spec.MachineSet != "" {
					d.q.Add(dutySet + mm.Spec.MachineSet)
				}
			}
		}
	}
}

// membersChanged queues every duty: some have another owner now. It never
// blocks.
func (d *duties) membersChanged() {
	now := d.n.cfg.Now()
	live := map[string]bool{}
	for _, m := range d.n.view.live() {
		live[m] = true
	}
	d.mu.Lock()
	for m := range d.absent {
		if live[m] {
			delete(d.absent, m)
		}
	}
	d.mu.Unlock()
	for _, name := range d.nodesKnown() {
		if !live[name] {
			d.mu.Lock()
			if _, ok := d.absent[name]; !ok {
				d.absent[name] = now
			}
			d.mu.Unlock()
		}
		d.q.Add(dutyNode + name)
	}
	for _, kind := range []struct{ kind, prefix string }{
		{types.KindMachineSet, dutySet}, {types.KindScheduledEvent, dutyEvent}, {types.KindSession, dutySession},
		{types.KindAccessCode, dutyCode},
	} {
		for _, o := range d.n.cache.List(kind.kind) {
			d.q.Add(kind.prefix + o.Meta().Name)
		}
	}
	for _, idx := range []string{idxClaimUser, idxSessionUser} {
		for user := range d.n.cache.Keys(idx) {
			d.q.Add(dutyUser + user)
		}
	}
}

// nodesKnown are the nodes whose gone duty may have work: those with a
// Node object and those that machines name. A Down node may be deleted
// (hf-cli node delete) before its machines are lost; they still wait for
// the verdict, and a quorum probe's answer must find them again.
func (d *duties) nodesKnown() []string {
	names := map[string]bool{}
	for _, o := range d.n.cache.List(types.KindNode) {
		names[o.Meta().Name] = true
	}
	for name := range d.n.cache.Keys(idxMachineNode) {
		if name != d.n.cfg.Name && name != "" { // "": an outside provider's machines
			names[name] = true
		}
	}
	return slices.Sorted(maps.Keys(names))
}

func (d *duties) workLoop() {
	for {
		key, ok := d.q.Get()
		if !ok {
			return
		}
		if d.n.view.mine(key) {
			if after := d.reconcile(key); after > 0 {
				d.q.AddAfter(key, after)
			}
		}
		d.q.Done(key)
	}
}

// reconcile runs one duty and says when to run it again (0: on changes only).
func (d *duties) reconcile(key string) time.Duration {
	switch {
	case strings.HasPrefix(key, dutySet):
		return d.reconcileSet(strings.TrimPrefix(key, dutySet))
	case strings.HasPrefix(key, dutyEvent):
		return d.reconcileEvent(strings.TrimPrefix(key, dutyEvent))
	case strings.HasPrefix(key, dutySession):
		return d.reconcileSession(strings.TrimPrefix(key, dutySession))
	case strings.HasPrefix(key, dutyNode):
		return d.reconcileGone(strings.TrimPrefix(key, dutyNode))
	case strings.HasPrefix(key, dutyCode):
		return d.reconcileCode(strings.TrimPrefix(key, dutyCode))
	case strings.HasPrefix(key, dutyUser):
		return d.reconcileUser(strings.TrimPrefix(key, dutyUser))
	}
	return 0
}

// until is the wait from now until t (0 for a zero or past t).
func until(now, t time.Time) time.Duration {
	if t.IsZero() || !t.After(now) {
		return 0
	}
	return t.Sub(now)
}
