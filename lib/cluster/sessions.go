package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// LabelSession marks the claim a session made for its user.
const LabelSession = "hf/session"

// reconcileSessions runs every Session this node owns (rendezvous owner of
// "session/<name>"): an active session with a template gets a claim for its
// user; one without a keepalive for its timeout ends, and its claim is
// released unless its persistenceStrategy keeps it; the claims of deleted
// sessions are released the same way.
func (n *Node) reconcileSessions() {
	sessions, err := store.List[types.Session](n.st, types.KindSession)
	if err != nil {
		return
	}
	defer n.reconcilePauses(sessions)
	claims, err := store.List[types.MachineClaim](n.st, types.KindMachineClaim)
	if err != nil {
		return
	}
	members := n.peers.Members()
	live := map[string]*types.Session{}
	for _, s := range sessions {
		live[s.Metadata.Name] = s
	}
	now := n.cfg.Now()
	for _, s := range sessions {
		if scheduler.Owner("session/"+s.Metadata.Name, members) != n.cfg.Name {
			continue
		}
		idle := now.Sub(s.LastSeen()) >= s.EffectiveTimeout()
		switch {
		case s.Status.Phase == types.SessionPhaseEnded:
		case s.Status.Phase == types.SessionPhasePaused:
			if !idle { // a keepalive came: the user is back
				n.setSession(s.Metadata.Name, func(o *types.Session) { o.Status.Phase = types.SessionPhaseActive })
				n.log.Info("session resumed", "session", s.Metadata.Name)
			}
		case idle && s.Spec.PersistenceStrategy == types.PersistPauseOnEnd && s.Status.MachineClaim != "":
			// Its node pauses the machine (reconcilePauses) and keeps it.
			n.setSession(s.Metadata.Name, func(o *types.Session) { o.Status.Phase = types.SessionPhasePaused })
			n.log.Info("session paused", "session", s.Metadata.Name, "reason", "no keepalive for "+s.EffectiveTimeout().String())
		case idle:
			n.endSession(s, "no keepalive for "+s.EffectiveTimeout().String())
		case s.Status.MachineClaim == "" && s.Spec.MachineTemplate != "":
			n.startSession(s)
		}
	}
	// Claims of sessions that are gone: released unless kept.
	for _, c := range claims {
		name := c.Metadata.Labels[LabelSession]
		if name == "" || live[name] != nil || scheduler.Owner("session/"+name, members) != n.cfg.Name {
			continue
		}
		if _, err := n.st.Delete(types.KindMachineClaim, c.Metadata.Name, types.Version{}); err != nil && !errors.Is(err, store.ErrNotFound) {
			n.log.Warn("release claim of deleted session", "claim", c.Metadata.Name, "err", err)
		}
	}
}

// sessionClaimName is deterministic, so a repeated start finds its claim.
func sessionClaimName(session string) string {
	h := sha256.Sum256([]byte("session/" + session))
	prefix := session
	if len(prefix) > types.MaxNameLen-9 {
		prefix = prefix[:types.MaxNameLen-9]
	}
	return prefix + "-" + hex.EncodeToString(h[:4])
}

func (n *Node) startSession(s *types.Session) {
	name := sessionClaimName(s.Metadata.Name)
	c := &types.MachineClaim{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
		Metadata: types.ObjectMeta{Name: name, Labels: map[string]string{LabelSession: s.Metadata.Name}},
		Spec: types.MachineClaimSpec{
			MachineTemplate: s.Spec.MachineTemplate, User: s.Spec.User,
			AccessCode: s.Spec.AccessCode, ScheduledEvent: s.Spec.ScheduledEvent,
		},
		Status: types.MachineClaimStatus{Phase: types.ClaimRequested},
	}
	c.Status.PhaseTimes.Mark(string(types.ClaimRequested), n.cfg.Now())
	if _, err := n.st.Put(c, store.PutOptions{Create: true}); err != nil && !errors.Is(err, store.ErrExists) {
		n.log.Warn("session claim", "session", s.Metadata.Name, "err", err)
		return
	}
	n.setSession(s.Metadata.Name, func(o *types.Session) {
		o.Status.Phase, o.Status.MachineClaim = types.SessionPhaseActive, name
	})
}

func (n *Node) endSession(s *types.Session, why string) {
	if s.Status.MachineClaim != "" && s.Spec.PersistenceStrategy != types.PersistKeepOnEnd {
		if _, err := n.st.Delete(types.KindMachineClaim, s.Status.MachineClaim, types.Version{}); err != nil && !errors.Is(err, store.ErrNotFound) {
			n.log.Warn("release session claim", "session", s.Metadata.Name, "err", err)
			return
		}
	}
	n.setSession(s.Metadata.Name, func(o *types.Session) { o.Status.Phase = types.SessionPhaseEnded })
	n.log.Info("session ended", "session", s.Metadata.Name, "reason", why)
}

// reconcilePauses holds this node's machines paused while the session whose
// claim they serve is Paused, and running otherwise. Only this node writes
// its machines' status, so the session's phase (its owner's word) is read and
// the machine's Paused flag written here.
func (n *Node) reconcilePauses(sessions []*types.Session) {
	paused := map[string]bool{} // claim -> its session is Paused
	for _, s := range sessions {
		if s.Status.MachineClaim != "" && s.Status.Phase == types.SessionPhasePaused {
			paused[s.Status.MachineClaim] = true
		}
	}
	for _, e := range n.ledger.all() {
		if e.Phase != types.MachineRunning || e.Resource == nil || e.Claim == "" {
			continue
		}
		in, ok := n.instances[e.Driver]
		if !ok {
			continue
		}
		pauser, ok := in.Driver.(drivers.Pauser)
		if !ok {
			continue
		}
		m, err := store.Get[types.Machine](n.st, types.KindMachine, e.Machine)
		if err != nil || m.Status.Paused == paused[e.Claim] {
			continue
		}
		if !n.claimBusy(e.Machine) {
			continue // allocating or releasing: look again next time
		}
		want := paused[e.Claim]
		if want {
			err = pauser.Pause(n.ctx, e.Resource)
		} else {
			err = pauser.Resume(n.ctx, e.Resource)
		}
		if err == nil {
			_, err = n.setMachine(e.Machine, func(m *types.Machine) { m.Status.Paused = want })
		}
		n.doneBusy(e.Machine)
		if err != nil {
			n.log.Warn("pause machine", "machine", e.Machine, "paused", want, "err", err)
			continue
		}
		n.log.Info("machine paused", "machine", e.Machine, "paused", want)
	}
}

func (n *Node) setSession(name string, fn func(o *types.Session)) {
	if _, err := store.UpdateFacet(n.st, types.KindSession, name, types.FacetStatus, func(o *types.Session) error {
		fn(o)
		return nil
	}); err != nil && !errors.Is(err, store.ErrNotFound) {
		n.log.Warn("session status", "session", name, "err", err)
	}
}
