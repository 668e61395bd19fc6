package cluster

// The acceptor's inbox: the offers and takes that reach this node, answered
// in batches (each claim's messages in order, the claims side by side), and
// the reservations and shared bindings they make. The ledger and the per-key
// reconcile are in acceptor.go.

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"

	"github.com/hf-fleet/hf/lib/cluster/wire"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// inboxLoop answers the offers and takes that reach this node.
func (a *acceptor) inboxLoop() {
	for {
		select {
		case <-a.n.ctx.Done():
			return
		case <-a.inbox.Wait():
		}
		a.handleInbox(a.inbox.Drain())
		if a.n.ctx.Err() != nil {
			return
		}
	}
}

// handleInbox answers a batch of offers and takes: each claim's in order, the
// claims side by side, so their reservations share the store's group commits
// instead of waiting for one commit each. A batch is done before the next
// starts, so a repeated offer never overtakes the reservation it repeats.
func (a *acceptor) handleInbox(batch []Message) {
	byKey(a.n.spawn, batch, func(m Message) string { return m.Claim }, func(m Message) {
		if a.n.ctx.Err() != nil {
			return
		}
		switch m.Type {
		case wire.MsgOffer:
			a.handleOffer(m)
		case wire.MsgTake:
			a.handleTake(m)
		}
	})
}

// byKey runs fn on items: those of one key one after the other, in their
// order, the keys side by side (on goroutines from spawn; inline when there
// is one key). It returns when all are done. The reconcilers use it so that
// the writes of several keys share the store's group commits while each
// key's stay in order.
func byKey[T any](spawn func(func()), items []T, key func(T) string, fn func(T)) {
	groups := map[string][]T{}
	var keys []string
	for _, it := range items {
		k := key(it)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], it)
	}
	run := func(its []T) {
		for _, it := range its {
			fn(it)
		}
	}
	if len(keys) == 1 {
		run(items)
		return
	}
	var wg sync.WaitGroup
	for _, k := range keys {
		wg.Add(1)
		spawn(func() {
			defer wg.Done()
			run(groups[k])
		})
	}
	wg.Wait()
}

// applyRecords stores the records that came with an offer or take (the
// elector's copies of the claim and its template), so this node judges what
// the elector saw even when replication has not brought them yet.
func (a *acceptor) applyRecords(m Message) {
	for _, rec := range m.Records {
		if rec.Kind != types.KindMachineClaim && rec.Kind != types.KindMachineTemplate {
			continue
		}
		if _, err := a.n.st.Apply(rec); err != nil {
			a.n.log.Debug("apply offered record", "kind", rec.Kind, "name", rec.Name, "err", err)
		}
	}
}

// reply sends an answer to an offer or take on its own goroutine, with the
// claim as this node has it: an elector whose replica lags (a claim bound
// elsewhere while it was cut off) learns it with the answer.
func (a *acceptor) reply(m Message) {
	if m.To == a.n.cfg.Name {
		a.n.el.deliver(m)
		return
	}
	if rec, err := a.n.st.Get(types.KindMachineClaim, m.Claim); err == nil {
		m.Records = []store.Record{rec}
	}
	a.n.spawn(func() { a.n.send(m) })
}

// handleOffer is the candidate's side of the election: under the ledger lock
// it checks real free capacity minus reservations and persists the
// reservation (a Pending Machine of its own) before it accepts.
func (a *acceptor) handleOffer(m Message) {
	a.applyRecords(m)
	reply := Message{From: a.n.cfg.Name, To: m.From, Claim: m.Claim, Node: a.n.cfg.Name, Driver: m.Driver, Round: m.Round}
	fresh, err := a.reserve(m)
	if err != nil {
		reply.Type, reply.Reason, reply.Fresh = wire.MsgDecline, err.Error(), fresh
		a.n.log.Debug("offer declined", "claim", m.Claim, "round", m.Round, "reason", reply.Reason)
	} else {
		reply.Type = wire.MsgAccept
		a.q.Add(m.Claim)
	}
	a.reply(reply)
}

// offerHeadroom is the room beyond what its store needs below which a node
// declines offers: half the API's (store.SpaceHeadroom), so that a claim
// the API took just before it refused still finds this node taking it.
const offerHeadroom = store.SpaceHeadroom / 2

// machineName is deterministic per (claim, round, node), so a repeated offer
// finds the reservation it already made; it starts with prefix (the
// machineNamePrefix that applies), or "m".
func machineName(prefix, claim string, round uint64, node string) string {
	h := sha256.Sum256([]byte(claim + "/" + strconv.FormatUint(round, 10) + "/" + node))
	return cmp.Or(prefix, "m") + "-" + hex.EncodeToString(h[:6])
}

// reserve does the atomic check-and-reserve of an offer. On a decline it
// returns the reason and, when capacity was short, the driver's real capacity.
func (a *acceptor) reserve(m Message) (*types.Capacity, error) {
	self := a.n.cfg.Name
	in, ok := a.n.instances[m.Driver]
	if !ok {
		return nil, fmt.Errorf("node %s has no driver %q", self, m.Driver)
	}
	claim, err := store.Get[types.MachineClaim](a.n.st, types.KindMachineClaim, m.Claim)
	if err != nil {
		return nil, fmt.Errorf("claim %s: %w", m.Claim, err)
	}
	if claim.Status.Phase != types.ClaimRequested {
		return nil, fmt.Errorf("claim %s is %s", m.Claim, claim.Status.Phase)
	}
	if r := a.n.claimState(claim).Round(); r >= m.Round {
		return nil, fmt.Errorf("claim %s is at round %d already; offer of round %d is stale", m.Claim, r, m.Round)
	}
	tmpl, err := a.offeredTemplate(m, claim.Spec.MachineTemplate)
	if err != nil {
		return nil, fmt.Errorf("machine template %s: %w", claim.Spec.MachineTemplate, err)
	}
	res, env, err := a.n.resolve(claim, tmpl, m.Set, in)
	if err != nil {
		return nil, fmt.Errorf("configuration of template %s: %w", tmpl.Metadata.Name, err)
	}
	if err := in.Driver.ValidateTemplate(res.Template); err != nil {
		return nil, fmt.Errorf("driver %s cannot serve template %s: %w", in.Name, tmpl.Metadata.Name, err)
	}
	name := machineName(res.Prefix, m.Claim, m.Round, self)
	if _, ok := a.get(name); ok {
		return nil, nil // a repeated offer: already reserved
	}
	if node, ok := cacheNode(a.n, self); ok && node.Spec.Maintenance {
		return nil, fmt.Errorf("node %s is in maintenance", self)
	}
	if free, need, ok := a.n.st.Space(); ok && free < need+offerHeadroom {
		// Other nodes' electors send work as the API here would not take
		// it: what is under way needs the room left. Below the API's
		// limit, so that the claims it took before it refused finish here.
		return nil, fmt.Errorf("node %s takes no new work: its disk is nearly full", self)
	}

	a.mu.Lock()
	if _, ok := a.entries[name]; ok {
		a.mu.Unlock()
		return nil, nil // a repeated offer: already reserved
	}
	capa := a.capacityLocked(in)
	size := res.Template.Spec.Resources
	if ok, why := scheduler.Reserve(capa, size, tmpl.Spec.AllowOverbook); !ok {
		a.mu.Unlock()
		return &capa, errors.New(why)
	}
	mach := &types.Machine{
		TypeMeta: types.TypeMeta{Kind: types.KindMachine},
		Metadata: types.ObjectMeta{Name: name, Labels: map[string]string{types.LabelClaim: m.Claim, types.LabelNode: self}},
		Spec: types.MachineSpec{
			MachineType: res.MachineType, Provider: res.Provider,
			ConfigurationOptions: res.Options, ConnectEndpoints: res.Endpoints,
			MachineTemplate: tmpl.Metadata.Name, Environment: env,
			Node: self, Driver: in.Name, Claim: m.Claim, Round: m.Round,
			MachineSet: cmp.Or(claim.Metadata.Labels[LabelProvisionFor], m.Set),
		},
		Status: types.MachineStatus{Phase: types.MachinePending},
	}
	mach.Status.PhaseTimes.Mark(string(types.MachinePending), a.n.cfg.Now())
	// The capacity is taken now; the entry stays busy (the reconcilers
	// leave it alone) until its record is stored, outside the lock, so
	// reservations of other claims share the commit.
	a.putLocked(&entry{Machine: name, Claim: m.Claim, Set: mach.Spec.MachineSet, Driver: in.Name, Round: m.Round, Res: size, Phase: types.MachinePending, Busy: true})
	a.mu.Unlock()
	// Persisted before anyone hears of it: a restart finds the reservation.
	if _, err := a.n.st.Put(mach, store.PutOptions{Create: true}); err != nil {
		a.remove(name)
		return nil, fmt.Errorf("persist reservation: %w", err)
	}
	a.update(name, func(e *entry) { e.Busy = false })
	return nil, nil
}

// offeredTemplate is the template the elector judged the offer by: the copy
// the offer carries (another node's elector), else this node's cache (this
// node's elector reads the same), else the store. Read-only.
func (a *acceptor) offeredTemplate(m Message, name string) (*types.MachineTemplate, error) {
	for _, rec := range m.Records {
		if rec.Kind == types.KindMachineTemplate && rec.Name == name {
			if o, err := store.Decode(rec); err == nil {
				if t, ok := o.(*types.MachineTemplate); ok {
					return t, nil
				}
			}
		}
	}
	if t, ok := a.n.template(name); ok {
		return t, nil
	}
	return store.Get[types.MachineTemplate](a.n.st, types.KindMachineTemplate, name)
}

// handleTake is the hosting node's side of binding a warm machine: under the
// ledger lock, a machine that is still unclaimed is given to the claim
// (machine first, then the claim's binding), and only then accepted.
func (a *acceptor) handleTake(m Message) {
	a.applyRecords(m)
	reply := Message{From: a.n.cfg.Name, To: m.From, Claim: m.Claim, Node: a.n.cfg.Name, Machine: m.Machine, Round: m.Round}
	if err := a.take(m); err != nil {
		reply.Type, reply.Reason = wire.MsgDecline, err.Error()
	} else {
		reply.Type = wire.MsgAccept
	}
	a.reply(reply)
}

// setClaimLabel labels m with the claim it serves, so a selector on
// hf/claim finds a pool machine by its user's claim, not by the claim that
// made it warm. The label map is copied: m may share it with the cache.
func setClaimLabel(m *types.Machine, claim string) {
	labels := maps.Clone(m.Metadata.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	if claim == "" {
		delete(labels, types.LabelClaim)
	} else {
		labels[types.LabelClaim] = claim
	}
	m.Metadata.Labels = labels
}

// take gives warm machine m.Machine to m.Claim, or says why not.
func (a *acceptor) take(m Message) error {
	self := a.n.cfg.Name
	claim, err := store.Get[types.MachineClaim](a.n.st, types.KindMachineClaim, m.Claim)
	if err != nil {
		return fmt.Errorf("claim %s: %w", m.Claim, err)
	}
	cs := a.n.claimState(claim)
	if claim.Status.Phase != types.ClaimRequested || cs.Round() >= m.Round {
		return fmt.Errorf("claim %s is taken care of", m.Claim)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if mm, ok := a.n.machine(m.Machine); ok && mm.Spec.MachineType == types.MachineTypeShared {
		return a.shareLocked(m, mm)
	}
	e, ok := a.entries[m.Machine]
	if !ok || e.Claim != "" || e.Phase != types.MachineRunning || e.Busy {
		return fmt.Errorf("machine %s is not a warm machine here", m.Machine)
	}
	var warmLabel string // the claim that made it warm, for a give-back
	mach, err := store.UpdateFacet(a.n.st, types.KindMachine, m.Machine, types.FacetOwner, func(mm *types.Machine) error {
		warmLabel = mm.Metadata.Labels[types.LabelClaim]
		if mm.Spec.Claim != "" {
			return fmt.Errorf("machine %s is bound to %s", m.Machine, mm.Spec.Claim)
		}
		if mm.Status.Reap != nil && mm.Status.Reap.Claim == "" {
			return fmt.Errorf("machine %s is being reaped", m.Machine)
		}
		mm.Spec.Claim, mm.Spec.Round = m.Claim, m.Round
		setClaimLabel(mm, m.Claim)
		return nil
	})
	if err != nil {
		return err
	}
	now := a.n.cfg.Now()
	_, err = store.UpdateFacet(a.n.st, types.KindMachineClaim, m.Claim, types.FacetBinding, func(c *types.MachineClaim) error {
		c.SetBinding(types.ClaimBinding{Round: m.Round, Node: self, Driver: e.Driver, Machine: m.Machine, Phase: types.BindingBound, At: now}, now)
		return nil
	})
	if err != nil {
		// Give the machine back to the pool.
		if _, uerr := store.UpdateFacet(a.n.st, types.KindMachine, m.Machine, types.FacetOwner, func(mm *types.Machine) error {
			mm.Spec.Claim, mm.Spec.Round = "", mach.Spec.Round
			setClaimLabel(mm, warmLabel)
			return nil
		}); uerr != nil {
			a.n.log.Warn("return machine to pool", "machine", m.Machine, "err", uerr)
		}
		return err
	}
	e.Claim, e.Round = m.Claim, m.Round
	a.putLocked(e)
	a.n.metrics.bound.WithLabelValues("pool").Inc()
	a.n.metrics.bindLatency.Observe(now.Sub(claim.Metadata.CreatedAt).Seconds())
	a.n.log.Debug("pool machine taken", "claim", m.Claim, "machine", m.Machine)
	return nil
}

// shareLocked binds a claim to a shared machine of this node: the binding
// names the machine, which stays unclaimed for the event's other users.
// a.mu is held.
func (a *acceptor) shareLocked(m Message, mm *types.Machine) error {
	e, ok := a.entries[m.Machine]
	if !ok || e.Phase != types.MachineRunning || mm.Status.Reap != nil {
		return fmt.Errorf("shared machine %s is not running here", m.Machine)
	}
	now := a.n.cfg.Now()
	if _, err := store.UpdateFacet(a.n.st, types.KindMachineClaim, m.Claim, types.FacetBinding, func(c *types.MachineClaim) error {
		c.SetBinding(types.ClaimBinding{Round: m.Round, Node: a.n.cfg.Name, Driver: e.Driver, Machine: m.Machine, Phase: types.BindingBound, Shared: true, At: now}, now)
		return nil
	}); err != nil {
		return err
	}
	a.n.metrics.bound.WithLabelValues("shared").Inc()
	a.n.log.Debug("shared machine bound", "claim", m.Claim, "machine", m.Machine)
	return nil
}
