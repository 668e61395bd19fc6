package cluster

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// inboxLoop handles direct messages: offers are answered here (one at a time,
// which with the ledger lock makes check-and-reserve atomic); answers go to the
// elect loop.
func (n *Node) inboxLoop() {
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.inbox.Wait():
		}
		for _, m := range n.inbox.Drain() {
			switch m.Type {
			case MsgOffer:
				n.handleOffer(m)
			case MsgTake:
				n.handleTake(m)
			case MsgAccept, MsgDecline:
				if m.Machine != "" {
					n.takeAnswered(m)
					continue
				}
				if m.Type == MsgDecline {
					n.elect.Push(electEvent{in: declinedInput(n, m)})
					continue
				}
				n.elect.Push(electEvent{in: scheduler.Accepted{Claim: m.Claim, Node: m.Node, Driver: m.Driver, Round: m.Round}})
			}
		}
	}
}

// declinedInput turns a decline into the elector's input.
func declinedInput(n *Node, m Message) scheduler.Input {
	var fresh *scheduler.Candidate
	if m.Fresh != nil {
		fresh = &scheduler.Candidate{Node: m.Node, Driver: m.Driver, Alive: true, Capacity: *m.Fresh}
		if in, ok := n.instances[m.Driver]; ok && m.Node == n.cfg.Name {
			fresh.DriverType = in.Type
		}
	}
	return scheduler.Declined{Claim: m.Claim, Node: m.Node, Round: m.Round, Reason: m.Reason, Fresh: fresh}
}

// machineName is deterministic per (claim, round, node), so a repeated offer
// finds the reservation it already made.
func machineName(claim string, round uint64, node string) string {
	h := sha256.Sum256([]byte(claim + "/" + strconv.FormatUint(round, 10) + "/" + node))
	return "m-" + hex.EncodeToString(h[:6])
}

// handleOffer is the candidate's side of the election: under the ledger lock it
// checks real free capacity minus reservations, persists the reservation (a
// Pending Machine) and records itself in the claim, and only then accepts.
func (n *Node) handleOffer(m Message) {
	for _, rec := range m.Records {
		if rec.Kind != types.KindMachineClaim && rec.Kind != types.KindMachineTemplate {
			continue
		}
		if _, err := n.st.Apply(rec); err != nil {
			n.log.Debug("apply offered record", "kind", rec.Kind, "name", rec.Name, "err", err)
		}
	}
	reply := Message{From: n.cfg.Name, To: m.From, Claim: m.Claim, Node: n.cfg.Name, Driver: m.Driver, Round: m.Round}
	mach, fresh, err := n.reserve(m)
	if err != nil {
		reply.Type = MsgDecline
		// The elector says "node X declined: ", so the marker goes.
		reply.Reason = strings.TrimPrefix(err.Error(), errDecline.Error()+": ")
		reply.Fresh = fresh
		n.log.Debug("offer declined", "claim", m.Claim, "round", m.Round, "reason", reply.Reason)
	} else {
		reply.Type = MsgAccept
		n.startAllocate(mach)
	}
	n.spawn(func() { n.send(reply) })
}

// errDecline marks reasons for declining an offer.
var errDecline = errors.New("declined")

func decline(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errDecline}, args...)...)
}

// reserve does the atomic check-and-reserve for an offer. It returns the
// reserved machine's name, or an error and the driver's fresh capacity.
func (n *Node) reserve(m Message) (string, *types.Capacity, error) {
	in, ok := n.instances[m.Driver]
	if !ok {
		return "", nil, decline("node %s has no driver %q", n.cfg.Name, m.Driver)
	}
	claim, err := store.Get[types.MachineClaim](n.st, types.KindMachineClaim, m.Claim)
	if err != nil {
		return "", nil, decline("claim %s: %v", m.Claim, err)
	}
	if !requested(claim) {
		return "", nil, decline("claim %s is %s", m.Claim, claim.Status.Phase)
	}
	if claim.Status.Round > m.Round || (claim.Status.Round == m.Round && claim.Status.Node != "" && claim.Status.Node != n.cfg.Name) {
		return "", nil, decline("claim %s: round %d is stale", m.Claim, m.Round)
	}
	tmpl, err := store.Get[types.MachineTemplate](n.st, types.KindMachineTemplate, claim.Spec.MachineTemplate)
	if err != nil {
		return "", nil, decline("machine template %s: %v", claim.Spec.MachineTemplate, err)
	}
	if err := in.Driver.ValidateTemplate(*tmpl); err != nil {
		return "", nil, decline("driver %s cannot serve template %s: %v", in.Name, tmpl.Metadata.Name, err)
	}
	if self, err := store.Get[types.Node](n.st, types.KindNode, n.cfg.Name); err == nil && self.Spec.Maintenance {
		return "", nil, decline("node %s is in maintenance", n.cfg.Name)
	}
	name := machineName(m.Claim, m.Round, n.cfg.Name)

	n.ledger.mu.Lock()
	if e, ok := n.ledger.entries[name]; ok {
		n.ledger.mu.Unlock()
		return e.Machine, nil, nil // a repeated offer: already reserved
	}
	used, reserved, _ := n.ledger.usageLocked(in.Name)
	capa := scheduler.WithUsage(in.Driver.HostCapacity(), used, reserved)
	if ok, why := scheduler.Reserve(capa, tmpl.Spec.Resources, tmpl.Spec.AllowOverbook); !ok {
		n.ledger.mu.Unlock()
		return "", &capa, decline("%s", why)
	}
	now := n.cfg.Now()
	mach := &types.Machine{
		TypeMeta: types.TypeMeta{Kind: types.KindMachine},
		Metadata: types.ObjectMeta{Name: name, Labels: map[string]string{"hf/claim": m.Claim, "hf/node": n.cfg.Name}},
		Spec: types.MachineSpec{
			MachineTemplate: tmpl.Metadata.Name, Environment: claim.Spec.Environment,
			Node: n.cfg.Name, Driver: in.Name, Claim: m.Claim, Round: m.Round,
			MachineSet: cmp.Or(claim.Metadata.Labels[LabelProvisionFor], m.Set),
		},
		Status: types.MachineStatus{Phase: types.MachinePending},
	}
	mach.Status.PhaseTimes.Mark(string(types.MachinePending), now)
	// Persist the reservation before anyone hears of it.
	if _, err := n.st.Put(mach, store.PutOptions{}); err != nil {
		n.ledger.mu.Unlock()
		return "", nil, decline("persist reservation: %v", err)
	}
	n.ledger.putLocked(entry{Machine: name, Claim: m.Claim, Driver: in.Name, Round: m.Round, Res: tmpl.Spec.Resources, Phase: types.MachinePending})
	n.ledger.mu.Unlock()
	n.ledger.notify()

	_, err = store.Update(n.st, types.KindMachineClaim, m.Claim, func(c *types.MachineClaim) error {
		if !requested(c) || c.Status.Round > m.Round {
			return fmt.Errorf("claim changed: phase %s round %d", c.Status.Phase, c.Status.Round)
		}
		c.Status.Node, c.Status.Driver, c.Status.Round, c.Status.Machine = n.cfg.Name, in.Name, m.Round, name
		c.Status.Reason = ""
		return nil
	})
	if err != nil {
		n.ledger.remove(name)
		if _, derr := n.st.Delete(types.KindMachine, name, types.Version{}); derr != nil && !errors.Is(derr, store.ErrNotFound) {
			n.log.Warn("drop reservation", "machine", name, "err", derr)
		}
		return "", nil, decline("record acceptance: %v", err)
	}
	return name, nil, nil
}
