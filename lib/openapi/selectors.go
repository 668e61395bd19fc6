package openapi

import (
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/hf-fleet/hf/lib/types"
)

// selector is what a list or a watch asks for: a labelSelector and a
// fieldSelector, both in Kubernetes' syntax and parsed by its parsers.
type selector struct {
	labels labels.Selector
	fields fields.Selector
}

// empty reports whether the selector selects everything.
func (s selector) empty() bool {
	return (s.labels == nil || s.labels.Empty()) && (s.fields == nil || s.fields.Empty())
}

// matches reports whether obj is selected.
func (s selector) matches(obj types.Object) bool {
	if s.labels != nil && !s.labels.Matches(labels.Set(obj.Meta().Labels)) {
		return false
	}
	if s.fields != nil && !s.fields.Empty() && !s.fields.Matches(objectFields(obj)) {
		return false
	}
	return true
}

// parseSelectors reads ?labelSelector= and ?fieldSelector= for a list or
// watch of kinds. A field must be selectable on every one of kinds: a
// field the server does not know is a 400 naming it, never a selector
// that silently matches nothing.
func parseSelectors(labelSel, fieldSel string, kinds []string) (selector, error) {
	ls, err := parseSelector(labelSel)
	if err != nil {
		return selector{}, err
	}
	fs, err := fields.ParseSelector(fieldSel)
	if err != nil {
		return selector{}, badRequest("fieldSelector", "%v", err)
	}
	for _, r := range fs.Requirements() {
		for _, kind := range kinds {
			if !slices.Contains(selectableFields(kind), r.Field) {
				return selector{}, badRequest("fieldSelector", "field %q is not selectable on %s; selectable: %s",
					r.Field, types.Plural(kind), strings.Join(selectableFields(kind), ", "))
			}
		}
	}
	return selector{labels: ls, fields: fs}, nil
}

// fieldGetters are the selectable fields of each kind beside metadata.name:
// the ones a person filters by (whose, which template, which node, which
// phase). Values are the strings the object's JSON holds.
var fieldGetters = map[string]map[string]func(types.Object) string{
	types.KindMachineClaim: {
		"spec.user":            func(o types.Object) string { return o.(*types.MachineClaim).Spec.User },
		"spec.machineTemplate": func(o types.Object) string { return o.(*types.MachineClaim).Spec.MachineTemplate },
		"spec.scheduledEvent":  func(o types.Object) string { return o.(*types.MachineClaim).Spec.ScheduledEvent },
		"spec.environment":     func(o types.Object) string { return o.(*types.MachineClaim).Spec.Environment },
		"status.phase":         func(o types.Object) string { return string(o.(*types.MachineClaim).Status.Phase) },
		"status.machine":       func(o types.Object) string { return o.(*types.MachineClaim).Status.Machine },
		"status.node":          func(o types.Object) string { return o.(*types.MachineClaim).Status.Node },
		"status.driver":        func(o types.Object) string { return o.(*types.MachineClaim).Status.Driver },
	},
	types.KindMachine: {
		"spec.machineTemplate": func(o types.Object) string { return o.(*types.Machine).Spec.MachineTemplate },
		"spec.machineSet":      func(o types.Object) string { return o.(*types.Machine).Spec.MachineSet },
		"spec.environment":     func(o types.Object) string { return o.(*types.Machine).Spec.Environment },
		"spec.node":            func(o types.Object) string { return o.(*types.Machine).Spec.Node },
		"spec.driver":          func(o types.Object) string { return o.(*types.Machine).Spec.Driver },
		"spec.claim":           func(o types.Object) string { return o.(*types.Machine).Spec.Claim },
		"status.phase":         func(o types.Object) string { return string(o.(*types.Machine).Status.Phase) },
	},
	types.KindMachineSet: {
		"spec.machineTemplate": func(o types.Object) string { return o.(*types.MachineSet).Spec.MachineTemplate },
		"spec.environment":     func(o types.Object) string { return o.(*types.MachineSet).Spec.Environment },
	},
	types.KindSession: {
		"spec.user":            func(o types.Object) string { return o.(*types.Session).Spec.User },
		"spec.machineTemplate": func(o types.Object) string { return o.(*types.Session).Spec.MachineTemplate },
		"spec.scheduledEvent":  func(o types.Object) string { return o.(*types.Session).Spec.ScheduledEvent },
		"status.phase":         func(o types.Object) string { return o.(*types.Session).Status.Phase },
		"status.machineClaim":  func(o types.Object) string { return o.(*types.Session).Status.MachineClaim },
	},
	types.KindScheduledEvent: {
		"status.phase": func(o types.Object) string { return string(o.(*types.ScheduledEvent).Status.Phase) },
	},
	types.KindNode: {
		"status.phase": func(o types.Object) string { return string(o.(*types.Node).Status.Phase) },
	},
}

// selectableFields lists kind's selectable fields, sorted.
func selectableFields(kind string) []string {
	return append([]string{"metadata.name"}, slices.Sorted(maps.Keys(fieldGetters[kind]))...)
}

// objectFields are obj's selectable fields and their values.
func objectFields(obj types.Object) fields.Set {
	getters := fieldGetters[obj.GetKind()]
	set := make(fields.Set, len(getters)+1)
	set["metadata.name"] = obj.Meta().Name
	for f, get := range getters {
		set[f] = get(obj)
	}
	return set
}
