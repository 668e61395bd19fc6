package scheduler

import (
	"fmt"
	"slices"
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// CheckAccessCode checks a claim against the access code whose secret it
// presented (spec.accessCode), at now. A claim that presents none passes;
// code is the AccessCode with that secret (nil when none has it). The code
// must be active (not disabled, now within [notBefore, notAfter)) and must
// grant every machine set the claim lists and the scheduled event it names.
// A set counts as granted when the code lists it, or when it is a set
// created by an event the code grants (EventSetName), so a code for an
// event need not list the event's sets. Messages never repeat the secret.
//
// Errors are *types.FieldError (errors.Is types.ErrInvalid) naming the claim's
// field at fault: spec.accessCode, spec.bindStrategyMachineSets[i] or
// spec.scheduledEvent.
func CheckAccessCode(now time.Time, code *types.AccessCode, claim types.MachineClaim) error {
	if claim.Spec.AccessCode == "" {
		return nil
	}
	const field = "spec.accessCode"
	switch {
	case code == nil:
		return types.Invalid(field, "no access code matches")
	case code.Spec.Disabled:
		return types.Invalid(field, "the access code is disabled; ask its owner to enable it")
	case !code.Spec.NotBefore.IsZero() && now.Before(code.Spec.NotBefore):
		return types.Invalid(field, "the access code is valid from %s", stamp(code.Spec.NotBefore))
	case !code.Spec.NotAfter.IsZero() && !now.Before(code.Spec.NotAfter):
		return types.Invalid(field, "the access code expired at %s", stamp(code.Spec.NotAfter))
	}
	for i, set := range claim.Spec.MachineSets {
		if !codeGrantsSet(code, set) {
			return types.Invalid(fmt.Sprintf("spec.bindStrategyMachineSets[%d]", i), "the access code does not grant machine set %s", set)
		}
	}
	if ev := claim.Spec.ScheduledEvent; ev != "" && !slices.Contains(code.Spec.ScheduledEvents, ev) {
		return types.Invalid("spec.scheduledEvent", "the access code does not grant scheduled event %s", ev)
	}
	return nil
}

// codeGrantsSet reports whether code grants set, directly or through an event.
func codeGrantsSet(code *types.AccessCode, set string) bool {
	if slices.Contains(code.Spec.MachineSets, set) {
		return true
	}
	for _, ev := range code.Spec.ScheduledEvents {
		if isEventSetName(ev, set) {
			return true
		}
	}
	return false
}

// stamp formats t for a message: RFC 3339 in UTC.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
