package types

// PersistenceStrategy says what happens to a session's machine when it ends.
type PersistenceStrategy string

// Persistence strategies.
const (
	PersistPauseOnEnd  PersistenceStrategy = "PauseOnEnd"
	PersistDeleteOnEnd PersistenceStrategy = "DeleteOnEnd"
	PersistKeepOnEnd   PersistenceStrategy = "KeepOnEnd"
	SessionPhaseActive                     = "Active"
	SessionPhaseEnded                      = "Ended"
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
	if s.PersistenceStrategy != "" {
		return oneOf("spec.persistenceStrategy", s.PersistenceStrategy, PersistPauseOnEnd, PersistDeleteOnEnd, PersistKeepOnEnd)
	}
	return nil
}
