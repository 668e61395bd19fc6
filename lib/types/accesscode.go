package types

import "time"

// AccessCodePhase says whether a code can be used now.
type AccessCodePhase string

// Access code phases.
const (
	AccessCodeActive   AccessCodePhase = "Active"
	AccessCodeInactive AccessCodePhase = "Inactive"
)

// AccessCode is a pre-shared key granting machine sets and events.
type AccessCode struct {
	TypeMeta
	Metadata ObjectMeta       `json:"metadata"`
	Spec     AccessCodeSpec   `json:"spec"`
	Status   AccessCodeStatus `json:"status"`
}

// AccessCodeSpec describes a code.
type AccessCodeSpec struct {
	Code            string    `json:"code"`
	MachineSets     []string  `json:"machineSets,omitempty"`
	ScheduledEvents []string  `json:"scheduledEvents,omitempty"`
	NotBefore       time.Time `json:"notBefore,omitzero"`
	NotAfter        time.Time `json:"notAfter,omitzero"`
}

// AccessCodeStatus is the code's state.
type AccessCodeStatus struct {
	Phase AccessCodePhase `json:"phase,omitempty"`
}

// Meta returns the metadata.
func (o *AccessCode) Meta() *ObjectMeta { return &o.Metadata }

// Validate checks the code.
func (o *AccessCode) Validate() error {
	if err := checkKind(o.Kind, KindAccessCode); err != nil {
		return err
	}
	if err := o.Metadata.Validate(); err != nil {
		return err
	}
	s := &o.Spec
	if len(s.Code) < 4 || len(s.Code) > 128 {
		return Invalid("spec.code", "must be 4 to 128 characters")
	}
	if err := validateRefs("spec.machineSets", s.MachineSets); err != nil {
		return err
	}
	if err := validateRefs("spec.scheduledEvents", s.ScheduledEvents); err != nil {
		return err
	}
	if !s.NotBefore.IsZero() && !s.NotAfter.IsZero() && !s.NotAfter.After(s.NotBefore) {
		return Invalid("spec.notAfter", "must be after spec.notBefore")
	}
	return nil
}
