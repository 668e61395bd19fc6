package cluster

import (
	"context"
	"log/slog"

	"github.com/hf-fleet/hf/lib/cluster/cache"
	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/internal/intern"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// LabelProvisionFor marks the claims a MachineSet's owner creates to provision
// warm machines (types.LabelProvisionFor).
const LabelProvisionFor = types.LabelProvisionFor

// LabelSession marks the claim a session made for its user.
const LabelSession = "hf/session"

// Indexes of the node's cache: the reconcilers find what a change concerns
// through them, never by listing a kind.
const (
	idxClaimPhase     = "claim/phase"        // derived phase
	idxClaimNode      = "claim/node"         // accepting and binding nodes
	idxClaimSet       = "claim/provision"    // hf/provision-for label
	idxClaimEvent     = "claim/event"        // spec.scheduledEvent
	idxClaimSession   = "claim/session"      // hf/session label
	idxClaimTemplate  = "claim/template"     // spec.machineTemplate
	idxClaimUser      = "claim/user"         // spec.user (the API's quota and a user's sight)
	idxMachineClaim   = "machine/claim"      // spec.claim
	idxMachineNode    = "machine/node"       // spec.node
	idxMachineSet     = "machine/set"        // spec.machineSet
	idxMachineEnvTmpl = "machine/env-tmpl"   // live machines by environment/template
	idxMachinePhase   = "machine/phase"      // status.phase
	idxSetTemplate    = "set/template"       // spec.machineTemplate
	idxSessionClaim   = "session/claim"      // status.machineClaim
	idxSessionUser    = "session/user"       // spec.user (the API's quota)
	idxSessionWaiting = "session/waiting"    // spec.scheduledEvent of sessions without a claim: for its template, or for it to open
	idxEventSet       = "set/event"          // sets an event created (by name)
	idxEnvironmentCap = "environment/capped" // environments with a capacity cap
)

func one(k string) []string {
	if k == "" {
		return nil
	}
	return []string{k}
}

// capKey names the machines an environment cap counts.
func capKey(env, template string) string { return env + "/" + template }

// packedHot is how many objects of each packed kind stay decoded: the
// templates a burst of claims reads, over and over.
const packedHot = 1024

// newCache builds the node's cache with its indexes.
func newCache(st *store.Store, log *slog.Logger) *cache.Cache {
	c := cache.New(st, log)
	// The kinds a big fleet holds most of, read a few at a time (by name, or
	// by an index): kept packed (see cache.Pack). Sets, events and sessions
	// are few and read whole by their reconcilers: kept decoded, and so are
	// the claims and machines those read many of at a time, for each claim
	// they route: a set's machines, its provisioning claims and the claims
	// bound to its machines (its reconcile reads them all), an event's
	// claims. (A claim whose set machine comes to this node after it is
	// pinned at its next change.)
	claim := func(o types.Object) *types.MachineClaim { return o.(*types.MachineClaim) }
	machine := func(o types.Object) *types.Machine { return o.(*types.Machine) }
	c.Pack(types.KindMachineClaim, packedHot, func(o types.Object, pinned func(kind, name string) bool) bool {
		cl := claim(o)
		return cl.Spec.ScheduledEvent != "" || cl.Metadata.Labels[LabelProvisionFor] != "" ||
			(cl.Status.Machine != "" && pinned(types.KindMachine, cl.Status.Machine))
	})
	c.Pack(types.KindMachine, packedHot, func(o types.Object, _ func(string, string) bool) bool {
		return machine(o).Spec.MachineSet != ""
	})
	for _, kind := range []string{types.KindMachineTemplate, types.KindProvider, types.KindUser, types.KindToken} {
		c.Pack(kind, packedHot, nil)
	}
	c.Index(idxClaimPhase, types.KindMachineClaim, func(o types.Object) []string {
		return one(string(claim(o).Status.Phase))
	})
	c.Index(idxClaimNode, types.KindMachineClaim, func(o types.Object) []string {
		s := claim(o).Status
		var out []string
		if s.Election != nil && s.Election.Node != "" {
			out = append(out, s.Election.Node)
		}
		if s.Binding != nil && s.Binding.Node != "" && (len(out) == 0 || out[0] != s.Binding.Node) {
			out = append(out, s.Binding.Node)
		}
		return out
	})
	c.Index(idxClaimSet, types.KindMachineClaim, func(o types.Object) []string {
		return one(claim(o).Metadata.Labels[LabelProvisionFor])
	})
	c.Index(idxClaimEvent, types.KindMachineClaim, func(o types.Object) []string {
		return one(claim(o).Spec.ScheduledEvent)
	})
	c.Index(idxClaimSession, types.KindMachineClaim, func(o types.Object) []string {
		return one(claim(o).Metadata.Labels[LabelSession])
	})
	c.Index(idxClaimTemplate, types.KindMachineClaim, func(o types.Object) []string {
		return one(claim(o).Spec.MachineTemplate)
	})
	c.Index(idxClaimUser, types.KindMachineClaim, func(o types.Object) []string {
		return one(claim(o).Spec.User)
	})
	c.Index(idxMachineClaim, types.KindMachine, func(o types.Object) []string {
		return one(machine(o).Spec.Claim)
	})
	c.Index(idxMachineNode, types.KindMachine, func(o types.Object) []string {
		return one(machine(o).Spec.Node)
	})
	c.Index(idxMachineSet, types.KindMachine, func(o types.Object) []string {
		return one(machine(o).Spec.MachineSet)
	})
	c.Index(idxMachineEnvTmpl, types.KindMachine, func(o types.Object) []string {
		m := machine(o)
		if m.Spec.Environment == "" || !m.Live() {
			return nil
		}
		return one(capKey(m.Spec.Environment, m.Spec.MachineTemplate))
	})
	c.Index(idxMachinePhase, types.KindMachine, func(o types.Object) []string {
		return one(string(machine(o).Status.Phase))
	})
	c.Index(idxSetTemplate, types.KindMachineSet, func(o types.Object) []string {
		return one(o.(*types.MachineSet).Spec.MachineTemplate)
	})
	c.Index(idxEventSet, types.KindMachineSet, func(o types.Object) []string {
		return one(o.(*types.MachineSet).Metadata.Labels[scheduler.LabelScheduledEvent])
	})
	c.Index(idxSessionClaim, types.KindSession, func(o types.Object) []string {
		return one(o.(*types.Session).Status.MachineClaim)
	})
	c.Index(idxSessionUser, types.KindSession, func(o types.Object) []string {
		return one(o.(*types.Session).Spec.User)
	})
	c.Index(idxSessionWaiting, types.KindSession, func(o types.Object) []string {
		s := o.(*types.Session)
		if s.Status.MachineClaim != "" || s.Status.Phase == types.SessionPhaseEnded {
			return nil
		}
		return one(s.Spec.ScheduledEvent)
	})
	c.Index(idxEnvironmentCap, types.KindEnvironment, func(o types.Object) []string {
		if len(o.(*types.Environment).Spec.Capacity) == 0 {
			return nil
		}
		return []string{""}
	})
	return c
}

// LiveClaimsOf counts user's Requested and Bound claims from the node's
// indexes once the cache holds every write the store had when called
// (read-your-writes), without reading a claim.
func (n *Node) LiveClaimsOf(ctx context.Context, user string) (int, error) {
	if err := n.cache.WaitSeq(ctx, n.st.Seq()); err != nil {
		return 0, err
	}
	return len(n.cache.Intersect(idxClaimUser, user, idxClaimPhase, string(types.ClaimRequested), string(types.ClaimBound))), nil
}

// Cool drops what the node's cache keeps decoded for speed and squeezes
// its records (see cache.Cool), and what the store keeps for writes in
// flight (store.Cool); it copies what the cache, the acceptor's
// ledger, its peers (Cooler) and its drivers (drivers.Cooler) keep per
// object out of the burst's heap, one copy of each name for all (see
// package intern); the acceptor, the elector and the duties shrink their
// maps and queues to what they hold; and it returns about how many bytes
// that dropped: the memory trimmer calls it once the node is idle.
func (n *Node) Cool() int64 {
	dropped := n.cache.Cool()
	n.st.Cool()
	tab := intern.New()
	n.cache.Compact(tab)
	n.acc.compact(tab)
	n.duties.compact()
	n.el.q.Add(keyCompact) // its maps are its worker's
	if c, ok := n.peers.(Cooler); ok {
		c.Cool(tab)
	}
	for _, in := range n.instances {
		if c, ok := in.Driver.(drivers.Cooler); ok {
			c.Cool(tab)
		}
	}
	return dropped
}

// ClaimsOf returns user's claims from the node's cache once it holds every
// write the store had when called (read-your-writes), or ctx's error. The
// claims are the cache's: read only.
func (n *Node) ClaimsOf(ctx context.Context, user string) ([]*types.MachineClaim, error) {
	objs, err := n.cache.ByIndexNow(ctx, idxClaimUser, user)
	if err != nil {
		return nil, err
	}
	return types.Cast[*types.MachineClaim](objs), nil
}

// SessionsOf returns user's sessions from the node's cache once it holds
// every write the store had when called (read-your-writes), or ctx's
// error. The sessions are the cache's: read only.
func (n *Node) SessionsOf(ctx context.Context, user string) ([]*types.Session, error) {
	objs, err := n.cache.ByIndexNow(ctx, idxSessionUser, user)
	if err != nil {
		return nil, err
	}
	return types.Cast[*types.Session](objs), nil
}
