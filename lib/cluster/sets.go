package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/hf-fleet/hf/lib/cluster/cache"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// reconcileSet runs one MachineSet as scheduler.PlanMachineSet says:
// provisioning claims for the machines it lacks, reap requests for the
// machines it drops (and end requests for their claims when a limit ended
// them), the set's status; and it deletes its provisioning claims once they
// are over. It asks to run again when the plan's next limit trips.
func (d *duties) reconcileSet(name string) time.Duration {
	n := d.n
	now := n.cfg.Now()
	provisioning := cache.TypedIndex[types.MachineClaim](n.cache, idxClaimSet, name)
	for _, c := range provisioning {
		if c.Status.Phase == types.ClaimTerminated || c.Status.Phase == types.ClaimFailed {
			// Its machine joined the set (or it failed): the claim was only
			// the vehicle, and this owner made it.
			if _, err := n.st.Delete(types.KindMachineClaim, c.Metadata.Name, c.Metadata.Version); err != nil && !isNotFound(err) && !errors.Is(err, store.ErrConflict) {
				n.log.Warn("delete provisioning claim", "claim", c.Metadata.Name, "err", err)
			}
		}
	}
	s, ok := cache.Typed[types.MachineSet](n.cache, types.KindMachineSet, name)
	if !ok {
		// The set was deleted: its warm machines go (claimed ones go with
		// their claims).
		for _, m := range cache.TypedIndex[types.Machine](n.cache, idxMachineSet, name) {
			if m.Spec.Claim == "" && m.Status.Reap == nil {
				d.reap(scheduler.Deletion{Machine: m.Metadata.Name, Reason: "SetDeleted", Message: "machine set " + name + " was deleted"})
			}
		}
		return 0
	}
	// A provisioning claim still waiting for a machine of what the set no
	// longer wants (its template or environment changed) goes: it would
	// make an outdated machine, or wait for good on an environment the set
	// left.
	provisioning = slices.DeleteFunc(provisioning, func(c *types.MachineClaim) bool {
		if c.Status.Phase != types.ClaimRequested || (c.Spec.MachineTemplate == s.Spec.MachineTemplate && c.Spec.Environment == s.Spec.Environment) {
			return false
		}
		if _, err := n.st.Delete(types.KindMachineClaim, c.Metadata.Name, c.Metadata.Version); err != nil && !isNotFound(err) && !errors.Is(err, store.ErrConflict) {
			n.log.Warn("delete outdated provisioning claim", "claim", c.Metadata.Name, "err", err)
		}
		return true
	})
	machines := cache.TypedIndex[types.Machine](n.cache, idxMachineSet, name)
	mVals := make([]types.Machine, 0, len(machines))
	var cVals []types.MachineClaim
	users := d.sharedUsers(s)
	for _, m := range machines {
		mVals = append(mVals, *m)
		if u := users[m.Metadata.Name]; len(u) > 0 && m.Spec.Claim == "" {
			// A shared machine in use counts as assigned (to its first
			// user, for the set's limits): it is not reaped as warm while
			// the event's users work on it.
			mVals[len(mVals)-1].Spec.Claim = u[0].Metadata.Name
			cVals = append(cVals, *u[0])
			continue
		}
		if m.Live() && m.Spec.Claim != "" {
			if c, ok := n.claim(m.Spec.Claim); ok {
				cVals = append(cVals, *c)
			}
		}
	}
	// Provisioning claims whose machine this node has not seen yet: the
	// claim's acceptance, or its end once the machine joined the set, may
	// arrive before the machine record.
	seen := make(map[string]bool, len(machines))
	for _, m := range machines {
		seen[m.Metadata.Name] = true
	}
	pending := d.unseen(name, provisioning, now)
	// Why a provisioning claim waits for a node: the first one's by name, so
	// the set's condition does not change with the index's order.
	waiting, waitingClaim := "", ""
	for _, c := range provisioning {
		cVals = append(cVals, *c)
		switch b := c.Status.Binding; {
		case c.Status.Phase == types.ClaimRequested:
			// Waiting for its election, or its machine is being made:
			// that machine joins the set warm once it runs, so it is one
			// on its way, not a claimed machine to replace.
			pending++
			if e := c.Status.Election; e != nil && e.Node == "" && e.Reason != "" && (waitingClaim == "" || c.Metadata.Name < waitingClaim) {
				waiting, waitingClaim = e.Reason, c.Metadata.Name
			}
		case b != nil && b.Machine != "" && !seen[b.Machine] && b.Phase == types.BindingEnded:
			pending++
		}
	}
	plan := scheduler.PlanMachineSet(now, *s, mVals, cVals, d.activity(now, machines), n.poolLimits())
	for i := plan.Create - pending; i > 0; i-- {
		d.provision(s)
	}
	for _, del := range plan.Delete {
		d.reap(del)
	}
	plan.Status = scheduler.WithFilled(now, *s, plan.Status, max(pending, plan.Create), waiting)
	if !reflect.DeepEqual(plan.Status, s.Status) {
		if _, err := store.UpdateFacet(n.st, types.KindMachineSet, name, types.FacetStatus, func(o *types.MachineSet) error {
			if reflect.DeepEqual(o.Status, plan.Status) {
				return store.ErrNoChange
			}
			o.Status = plan.Status
			return nil
		}); err != nil && !isNotFound(err) {
			n.log.Warn("set status", "set", name, "err", err)
		}
	}
	return until(now, plan.Next)
}

// provision creates a claim whose machine, once running, joins the set warm.
// The claim is elected like any other, so pool machines are spread over the
// cluster by the same placement rules.
func (d *duties) provision(s *types.MachineSet) {
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
	}
	if _, err := d.n.st.Put(c, store.PutOptions{Create: true}); err != nil {
		d.n.log.Warn("provision pool machine", "set", s.Metadata.Name, "err", err)
		return
	}
	d.mu.Lock()
	if d.made[s.Metadata.Name] == nil {
		d.made[s.Metadata.Name] = map[string]time.Time{}
	}
	d.made[s.Metadata.Name][c.Metadata.Name] = d.n.cfg.Now()
	d.mu.Unlock()
	d.n.log.Debug("provisioning pool machine", "set", s.Metadata.Name, "claim", c.Metadata.Name)
}

// madeFresh is how long a provisioning claim this node wrote counts as
// pending while the cache does not show it.
const madeFresh = 10 * time.Second

// unseen counts the provisioning claims of set this node wrote that the
// cache does not show yet (cached: the set's provisioning claims in the
// cache): a second look at the set right after the first must not
// provision again what the first did. Claims the cache shows, or older
// than madeFresh, are forgotten.
func (d *duties) unseen(set string, cached []*types.MachineClaim, now time.Time) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	made := d.made[set]
	for _, c := range cached {
		delete(made, c.Metadata.Name)
	}
	for name, at := range made {
		if now.Sub(at) > madeFresh {
			delete(made, name)
		}
	}
	if len(made) == 0 {
		delete(d.made, set)
	}
	return len(made)
}

// reap asks a machine's node to release it (the reap facet), after asking
// that the claim it holds be ended when the plan says so (the end facet).
func (d *duties) reap(del scheduler.Deletion) {
	n := d.n
	now := n.cfg.Now()
	if del.Claim != "" {
		endClaim(n, del.Claim, del.Message)
	}
	_, err := store.UpdateFacet(n.st, types.KindMachine, del.Machine, types.FacetReap, func(m *types.Machine) error {
		if m.Status.Reap != nil {
			return store.ErrNoChange
		}
		m.Status.Reap = &types.MachineRequest{Reason: string(del.Reason), Message: del.Message, Claim: del.Claim, At: now, By: n.cfg.Name}
		return nil
	})
	if err != nil && !isNotFound(err) {
		n.log.Warn("reap machine", "machine", del.Machine, "err", err)
		return
	}
	n.log.Info("pool machine reaped", "machine", del.Machine, "reason", del.Reason)
}

// sharedUsers are the Bound claims on each shared machine of set s (a set
// an event made for a Shared line), sorted by name; nil for other sets.
func (d *duties) sharedUsers(s *types.MachineSet) map[string][]*types.MachineClaim {
	ev := s.Metadata.Labels[scheduler.LabelScheduledEvent]
	if ev == "" || s.Metadata.Annotations[scheduler.AnnotationMachineType] != string(types.MachineTypeShared) {
		return nil
	}
	out := map[string][]*types.MachineClaim{}
	for _, c := range cache.TypedIndex[types.MachineClaim](d.n.cache, idxClaimEvent, ev) {
		if b := c.Status.Binding; b != nil && b.Shared && c.Status.Phase == types.ClaimBound {
			out[b.Machine] = append(out[b.Machine], c)
		}
	}
	for _, cs := range out {
		slices.SortFunc(cs, func(a, b *types.MachineClaim) int { return strings.Compare(a.Metadata.Name, b.Metadata.Name) })
	}
	return out
}

// endClaim asks that a claim be terminated (its end facet): its node
// releases the machine.
func endClaim(n *Node, claim, reason string) {
	_, err := store.UpdateFacet(n.st, types.KindMachineClaim, claim, types.FacetEnd, func(c *types.MachineClaim) error {
		if c.Status.End != nil || c.Status.Phase == types.ClaimTerminated || c.Status.Phase == types.ClaimFailed {
			return store.ErrNoChange
		}
		c.Status.End = &types.ClaimEnd{Reason: reason, At: n.cfg.Now()}
		return nil
	})
	if err != nil && !isNotFound(err) {
		n.log.Warn("end claim", "claim", claim, "err", err)
	}
}

// activity is the last sign of use of each machine: what its driver saw
// (Status.LastActivity, written by its node) or, for a machine that a
// session's claim holds, the session's last keepalive, whichever is later. A
// paused machine counts as in use now: its session asked to keep it, and idle
// reaping would undo that (maxAssigned still applies).
func (d *duties) activity(now time.Time, machines []*types.Machine) map[string]time.Time {
	out := map[string]time.Time{}
	for _, m := range machines {
		switch {
		case m.Status.Paused:
			out[m.Metadata.Name] = now
		case !m.Status.LastActivity.IsZero():
			out[m.Metadata.Name] = m.Status.LastActivity
		}
		if m.Spec.Claim == "" {
			continue
		}
		for _, s := range cache.TypedIndex[types.Session](d.n.cache, idxSessionClaim, m.Spec.Claim) {
			if s.LastSeen().After(out[m.Metadata.Name]) {
				out[m.Metadata.Name] = s.LastSeen()
			}
		}
	}
	return out
}
