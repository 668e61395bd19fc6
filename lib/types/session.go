package types

import "time"

// PersistenceStrategy says whether a session keeps its machine as it moves
// from one scenario of its course to the next.
type PersistenceStrategy string

// Persistence strategies.
const (
	// PersistThroughCourse keeps the session's machine from scenario to
	// scenario (the default).
	PersistThroughCourse PersistenceStrategy = "PersistThroughCourse"
	// NewPerScenario gives the session a fresh machine for each scenario.
	NewPerScenario PersistenceStrategy = "NewPerScenario"
)

// SessionEnd says what happens to a session's machine when the session
// times out (hf's addition).
type SessionEnd string

// Session end behaviours.
const (
	// EndDelete ends the session and terminates its claim (the default).
	EndDelete SessionEnd = "Delete"
	// EndPause pauses the machine and keeps it; a keepalive resumes it.
	EndPause SessionEnd = "Pause"
	// EndKeep ends the session and leaves its claim bound.
	EndKeep SessionEnd = "Keep"
)

// legacyEnds are the earlier release's persistenceStrategy values, read as
// onEnd.
var legacyEnds = map[PersistenceStrategy]SessionEnd{"PauseOnEnd": EndPause, "DeleteOnEnd": EndDelete, "KeepOnEnd": EndKeep}

// Session phases.
const (
	SessionPhaseActive = "Active"
	// SessionPhasePaused: an onEnd Pause session that timed out; its
	// machine is paused and kept, and a keepalive makes it Active again.
	SessionPhasePaused = "Paused"
	SessionPhaseEnded  = "Ended"
)

// Session is a user working with machines.
type Session struct {
	TypeMeta
	Metadata ObjectMeta    `json:"metadata"`
	Spec     SessionSpec   `json:"spec"`
	Status   SessionStatus `json:"status"`
}

// SessionSpec describes a session.
type SessionSpec struct {
	// Scenario is the scenario the user is on; Course the course it is
	// part of. Moving a session to another scenario keeps its machine
	// (PersistThroughCourse) or gets a fresh one (NewPerScenario).
	Scenario            string              `json:"scenario,omitempty"`
	Course              string              `json:"course,omitempty"`
	User                string              `json:"user"`
	AccessCode          string              `json:"accessCode,omitempty"`
	ScheduledEvent      string              `json:"scheduledEvent,omitempty"`
	MachineTemplate     string              `json:"machineTemplate,omitempty"`
	PersistenceStrategy PersistenceStrategy `json:"persistenceStrategy,omitempty"`
	// OnEnd is what happens to the machine when the session times out.
	OnEnd SessionEnd `json:"onEnd,omitempty"`
	// Timeout ends the session when no keepalive came for this long (0: the
	// default, DefaultSessionTimeout).
	Timeout Duration `json:"timeout,omitzero"`
}

// DefaultSessionTimeout is how long a session lives without a keepalive.
const DefaultSessionTimeout = time.Hour

// ConditionClaimed is a session's condition while it cannot have its
// claim: False, and why (it names no template, nor does its event; its
// event has not opened; or, on an Ended session, its event is over).
const ConditionClaimed = "Claimed"

// AnnotationKeepalive holds the time (RFC 3339) of a session's last keepalive.
const AnnotationKeepalive = "hf/keepalive"

// EffectiveTimeout is the session's timeout or the default.
func (o *Session) EffectiveTimeout() time.Duration {
	if o.Spec.Timeout.Duration > 0 {
		return o.Spec.Timeout.Duration
	}
	return DefaultSessionTimeout
}

// EffectiveOnEnd is the session's end behaviour or the default.
func (o *Session) EffectiveOnEnd() SessionEnd {
	if o.Spec.OnEnd != "" {
		return o.Spec.OnEnd
	}
	return EndDelete
}

// LastSeen is the later of the session's creation and its last keepalive.
func (o *Session) LastSeen() time.Time {
	last := o.Metadata.CreatedAt
	if t, err := time.Parse(time.RFC3339Nano, o.Metadata.Annotations[AnnotationKeepalive]); err == nil && t.After(last) {
		last = t
	}
	return last
}

// SessionStatus is the session's state.
type SessionStatus struct {
	Phase        string     `json:"phase,omitempty"`
	Conditions   Conditions `json:"conditions,omitempty"`
	MachineClaim string     `json:"machineClaim,omitempty"`
	// Scenario is the scenario MachineClaim serves.
	Scenario string `json:"scenario,omitempty"`
}

// Upgrade reads the earlier release's end behaviours from
// persistenceStrategy into onEnd.
func (o *Session) Upgrade() {
	if e, ok := legacyEnds[o.Spec.PersistenceStrategy]; ok {
		if o.Spec.OnEnd == "" {
			o.Spec.OnEnd = e
		}
		o.Spec.PersistenceStrategy = ""
	}
}

// Meta returns the metadata.
func (o *Session) Meta() *ObjectMeta { return &o.Metadata }

// Validate checks the session.
func (o *Session) Validate() error {
	if err := o.TypeMeta.check(KindSession); err != nil {
		return err
	}
	if err := o.Metadata.Validate(); err != nil {
		return err
	}
	s := &o.Spec
	if s.User == "" {
		return Invalid("spec.user", "is required")
	}
	for f, v := range map[string]string{"spec.accessCode": s.AccessCode, "spec.scheduledEvent": s.ScheduledEvent,
		"spec.machineTemplate": s.MachineTemplate, "spec.scenario": s.Scenario, "spec.course": s.Course} {
		if err := validateRef(f, v); err != nil {
			return err
		}
	}
	if s.Timeout.Duration < 0 {
		return Invalid("spec.timeout", "must not be negative")
	}
	if s.Timeout.Duration > MaxSessionTimeout {
		return Invalid("spec.timeout", "must be at most %s, got %s", MaxSessionTimeout, s.Timeout.Duration)
	}
	if s.OnEnd != "" {
		if err := oneOf("spec.onEnd", s.OnEnd, EndDelete, EndPause, EndKeep); err != nil {
			return err
		}
	}
	if s.PersistenceStrategy != "" {
		return oneOf("spec.persistenceStrategy", s.PersistenceStrategy, PersistThroughCourse, NewPerScenario)
	}
	return nil
}
