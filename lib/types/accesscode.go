package types

import "time"

// LabelAccessCode names, on a claim or session, the AccessCode object whose
// secret the claim presented; the API sets it once it has checked the
// secret (it is under hf/, which users cannot write), and a set reserved
// for an access code binds only claims that carry it.
const LabelAccessCode = "hf/access-code"

// AccessCodeState says whether a code can be used now.
type AccessCodeState string

// Access code states.
const (
	AccessCodeActive   AccessCodeState = "Active"
	AccessCodeInactive AccessCodeState = "Inactive"
)

// AccessCode is a pre-shared key granting machine sets, events, scenarios
// and courses.
type AccessCode struct {
	TypeMeta
	Metadata ObjectMeta       `json:"metadata"`
	Spec     AccessCodeSpec   `json:"spec"`
	Status   AccessCodeStatus `json:"status"`
}

// AccessCodeSpec describes a code.
type AccessCodeSpec struct {
	// Code is the secret a claim must give (spec.accessCode of a claim
	// names the AccessCode object and is checked against it).
	Code string `json:"code"`
	// Scenarios and Courses are the content the code grants (kept for the
	// UI; hf has no content of its own).
	Scenarios       []string `json:"scenarios,omitempty"`
	Courses         []string `json:"courses,omitempty"`
	ScheduledEvents []string `json:"scheduledEvents,omitempty"`
	MachineSets     []string `json:"machineSets,omitempty"`
	// NotBefore and NotAfter bound when the code may be used.
	NotBefore time.Time `json:"notBefore,omitzero"`
	NotAfter  time.Time `json:"notAfter,omitzero"`
	// Disabled switches the code off whatever the clock says (hf's
	// addition; status.status is then Inactive).
	Disabled bool `json:"disabled,omitempty"`
}

// AccessCodeStatus is the code's state, kept by the code's owner in the
// cluster: Active between notBefore and notAfter unless disabled.
type AccessCodeStatus struct {
	Status     AccessCodeState `json:"status,omitempty"`
	Conditions Conditions      `json:"conditions,omitempty"`
	// Phase is what an admin wrote before status.status was kept by the
	// system: Inactive there is read as spec.disabled (see Upgrade); it is
	// never written back.
	Phase AccessCodeState `json:"phase,omitempty"`
}

// StateAt is the code's state at now.
func (o *AccessCode) StateAt(now time.Time) AccessCodeState {
	s := &o.Spec
	switch {
	case s.Disabled:
		return AccessCodeInactive
	case !s.NotBefore.IsZero() && now.Before(s.NotBefore):
		return AccessCodeInactive
	case !s.NotAfter.IsZero() && !now.Before(s.NotAfter):
		return AccessCodeInactive
	}
	return AccessCodeActive
}

// NextChange is the next time after now the code's state changes by the
// clock (zero: never).
func (o *AccessCode) NextChange(now time.Time) time.Time {
	for _, t := range []time.Time{o.Spec.NotBefore, o.Spec.NotAfter} {
		if !t.IsZero() && t.After(now) {
			return t
		}
	}
	return time.Time{}
}

// Upgrade reads the admin's switch of the earlier release.
func (o *AccessCode) Upgrade() {
	if o.Status.Phase == AccessCodeInactive {
		o.Spec.Disabled = true
	}
	o.Status.Phase = ""
}

// Meta returns the metadata.
func (o *AccessCode) Meta() *ObjectMeta { return &o.Metadata }

// Validate checks the code.
func (o *AccessCode) Validate() error {
	if err := o.TypeMeta.check(KindAccessCode); err != nil {
		return err
	}
	if err := o.Metadata.Validate(); err != nil {
		return err
	}
	s := &o.Spec
	if len(s.Code) < 4 || len(s.Code) > 128 {
		return Invalid("spec.code", "must be 4 to 128 characters")
	}
	for f, refs := range map[string][]string{"spec.machineSets": s.MachineSets, "spec.scheduledEvents": s.ScheduledEvents,
		"spec.scenarios": s.Scenarios, "spec.courses": s.Courses} {
		if err := validateRefs(f, refs); err != nil {
			return err
		}
	}
	if !s.NotBefore.IsZero() && !s.NotAfter.IsZero() && !s.NotAfter.After(s.NotBefore) {
		return Invalid("spec.notAfter", "must be after spec.notBefore")
	}
	if o.Status.Phase != "" {
		if err := oneOf("status.phase", o.Status.Phase, AccessCodeActive, AccessCodeInactive); err != nil {
			return err
		}
	}
	return nil
}
