package openapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Fields a PUT may not change: a claim's spec, which its election,
// binding and machine were made from; and what facets of other writers
// hold (types.Facet, lib/cluster/doc.go): a machine is its node's owner
// facet alone, and a Node its node's report but for the maintenance flag,
// so a PUT could only be ignored there. A PUT may leave such a field out
// (it keeps its value: the object read back from a file of the original
// request, without what the server filled in, is no change) or give it as
// it is; any other value is a 409 naming the field. (Status is the
// cluster's on every kind but Environment, and is not taken from a PUT
// at all.)

// keepFixed holds o, an update of stored, to the fields that cannot change
// through the API and fills in the ones it left out.
func keepFixed(o, stored types.Object) error {
	switch v := o.(type) {
	case *types.MachineClaim:
		have := stored.(*types.MachineClaim)
		if field, was, got := changedField("spec", have.Spec, v.Spec); field != "" {
			return fixedErr(field, was, got, "cannot change after creation; delete the claim and create another")
		}
		v.Spec = have.Spec
	case *types.Machine:
		have := stored.(*types.Machine)
		if err := keepMeta(&v.Metadata, &have.Metadata, "is written by the machine's node only; the API changes nothing of a machine (delete it to release it)"); err != nil {
			return err
		}
		if field, was, got := changedField("spec", have.Spec, v.Spec); field != "" {
			return fixedErr(field, was, got, "is written by the machine's node only; the API changes nothing of a machine (delete it to release it)")
		}
		v.Spec = have.Spec
	case *types.Node:
		have := stored.(*types.Node)
		const why = "is what the node reports of itself; the API writes spec.maintenance only (hf-cli node drain|undrain)"
		if err := keepMeta(&v.Metadata, &have.Metadata, why); err != nil {
			return err
		}
		maint := v.Spec.Maintenance
		v.Spec.Maintenance = have.Spec.Maintenance
		if field, was, got := changedField("spec", have.Spec, v.Spec); field != "" {
			return fixedErr(field, was, got, why)
		}
		v.Spec = have.Spec
		v.Spec.Maintenance = maint
	}
	return nil
}

// keepMeta holds a PUT's labels and annotations to the stored ones, for a
// kind whose metadata the API does not write.
func keepMeta(m, have *types.ObjectMeta, why string) error {
	for _, f := range []struct {
		field     string
		got, have map[string]string
	}{{"metadata.labels", m.Labels, have.Labels}, {"metadata.annotations", m.Annotations, have.Annotations}} {
		if field, was, got := changedField(f.field, f.have, f.got); field != "" {
			return fixedErr(field, was, got, why)
		}
	}
	m.Labels, m.Annotations = have.Labels, have.Annotations
	return nil
}

// fixedErr is the 409 of a PUT that changes field from was to got. The
// message names the field too: clients show a conflict's message alone.
func fixedErr(field string, was, got any, why string) error {
	return newErr(http.StatusConflict, CodeConflict, field, "%s %s (is %s, the request says %s)", field, why, shown(was), shown(got))
}

// shown is v as JSON, cut short.
func shown(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	if len(b) > 80 {
		return string(b[:77]) + "..."
	}
	return string(b)
}

// changedField names the first field (as its JSON path under prefix) that
// got, a struct, sets to other than what have holds, with both values; ""
// when there is none. A field got leaves empty is not a change.
func changedField(prefix string, have, got any) (field string, was, is any) {
	v := []reflect.Value{reflect.ValueOf(have), reflect.ValueOf(got)}
	field, vals := firstField(prefix, v, func(v []reflect.Value) bool {
		return !empty(v[1]) && !reflect.DeepEqual(v[0].Interface(), v[1].Interface())
	})
	if field == "" {
		return "", nil, nil
	}
	return field, vals[0].Interface(), vals[1].Interface()
}

var (
	marshalerType = reflect.TypeFor[json.Marshaler]()
	timeType      = reflect.TypeFor[time.Time]()
)

// firstField finds the first field of vals (values of one struct type)
// for which differs holds, by its JSON path under path, and its values.
// Structs are looked into field by field, so the innermost field is
// named, unless they encode themselves (a duration, a time).
func firstField(path string, vals []reflect.Value, differs func([]reflect.Value) bool) (string, []reflect.Value) {
	t := vals[0].Type()
	if t.Kind() != reflect.Struct || t == timeType || t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
		if differs(vals) {
			return path, vals
		}
		return "", nil
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fields := make([]reflect.Value, len(vals))
		for j, v := range vals {
			fields[j] = v.Field(i)
		}
		if p, vs := firstField(path+"."+name, fields, differs); p != "" {
			return p, vs
		}
	}
	return "", nil
}

// empty reports whether v is its zero value, or an empty map or slice.
func empty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Map, reflect.Slice:
		return v.Len() == 0
	}
	return v.IsZero()
}

// checkEventSet refuses a PUT of a machine set that a scheduled event
// created when it changes a field the event decides (409 naming the field
// and the event): the event's reconcile sets the field back within
// moments (scheduler.EventSetSpec), so the change would read as done and
// be undone. Fields the event leaves to the set change as usual.
func (s *Server) checkEventSet(o, stored types.Object) error {
	set, ok := o.(*types.MachineSet)
	if !ok {
		return nil
	}
	have := stored.(*types.MachineSet)
	name := have.Metadata.Labels[scheduler.LabelScheduledEvent]
	if name == "" {
		name = set.Metadata.Labels[scheduler.LabelScheduledEvent]
	}
	if name == "" {
		return nil
	}
	ev, err := store.Get[types.ScheduledEvent](s.st, types.KindScheduledEvent, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if _, owned := scheduler.EventSetSpec(s.cfg.Now(), *ev, *have); owned && set.Metadata.Labels[scheduler.LabelScheduledEvent] != name {
		// The label is how the API knows the set's event: relabelled,
		// the set's spec could be changed behind the event's back.
		return newErr(http.StatusConflict, CodeConflict, "metadata.labels."+scheduler.LabelScheduledEvent,
			"machine set %s is kept by scheduled event %s, which this label names: it cannot change", set.Metadata.Name, name)
	}
	want, owned := scheduler.EventSetSpec(s.cfg.Now(), *ev, *set)
	if !owned {
		return nil
	}
	v := []reflect.Value{reflect.ValueOf(have.Spec), reflect.ValueOf(set.Spec), reflect.ValueOf(want)}
	field, vals := firstField("spec", v, func(v []reflect.Value) bool {
		changed := !reflect.DeepEqual(v[0].Interface(), v[1].Interface())
		return changed && !reflect.DeepEqual(v[1].Interface(), v[2].Interface())
	})
	if field == "" {
		return nil
	}
	return newErr(http.StatusConflict, CodeConflict, field,
		"machine set %s is kept by scheduled event %s, which sets %s back to %s: change the event instead (its spec.requiredMachines, or spec.expectedUsers)",
		set.Metadata.Name, ev.Metadata.Name, field, shown(vals[2].Interface()))
}
