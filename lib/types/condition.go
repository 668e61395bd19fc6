package types

import (
	"slices"
	"time"
)

// APIVersion is the group and version of the model (HobbyFarm's v4alpha1
// proposal); every object returns it and an object may send it or omit it.
const APIVersion = "hobbyfarm.io/v4alpha1"

// ConditionStatus is whether a condition holds.
type ConditionStatus string

// Condition statuses.
const (
	ConditionTrue    ConditionStatus = "True"
	ConditionFalse   ConditionStatus = "False"
	ConditionUnknown ConditionStatus = "Unknown"
)

// Condition is the generic condition of the proposal's statuses: written by
// the object's owner, it says in a sentence why the object is as it is (a
// claim why it waits or failed, a set why it cannot fill, a machine why it
// was lost).
type Condition struct {
	Type               string          `json:"type"`
	Status             ConditionStatus `json:"status"`
	LastUpdateTime     time.Time       `json:"lastUpdateTime,omitzero"`
	LastTransitionTime time.Time       `json:"lastTransitionTime,omitzero"`
	Reason             string          `json:"reason,omitempty"`
	Message            string          `json:"message,omitempty"`
}

// Conditions is a status's list of conditions, one per type.
type Conditions []Condition

// Get returns the condition of type t, or nil.
func (cs Conditions) Get(t string) *Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

// Set returns cs with the condition of c's type set to c at now: its
// transition time moves only when its status changes, its update time only
// when anything does. changed reports whether cs differs from before.
func (cs Conditions) Set(c Condition, now time.Time) (out Conditions, changed bool) {
	out = slices.Clone(cs)
	cur := out.Get(c.Type)
	if cur == nil {
		c.LastUpdateTime, c.LastTransitionTime = now, now
		return append(out, c), true
	}
	if cur.Status == c.Status && cur.Reason == c.Reason && cur.Message == c.Message {
		return out, false
	}
	c.LastUpdateTime, c.LastTransitionTime = now, cur.LastTransitionTime
	if cur.Status != c.Status {
		c.LastTransitionTime = now
	}
	*cur = c
	return out, true
}

// Remove returns cs without the condition of type t.
func (cs Conditions) Remove(t string) (out Conditions, changed bool) {
	out = slices.DeleteFunc(slices.Clone(cs), func(c Condition) bool { return c.Type == t })
	return out, len(out) != len(cs)
}

// ValidateConditions checks a list of conditions: one per type, each
// with a status of True, False or Unknown.
func ValidateConditions(field string, cs Conditions) error {
	seen := map[string]bool{}
	for i, c := range cs {
		f := fieldIdx(field, i)
		if c.Type == "" {
			return Invalid(f+".type", "is required")
		}
		if seen[c.Type] {
			return Invalid(f+".type", "%q is given twice", c.Type)
		}
		seen[c.Type] = true
		if err := oneOf(f+".status", c.Status, ConditionTrue, ConditionFalse, ConditionUnknown); err != nil {
			return err
		}
	}
	return nil
}
