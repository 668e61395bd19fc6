package cluster

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// setReconcileEvery is how often each owned MachineSet is reconciled even
// when nothing seems to change (limits run out with time).
const setReconcileEvery = time.Second

// kickSets asks the set loop to look again. It never blocks.
func (n *Node) kickSets() {
	select {
	case n.setQ <- struct{}{}:
	default:
	}
}

// setLoop runs the reconcile of every MachineSet this node owns (rendezvous
// owner of "set/<name>" over live members, so a dead owner's sets move on by
// themselves): level-triggered, idempotent, planned by scheduler.PlanMachineSet.
func (n *Node) setLoop() {
	n.every(setReconcileEvery, n.setQ, func() {
		n.reconcileEvents()
		n.reconcileSessions()
		n.reconcileSets()
		n.reviewWaiting()
	})
}

// reconcileSets reconciles the sets this node owns.
func (n *Node) reconcileSets() {
	sets, err := store.List[types.MachineSet](n.st, types.KindMachineSet)
	if err != nil || len(sets) == 0 {
		return
	}
	members := n.peers.Members()
	var mine []*types.MachineSet
	for _, s := range sets {
		if scheduler.Owner("set/"+s.Metadata.Name, members) == n.cfg.Name {
			mine = append(mine, s)
		}
	}
	if len(mine) == 0 {
		return
	}
	machines, err := store.List[types.Machine](n.st, types.KindMachine)
	if err != nil {
		return
	}
	claims, err := store.List[types.MachineClaim](n.st, types.KindMachineClaim)
	if err != nil {
		return
	}
	mVals := make([]types.Machine, 0, len(machines))
	holding := map[string]bool{} // claims with a live machine this node has seen
	for _, m := range machines {
		mVals = append(mVals, *m)
		if m.Live() && m.Spec.Claim != "" {
			holding[m.Spec.Claim] = true
		}
	}
	cVals := make([]types.MachineClaim, 0, len(claims))
	// set -> provisioning claims whose machine this node has not seen yet:
	// unassigned, or accepted by a node whose reservation has not reached us
	// (the claim's update may arrive before the machine record).
	pending := map[string]int{}
	for _, c := range claims {
		cVals = append(cVals, *c)
		if set := c.Metadata.Labels[LabelProvisionFor]; set != "" && requested(c) && !holding[c.Metadata.Name] {
			pending[set]++
		}
	}
	now := n.cfg.Now()
	activity := n.machineActivity(now, claims, machines)
	for _, s := range mine {
		plan := scheduler.PlanMachineSet(now, *s, mVals, cVals, activity, n.poolLimits())
		for i := plan.Create - pending[s.Metadata.Name]; i > 0; i-- {
			n.provision(s)
		}
		for _, d := range plan.Delete {
			n.reap(d)
		}
		if plan.Status != s.Status {
			_, err := store.UpdateFacet(n.st, types.KindMachineSet, s.Metadata.Name, types.FacetStatus, func(o *types.MachineSet) error {
				if o.Status == plan.Status {
					return store.ErrNoChange
				}
				o.Status = plan.Status
				return nil
			})
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				n.log.Warn("set status", "set", s.Metadata.Name, "err", err)
			}
		}
	}
}

// reviewWaiting looks again at claims that wait outside the elector: for a
// set (required sets full or empty) or under an environment cap, since a
// machine may have been released or become ready since; and fails those of
// them whose bind timeout passed, as the elector does for its own. Without
// sets or environment caps there are none, and it costs two short lists.
func (n *Node) reviewWaiting() {
	sets, err := store.List[types.MachineSet](n.st, types.KindMachineSet)
	if err != nil {
		return
	}
	envs, err := store.List[types.Environment](n.st, types.KindEnvironment)
	if err != nil {
		return
	}
	capped := map[string]bool{} // env/template
	for _, e := range envs {
		for t := range e.Spec.Capacity {
			capped[capKey(e.Metadata.Name, t)] = true
		}
	}
	n.pool.mu.Lock()
	waiting := len(n.pool.waiting) > 0
	n.pool.mu.Unlock()
	if len(sets) == 0 && len(capped) == 0 && !waiting {
		return
	}
	claims, err := store.List[types.MachineClaim](n.st, types.KindMachineClaim)
	if err != nil {
		return
	}
	now := n.cfg.Now()
	for _, c := range claims {
		if !requested(c) || c.Status.Node != "" {
			n.pool.mu.Lock()
			delete(n.pool.waiting, c.Metadata.Name)
			n.pool.mu.Unlock()
			continue
		}
		waits := c.Spec.BindStrategy == types.BindRequireMachineSets || capped[capKey(c.Spec.Environment, c.Spec.MachineTemplate)]
		if !waits {
			continue
		}
		// A grace of one offer timeout lets an elector that has the claim
		// fail it itself, with its own reason.
		if now.After(c.Metadata.CreatedAt.Add(n.bindTimeout(c) + n.cfg.OfferTimeout)) {
			if n.isElector(c.Metadata.Name) {
				n.failClaim(c.Metadata.Name, "not bound within its bind timeout of "+n.bindTimeout(c).String()+": "+cmp.Or(c.Status.Reason, "nothing could take it"))
			}
			continue
		}
		n.onClaim(c)
	}
}

// provision creates a claim whose machine, once running, joins the set warm.
// The claim is elected like any other, so pool machines are spread over the
// cluster by the same placement rules.
func (n *Node) provision(s *types.MachineSet) {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	prefix := s.Metadata.Name
	if len(prefix) > types.MaxNameLen-9 {
		prefix = prefix[:types.MaxNameLen-9]
	}
	c := &types.MachineClaim{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
		Metadata: types.ObjectMeta{Name: prefix + "-" + hex.EncodeToString(b), Labels: map[string]string{LabelProvisionFor: s.Metadata.Name}},
		Spec: types.MachineClaimSpec{
			MachineTemplate: s.Spec.MachineTemplate, Environment: s.Spec.Environment,
			BindTimeout: types.D(10 * time.Minute),
		},
		Status: types.MachineClaimStatus{Phase: types.ClaimRequested},
	}
	c.Status.PhaseTimes.Mark(string(types.ClaimRequested), n.cfg.Now())
	if _, err := n.st.Put(c, store.PutOptions{Create: true}); err != nil {
		n.log.Warn("provision pool machine", "set", s.Metadata.Name, "err", err)
		return
	}
	n.log.Debug("provisioning pool machine", "set", s.Metadata.Name, "claim", c.Metadata.Name)
}

// reap ends a set's machine as the plan says: its claim (if the plan names
// one) is terminated, and the machine record deleted, which makes its node
// release it.
func (n *Node) reap(d scheduler.Deletion) {
	if d.Claim != "" {
		_, err := store.Update(n.st, types.KindMachineClaim, d.Claim, func(c *types.MachineClaim) error {
			if c.Status.Phase == types.ClaimTerminated {
				return store.ErrNoChange
			}
			c.Status.Phase = types.ClaimTerminated
			c.Status.Reason = d.Message
			c.Status.PhaseTimes.Mark(string(types.ClaimTerminated), n.cfg.Now())
			return nil
		})
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			n.log.Warn("reap claim", "claim", d.Claim, "err", err)
		}
	}
	if _, err := n.st.Delete(types.KindMachine, d.Machine, types.Version{}); err != nil && !errors.Is(err, store.ErrNotFound) {
		n.log.Warn("reap machine", "machine", d.Machine, "err", err)
		return
	}
	n.log.Info("pool machine reaped", "machine", d.Machine, "reason", d.Reason)
}

// machineActivity is the last sign of use of each machine: what its driver
// saw (Status.LastActivity, written by its node) or, for a machine that a
// session's claim holds, the session's last keepalive, whichever is later. A
// paused machine counts as in use now: its session asked to keep it, and idle
// reaping would undo that (maxAssigned still applies).
func (n *Node) machineActivity(now time.Time, claims []*types.MachineClaim, machines []*types.Machine) map[string]time.Time {
	out := map[string]time.Time{}
	for _, m := range machines {
		switch {
		case m.Status.Paused:
			out[m.Metadata.Name] = now
		case !m.Status.LastActivity.IsZero():
			out[m.Metadata.Name] = m.Status.LastActivity
		}
	}
	sessions, err := store.List[types.Session](n.st, types.KindSession)
	if err != nil || len(sessions) == 0 {
		return out
	}
	machineOf := map[string]string{}
	for _, c := range claims {
		if c.Status.Machine != "" {
			machineOf[c.Metadata.Name] = c.Status.Machine
		}
	}
	for _, s := range sessions {
		if m := machineOf[s.Status.MachineClaim]; m != "" && s.LastSeen().After(out[m]) {
			out[m] = s.LastSeen()
		}
	}
	return out
}
