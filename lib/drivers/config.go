package drivers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/types"
)

// DecodeConfig decodes a driver's JSON configuration (its own config or a
// template's providerConfiguration entry) strictly into v, a non-nil pointer
// that already holds the defaults. Empty or `null` cfg leaves the defaults.
// Unknown keys, wrong types and trailing data are errors that name the key
// (`unknown key "cpu"`, `cpu_alter: want a number, got string`); every error
// wraps types.ErrInvalid, so bad input is reported as such.
func DecodeConfig(cfg []byte, v any) error {
	if rv := reflect.ValueOf(v); rv.Kind() != reflect.Pointer || rv.IsNil() {
		// A programming error, not bad input: no ErrInvalid here.
		return fmt.Errorf("decode config: want a non-nil pointer, got %T", v)
	}
	trimmed := bytes.TrimSpace(cfg)
	if len(trimmed) == 0 || bytes.Equal(trimmed, []byte("null")) {
		return nil
	}
	err := decodeStrict(trimmed, v)
	if err == nil {
		return nil
	}
	var fe *types.FieldError
	if errors.As(err, &fe) {
		return err
	}
	// Errors from a field's own UnmarshalJSON (a duration, say) carry no key:
	// find the first key that fails on its own and name it.
	if key, kerr := blame(trimmed, reflect.TypeOf(v).Elem()); key != "" {
		if errors.As(kerr, &fe) {
			return kerr
		}
		return types.Invalid(key, "%s", kerr.Error())
	}
	return types.Invalid("", "%s", err.Error())
}

// decodeStrict decodes one JSON value into v, rejecting unknown keys and trailing
// data, and turns the decoder's errors into FieldErrors where it can.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return describeJSONError(err, reflect.TypeOf(v))
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return types.Invalid("", "unexpected data after the config object")
	}
	return nil
}

func describeJSONError(err error, t reflect.Type) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn):
		return types.Invalid("", "not valid JSON at offset %d: %s", syn.Offset, syn.Error())
	case errors.As(err, &typ):
		return types.Invalid(jsonPath(t, typ.Field), "want %s, got %s", types.DescribeType(typ.Type), typ.Value)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return types.Invalid("", "not valid JSON: unexpected end")
	}
	// encoding/json reports unknown keys only as text: `json: unknown field "x"`.
	if rest, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return types.Invalid("", "unknown key %s", rest)
	}
	return err
}

// jsonPath turns the decoder's field path into the keys a user wrote: it drops
// the Go names of embedded structs ("Alter.cpu_alter" -> "cpu_alter").
func jsonPath(t reflect.Type, field string) string {
	if field == "" {
		return ""
	}
	var keep []string
	for _, seg := range strings.Split(field, ".") {
		for t != nil && t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == nil || t.Kind() != reflect.Struct {
			keep, t = append(keep, seg), nil
			continue
		}
		if sf, ok := t.FieldByName(seg); ok && sf.Anonymous && sf.Tag.Get("json") == "" {
			t = sf.Type
			continue
		}
		keep = append(keep, seg)
		t = fieldByJSONName(t, seg)
	}
	return strings.Join(keep, ".")
}

// fieldByJSONName returns the type of the field of struct t that JSON calls
// name, looking into embedded structs, or nil.
func fieldByJSONName(t reflect.Type, name string) reflect.Type {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, _, _ := strings.Cut(sf.Tag.Get("json"), ",")
		if tag == name || (tag == "" && strings.EqualFold(sf.Name, name)) {
			return sf.Type
		}
		ft := sf.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if sf.Anonymous && tag == "" && ft.Kind() == reflect.Struct {
			if found := fieldByJSONName(ft, name); found != nil {
				return found
			}
		}
	}
	return nil
}

// blame decodes each top-level key of the object in data on its own into a fresh
// value of type t and returns the first key (in document order) that fails.
func blame(data []byte, t reflect.Type) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", nil
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", nil
		}
		key, ok := tok.(string)
		if !ok {
			return "", nil
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return "", nil
		}
		one, err := json.Marshal(map[string]json.RawMessage{key: raw})
		if err != nil {
			return "", nil
		}
		if err := decodeStrict(one, reflect.New(t).Interface()); err != nil {
			return key, err
		}
	}
	return "", nil
}

// TemplateEntry finds a template's providerConfiguration entry for a driver
// instance (its instance name first, then its driver type: the lookup of
// scheduler.TemplateEntry, without a Provider) and decodes it with parse.
// Errors name the field: the missing entry, or the bad key inside it
// ("spec.providerConfiguration.docker.image"). It returns the entry's path.
func TemplateEntry[T any](t types.MachineTemplate, instance, driverType string, parse func([]byte) (T, error)) (T, string, error) {
	var zero T
	key, ok := scheduler.TemplateEntry(&t, instance, driverType, "")
	if !ok {
		if instance == "" || instance == driverType {
			return zero, "", types.Invalid("spec.providerConfiguration", "has no entry for %q", driverType)
		}
		return zero, "", types.Invalid("spec.providerConfiguration", "has no entry for %q or %q", instance, driverType)
	}
	field := "spec.providerConfiguration." + key
	v, err := parse(t.Spec.ProviderConfiguration[key])
	if err != nil {
		return zero, field, PrefixField(field, err)
	}
	return v, field, nil
}

// PrefixField puts prefix in front of the field a *types.FieldError names, so a
// key inside a nested config reads as a full path
// ("spec.providerConfiguration.docker.image"). Other errors pass unchanged.
func PrefixField(prefix string, err error) error {
	var fe *types.FieldError
	if prefix == "" || !errors.As(err, &fe) {
		return err
	}
	field := prefix
	if fe.Field != "" {
		field += "." + fe.Field
	}
	return &types.FieldError{Field: field, Message: fe.Message}
}
