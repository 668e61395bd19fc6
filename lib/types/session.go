package types

import "time"

// PersistenceStrategy says what happens to a session's machine when it ends.
type PersistenceStrategy string

// Persistence strategies.
const (
	PersistPauseOnEnd  PersistenceStrategy = "PauseOnEnd"
	PersistDeleteOnEnd PersistenceStrategy = "DeleteOnEnd"
	PersistKeepOnEnd   PersistenceStrategy = "KeepOnEnd"
	SessionPhaseActive                     = "Active"
	// SessionPhasePaused: a PauseOnEnd session that timed out; its machine
	// is paused and kept, and a keepalive makes it Active again.
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
	User                string              `json:"user"`
	AccessCode          string              `json:"accessCode,omitempty"`
	ScheduledEvent      string              `json:"scheduledEvent,omitempty"`
	MachineTemplate     string              `json:"machineTemplate,omitempty"`
	PersistenceStrategy PersistenceStrategy `json:"persistenceStrategy,omitempty"`
	// Timeout ends the session when no keepalive came for this long (0: the
	// default, DefaultSessionTimeout).
	Timeout Duration `json:"timeout,omitzero"`
}

// DefaultSessionTimeout is how long a session lives without a keepalive.
const DefaultSessionTimeout = time.Hour

// AnnotationKeepalive holds the time (RFC 3339) of a session's last keepalive.
const AnnotationKeepalive = "hf/keepalive"

// EffectiveTimeout is the session's timeout or the default.
func (o *Session) EffectiveTimeout() time.Duration {
	if o.Spec.Timeout.Duration > 0 {
		return o.Spec.Timeout.Duration
	}
	return DefaultSessionTimeout
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
	Phase        string `json:"phase,omitempty"`
	MachineClaim string `json:"machineClaim,omitempty"`
}

// Meta returns the metadata.
func (o *Session) Meta() *ObjectMeta { return &o.Metadata }

// Validate checks the session.
func (o *Session) Validate() error {
	if err := checkKind(o.Kind, KindSession); err != nil {
		return err
	}
	if err := o.Metadata.Validate(); err != nil {
		return err
	}
	s := &o.Spec
	if s.User == "" {
		return Invalid("spec.user", "is required")
	}
	for f, v := range map[string]string{"spec.accessCode": s.AccessCode, "spec.scheduledEvent": s.ScheduledEvent, "spec.machineTemplate": s.MachineTemplate} {
		if err := validateRef(f, v); err != nil {
			return err
		}
	}
	if s.Timeout.Duration < 0 {
		return Invalid("spec.timeout", "must not be negative")
	}
	if s.PersistenceStrategy != "" {
		return oneOf("spec.persistenceStrategy", s.PersistenceStrategy, PersistPauseOnEnd, PersistDeleteOnEnd, PersistKeepOnEnd)
	}
	return nil
}
