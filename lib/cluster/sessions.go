package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"github.com/hf-fleet/hf/lib/cluster/cache"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// reconcileSession runs one Session: an active session with a template gets a
// claim for its user, once its scheduled event has opened; one without a
// keepalive for its timeout ends (its claim is released unless its onEnd
// keeps it) or pauses (Pause: its claim's node pauses the machine); one
// whose event is over ends (scheduler.SessionUnderEvent); one moved to
// another scenario keeps its machine or gets a fresh one
// (persistenceStrategy). The claims of a deleted session are released. It
// asks to run again when the timeout would trip or its event starts or ends.
func (d *duties) reconcileSession(name string) time.Duration {
	n := d.n
	now := n.cfg.Now()
	s, ok := cache.Typed[types.Session](n.cache, types.KindSession, name)
	if !ok {
		for _, c := range cache.TypedIndex[types.MachineClaim](n.cache, idxClaimSession, name) {
			if _, err := n.st.Delete(types.KindMachineClaim, c.Metadata.Name, types.Version{}); err != nil && !isNotFound(err) {
				n.log.Warn("release claim of deleted session", "claim", c.Metadata.Name, "err", err)
			}
		}
		return 0
	}
	timeout := s.EffectiveTimeout()
	ev, _ := d.sessionEvent(s)
	gate := sessionGate(now, ev, s.Status.MachineClaim != "")
	seen := s.LastSeen()
	if ev != nil && ev.Spec.StartTime.After(seen) {
		// Waiting for its event to open is not being idle: the user has
		// nothing to keep alive yet. The timeout counts from the start.
		seen = ev.Spec.StartTime
	}
	idleAt := seen.Add(timeout)
	idle := !now.Before(idleAt)
	switch {
	case s.Status.Phase == types.SessionPhaseEnded:
		return 0
	case gate.Over:
		d.endSession(s, gate.Message, gateCondition(gate))
		return 0
	case s.Status.MachineClaim != "" && d.claimDeleted(s.Status.MachineClaim):
		d.endSession(s, "its claim was deleted", &types.Condition{Type: types.ConditionClaimed, Status: types.ConditionFalse,
			Reason: "ClaimDeleted", Message: "its claim " + s.Status.MachineClaim + " was deleted, so the session ended: create a new session for a new machine"})
		return 0
	case s.Status.Phase == types.SessionPhasePaused:
		if !idle { // a keepalive came: the user is back
			d.setSession(name, func(o *types.Session) { o.Status.Phase = types.SessionPhaseActive })
			n.log.Info("session resumed", "session", name)
		}
		return 0
	case idle && s.EffectiveOnEnd() == types.EndPause && s.Status.MachineClaim != "":
		d.setSession(name, func(o *types.Session) { o.Status.Phase = types.SessionPhasePaused })
		n.log.Info("session paused", "session", name, "reason", "no keepalive for "+timeout.String())
		return 0
	case idle:
		d.endSession(s, "no keepalive for "+timeout.String(), &types.Condition{Type: types.ConditionClaimed, Status: types.ConditionFalse,
			Reason: "Idle", Message: "no keepalive for " + timeout.String() + ", so the session ended"})
		return 0
	case s.Status.MachineClaim != "" && s.Spec.Scenario != s.Status.Scenario:
		d.moveSession(s)
	case s.Status.MachineClaim == "":
		// One that cannot start yet runs again when it changes, or its
		// event does (idxSessionWaiting), and at its event's start.
		d.startSession(s)
	}
	wait := until(now, idleAt)
	if next := until(now, gate.Next); next > 0 && next < wait {
		wait = next
	}
	return wait
}

// sessionEvent is s's scheduled event (nil, false without one, or while it
// does not exist).
func (d *duties) sessionEvent(s *types.Session) (*types.ScheduledEvent, bool) {
	if s.Spec.ScheduledEvent == "" {
		return nil, false
	}
	return cache.Typed[types.ScheduledEvent](d.n.cache, types.KindScheduledEvent, s.Spec.ScheduledEvent)
}

// claimDeleted reports whether claim name was deleted: its tombstone is in
// the store. A claim this node has not seen yet (a replica behind, after the
// session's owner moved here) is not: the session keeps it.
func (d *duties) claimDeleted(name string) bool {
	gone, err := d.n.st.Deleted(types.KindMachineClaim, name)
	if err != nil {
		d.n.log.Warn("session claim", "claim", name, "err", err)
	}
	return gone
}

// sessionGate is what event ev lets a session do at now
// (scheduler.SessionUnderEvent); open without one, or while it does not
// exist (sessionTemplate says so when the session needs its template).
func sessionGate(now time.Time, ev *types.ScheduledEvent, holdsClaim bool) scheduler.SessionGate {
	if ev == nil {
		return scheduler.SessionGate{Open: true}
	}
	return scheduler.SessionUnderEvent(now, *ev, holdsClaim)
}

// gateCondition is the Claimed condition of a session its event does not
// let have a claim (its times unset).
func gateCondition(g scheduler.SessionGate) *types.Condition {
	return &types.Condition{Type: types.ConditionClaimed, Status: types.ConditionFalse, Reason: g.Reason, Message: g.Message}
}

// sessionTemplate is the template of s's machine: its own, else the one
// template of the user machines its scheduled event requires (the
// proposal's sessions name none: the event's machines are what its users
// get). why says, when there is none, what the session waits for.
func (d *duties) sessionTemplate(s *types.Session) (tmpl, why string) {
	if s.Spec.MachineTemplate != "" {
		return s.Spec.MachineTemplate, ""
	}
	if s.Spec.ScheduledEvent == "" {
		return "", "the session names neither a machineTemplate nor a scheduledEvent, so it has no machine: set spec.machineTemplate"
	}
	ev, ok := d.sessionEvent(s)
	if !ok {
		return "", "scheduled event " + s.Spec.ScheduledEvent + " does not exist: the session waits for it, or for spec.machineTemplate"
	}
	var names []string
	for _, line := range ev.Spec.RequiredMachines {
		if line.MachineType != types.MachineTypeShared && !slices.Contains(names, line.MachineTemplate) {
			names = append(names, line.MachineTemplate)
		}
	}
	switch len(names) {
	case 1:
		return names[0], ""
	case 0:
		return "", "scheduled event " + ev.Metadata.Name + " requires no machines for its users: set spec.machineTemplate"
	}
	return "", "scheduled event " + ev.Metadata.Name + " requires user machines of templates " + strings.Join(names, ", ") + ": set spec.machineTemplate to the one this session is for"
}

// moveSession follows a session to its spec.scenario: with
// PersistThroughCourse (the default) it keeps its machine; with
// NewPerScenario its claim is released and a fresh one made for the new
// scenario.
func (d *duties) moveSession(s *types.Session) {
	n := d.n
	if s.Spec.PersistenceStrategy != types.NewPerScenario {
		d.setSession(s.Metadata.Name, func(o *types.Session) { o.Status.Scenario = o.Spec.Scenario })
		n.log.Info("session moved on, machine kept", "session", s.Metadata.Name, "scenario", s.Spec.Scenario)
		return
	}
	old := s.Status.MachineClaim
	if _, err := n.st.Delete(types.KindMachineClaim, old, types.Version{}); err != nil && !isNotFound(err) {
		n.log.Warn("release claim of the previous scenario", "session", s.Metadata.Name, "claim", old, "err", err)
		return
	}
	n.log.Info("session moved on, fresh machine", "session", s.Metadata.Name, "scenario", s.Spec.Scenario, "released", old)
	d.startSession(s)
}

// sessionClaimName is deterministic, so a repeated start finds its claim;
// a NewPerScenario session has one per scenario. The session's creation time
// is part of the hash: nobody else can tell the name in advance (and make a
// claim of that name first), and a session made again under the same name
// gets claims of its own.
func sessionClaimName(s *types.Session, scenario string) string {
	key := "session/" + s.Metadata.Name + "/" + s.Metadata.CreatedAt.UTC().Format(time.RFC3339Nano)
	if scenario != "" {
		key += "/" + scenario
	}
	h := sha256.Sum256([]byte(key))
	prefix := s.Metadata.Name
	if len(prefix) > types.MaxNameLen-9 {
		prefix = prefix[:types.MaxNameLen-9]
	}
	return prefix + "-" + hex.EncodeToString(h[:4])
}

// sessionOwns reports whether claim c is one session s made: a session takes
// over an existing claim of its name only then, never someone else's (it
// would end, pause or keep alive a claim that is not its user's).
func sessionOwns(s *types.Session, c *types.MachineClaim) bool {
	return c.Metadata.Labels[LabelSession] == s.Metadata.Name && c.Spec.User == s.Spec.User
}

// startSession makes s's claim, or says in its Claimed condition why it
// cannot have one yet: it has no template, or its scheduled event has not
// opened (a claim under an event is made only in the event's window, as the
// API holds claims to it). One whose event is over by now ends.
func (d *duties) startSession(s *types.Session) {
	n := d.n
	tmpl, why := d.sessionTemplate(s)
	if tmpl == "" {
		d.setSession(s.Metadata.Name, func(o *types.Session) {
			o.Status.Conditions, _ = o.Status.Conditions.Set(types.Condition{Type: types.ConditionClaimed,
				Status: types.ConditionFalse, Reason: "NoTemplate", Message: why}, n.cfg.Now())
		})
		return
	}
	// As a session without a claim: a NewPerScenario move has released it.
	ev, _ := d.sessionEvent(s)
	switch gate := sessionGate(n.cfg.Now(), ev, false); {
	case gate.Over:
		d.endSession(s, gate.Message, gateCondition(gate))
		return
	case !gate.Open:
		d.setSession(s.Metadata.Name, func(o *types.Session) {
			o.Status.Conditions, _ = o.Status.Conditions.Set(*gateCondition(gate), n.cfg.Now())
		})
		return
	}
	scenario := ""
	if s.Spec.PersistenceStrategy == types.NewPerScenario {
		scenario = s.Spec.Scenario
	}
	name := sessionClaimName(s, scenario)
	c := &types.MachineClaim{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
		Metadata: types.ObjectMeta{Name: name, Labels: map[string]string{LabelSession: s.Metadata.Name}},
		Spec: types.MachineClaimSpec{
			MachineTemplate: tmpl, User: s.Spec.User,
			AccessCode: s.Spec.AccessCode, ScheduledEvent: s.Spec.ScheduledEvent,
		},
	}
	if code := s.Metadata.Labels[types.LabelAccessCode]; code != "" {
		c.Metadata.Labels[types.LabelAccessCode] = code // checked by the API on the session
	}
	if ev != nil {
		if under, ok := scheduler.ClaimUnderEvent(*c, *ev); ok {
			c.Spec = under.Spec
		}
	}
	if _, err := n.st.Put(c, store.PutOptions{Create: true}); err != nil {
		if !isExists(err) {
			n.log.Warn("session claim", "session", s.Metadata.Name, "err", err)
			return
		}
		if cur, err := store.Get[types.MachineClaim](n.st, types.KindMachineClaim, name); err != nil || !sessionOwns(s, cur) {
			n.log.Warn("session claim name taken", "session", s.Metadata.Name, "claim", name)
			d.setSession(s.Metadata.Name, func(o *types.Session) {
				o.Status.Conditions, _ = o.Status.Conditions.Set(types.Condition{Type: types.ConditionClaimed,
					Status: types.ConditionFalse, Reason: "ClaimNameTaken",
					Message: "claim " + name + " exists and is not this session's: delete and create the session again"}, n.cfg.Now())
			})
			return
		}
	}
	d.setSession(s.Metadata.Name, func(o *types.Session) {
		o.Status.Phase, o.Status.MachineClaim, o.Status.Scenario = types.SessionPhaseActive, name, s.Spec.Scenario
		o.Status.Conditions, _ = o.Status.Conditions.Remove(types.ConditionClaimed)
	})
}

// endSession ends s, releasing its claim unless its onEnd keeps it; claimed,
// when not nil, is the Claimed condition that says why it ended without a
// machine.
func (d *duties) endSession(s *types.Session, why string, claimed *types.Condition) {
	n := d.n
	if s.Status.MachineClaim != "" && s.EffectiveOnEnd() != types.EndKeep {
		if _, err := n.st.Delete(types.KindMachineClaim, s.Status.MachineClaim, types.Version{}); err != nil && !isNotFound(err) {
			n.log.Warn("release session claim", "session", s.Metadata.Name, "err", err)
			return
		}
	}
	d.setSession(s.Metadata.Name, func(o *types.Session) {
		o.Status.Phase = types.SessionPhaseEnded
		if claimed != nil {
			o.Status.Conditions, _ = o.Status.Conditions.Set(*claimed, n.cfg.Now())
		}
	})
	n.log.Info("session ended", "session", s.Metadata.Name, "reason", why)
}

func (d *duties) setSession(name string, fn func(o *types.Session)) {
	if _, err := store.UpdateFacet(d.n.st, types.KindSession, name, types.FacetStatus, func(o *types.Session) error {
		fn(o)
		return nil
	}); err != nil && !isNotFound(err) {
		d.n.log.Warn("session status", "session", name, "err", err)
	}
}
