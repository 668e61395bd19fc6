package openapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

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

// fixedErr is the 409 of a PUT that changes field from was to got.
func fixedErr(field string, was, got any, why string) error {
	return newErr(http.StatusConflict, CodeConflict, field, "%s (is %s, the request says %s)", why, shown(was), shown(got))
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
// when there is none. A field got leaves empty is not a change. Structs
// are compared field by field, so the innermost field is named, unless
// they encode themselves (a duration, a time).
func changedField(prefix string, have, got any) (field string, was, is any) {
	return changedValue(prefix, reflect.ValueOf(have), reflect.ValueOf(got))
}

var (
	marshalerType = reflect.TypeFor[json.Marshaler]()
	timeType      = reflect.TypeFor[time.Time]()
)

func changedValue(path string, have, got reflect.Value) (string, any, any) {
	if empty(got) {
		return "", nil, nil
	}
	t := got.Type()
	if t.Kind() != reflect.Struct || t == timeType || t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType) {
		if !reflect.DeepEqual(have.Interface(), got.Interface()) {
			return path, have.Interface(), got.Interface()
		}
		return "", nil, nil
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
		if p, was, is := changedValue(path+"."+name, have.Field(i), got.Field(i)); p != "" {
			return p, was, is
		}
	}
	return "", nil, nil
}

// empty reports whether v is its zero value, or an empty map or slice.
func empty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Map, reflect.Slice:
		return v.Len() == 0
	}
	return v.IsZero()
}
