package types

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DataType is the type of a property's values.
type DataType string

// Data types.
const (
	DataString  DataType = "string"
	DataInteger DataType = "integer"
	DataFloat   DataType = "float"
	DataBoolean DataType = "boolean"
)

// ValueType says whether a property holds one value, a list or a map.
type ValueType string

// Value types.
const (
	ValueScalar ValueType = "scalar"
	ValueArray  ValueType = "array"
	ValueMap    ValueType = "map"
)

// Property defines one configuration item a Provider takes, or one item of
// machine information it reports: its type and the checks its values pass.
// Values travel as strings (the proposal's map[string]string configuration):
// a scalar as its text, an array or a map as JSON.
type Property struct {
	// Name is the property's key. In the list form it is given here; in the
	// map form (HobbyFarm's later shape) it is the map key.
	Name        string    `json:"name,omitempty"`
	DataType    DataType  `json:"dataType,omitempty"`
	ValueType   ValueType `json:"valueType,omitempty"`
	DisplayName string    `json:"displayName,omitempty"`
	Required    bool      `json:"required,omitempty"`
	Minimum     *float64  `json:"minimum,omitempty"`
	Maximum     *float64  `json:"maximum,omitempty"`
	MinLength   *int64    `json:"minLength,omitempty"`
	MaxLength   *int64    `json:"maxLength,omitempty"`
	Format      string    `json:"format,omitempty"`
	Pattern     string    `json:"pattern,omitempty"`
	Enum        []string  `json:"enum,omitempty"`
	Default     *string   `json:"default,omitempty"`
	UniqueItems bool      `json:"uniqueItems,omitempty"`
}

// Properties is a list of property definitions. It decodes from the
// proposal's list of properties, from HobbyFarm's later map keyed by name,
// and from hf's earlier forms (a list of names; a map of name to
// description); it encodes as the list, sorted by name when it came as a map.
type Properties []Property

// UnmarshalJSON takes any of the forms above.
func (ps *Properties) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*ps = nil
		return nil
	case len(b) > 0 && b[0] == '[':
		var raw []json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			return err
		}
		out := make(Properties, 0, len(raw))
		for i, r := range raw {
			p, err := decodeProperty(r)
			if err != nil {
				return fmt.Errorf("[%d]: %w", i, err)
			}
			out = append(out, p)
		}
		*ps = out
		return nil
	case len(b) > 0 && b[0] == '{':
		var raw map[string]json.RawMessage
		if err := json.Unmarshal(b, &raw); err != nil {
			return err
		}
		out := make(Properties, 0, len(raw))
		for _, name := range slices.Sorted(maps.Keys(raw)) {
			r := bytes.TrimSpace(raw[name])
			var p Property
			if len(r) > 0 && r[0] == '"' {
				// hf's earlier form: name -> description.
				if err := json.Unmarshal(r, &p.DisplayName); err != nil {
					return err
				}
			} else {
				var err error
				if p, err = decodeProperty(r); err != nil {
					return fmt.Errorf("%s: %w", name, err)
				}
			}
			if p.Name != "" && p.Name != name {
				return fmt.Errorf("%s: name is %q", name, p.Name)
			}
			p.Name = name
			out = append(out, p)
		}
		*ps = out
		return nil
	}
	return fmt.Errorf("want a list of properties or a map of them by name")
}

// decodeProperty decodes one property strictly, or a bare name.
func decodeProperty(b []byte) (Property, error) {
	var p Property
	if len(b) > 0 && b[0] == '"' {
		err := json.Unmarshal(b, &p.Name)
		return p, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(&p)
	return p, err
}

// Get returns the property named name, or nil.
func (ps Properties) Get(name string) *Property {
	for i := range ps {
		if ps[i].Name == name {
			return &ps[i]
		}
	}
	return nil
}

// Names returns the properties' names.
func (ps Properties) Names() []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// validate checks the definitions themselves.
func (ps Properties) validate(field string) error {
	seen := map[string]bool{}
	for i, p := range ps {
		f := fieldIdx(field, i)
		if p.Name == "" {
			return Invalid(f+".name", "is required")
		}
		if seen[p.Name] {
			return Invalid(f+".name", "%q is defined twice", p.Name)
		}
		seen[p.Name] = true
		if p.DataType != "" {
			if err := oneOf(f+".dataType", p.DataType, DataString, DataInteger, DataFloat, DataBoolean); err != nil {
				return err
			}
		}
		if p.ValueType != "" {
			if err := oneOf(f+".valueType", p.ValueType, ValueScalar, ValueArray, ValueMap); err != nil {
				return err
			}
		}
		if p.Pattern != "" {
			if _, err := regexp.Compile(p.Pattern); err != nil {
				return Invalid(f+".pattern", "is not a regular expression: %v", err)
			}
		}
		if p.Minimum != nil && p.Maximum != nil && *p.Minimum > *p.Maximum {
			return Invalid(f+".maximum", "must not be below minimum")
		}
		if p.MinLength != nil && p.MaxLength != nil && *p.MinLength > *p.MaxLength {
			return Invalid(f+".maxLength", "must not be below minLength")
		}
		if p.Default != nil {
			if err := p.Check(f+".default", *p.Default); err != nil {
				return err
			}
		}
	}
	return nil
}

// Check checks value, in its string form, against p: its type, enum,
// bounds, lengths and pattern. The error names field.
func (p *Property) Check(field, value string) error {
	_, err := p.Parse(field, value)
	return err
}

// Parse turns value, in its string form, into its JSON value for a driver
// (a string, a number, a boolean, a list or a map of them), checked as
// Check does.
func (p *Property) Parse(field, value string) (json.RawMessage, error) {
	switch p.ValueType {
	case ValueArray:
		var items []json.RawMessage
		if err := json.Unmarshal([]byte(value), &items); err != nil {
			return nil, Invalid(field, "want a JSON list of %s, got %q", p.dataType(), value)
		}
		seen := map[string]bool{}
		for i, it := range items {
			s := scalarText(it)
			if err := p.checkScalar(fieldIdx(field, i), s); err != nil {
				return nil, err
			}
			if p.UniqueItems && seen[s] {
				return nil, Invalid(fieldIdx(field, i), "%q is in the list twice", s)
			}
			seen[s] = true
		}
		if err := p.checkLength(field, len(items)); err != nil {
			return nil, err
		}
		return canonical(items)
	case ValueMap:
		var items map[string]json.RawMessage
		if err := json.Unmarshal([]byte(value), &items); err != nil {
			return nil, Invalid(field, "want a JSON map of %s, got %q", p.dataType(), value)
		}
		for k, it := range items {
			if err := p.checkScalar(field+"."+k, scalarText(it)); err != nil {
				return nil, err
			}
		}
		return canonical(items)
	}
	if err := p.checkScalar(field, value); err != nil {
		return nil, err
	}
	if p.dataType() == DataString {
		return json.Marshal(value)
	}
	return json.RawMessage(value), nil
}

// scalarText is a JSON scalar's string form (a string unquoted).
func scalarText(r json.RawMessage) string {
	var s string
	if json.Unmarshal(r, &s) == nil {
		return s
	}
	return string(bytes.TrimSpace(r))
}

func canonical(v any) (json.RawMessage, error) { return json.Marshal(v) }

func (p *Property) dataType() DataType {
	if p.DataType == "" {
		return DataString
	}
	return p.DataType
}

func (p *Property) checkScalar(field, s string) error {
	switch p.dataType() {
	case DataInteger:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return Invalid(field, "want an integer, got %q", s)
		}
		if err := p.checkRange(field, float64(n)); err != nil {
			return err
		}
	case DataFloat:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return Invalid(field, "want a number, got %q", s)
		}
		if err := p.checkRange(field, f); err != nil {
			return err
		}
	case DataBoolean:
		if s != "true" && s != "false" {
			return Invalid(field, "want true or false, got %q", s)
		}
	default:
		if p.ValueType == "" || p.ValueType == ValueScalar {
			if err := p.checkLength(field, utf8.RuneCountInString(s)); err != nil {
				return err
			}
		}
		if p.Pattern != "" {
			re, err := regexp.Compile(`^(?:` + p.Pattern + `)$`)
			if err == nil && !re.MatchString(s) {
				return Invalid(field, "%q does not match %s", s, p.Pattern)
			}
		}
	}
	if len(p.Enum) > 0 && !slices.Contains(p.Enum, s) {
		return Invalid(field, "must be one of %s, got %q", strings.Join(p.Enum, ", "), s)
	}
	return nil
}

func (p *Property) checkRange(field string, v float64) error {
	if p.Minimum != nil && v < *p.Minimum {
		return Invalid(field, "must be at least %v", *p.Minimum)
	}
	if p.Maximum != nil && v > *p.Maximum {
		return Invalid(field, "must be at most %v", *p.Maximum)
	}
	return nil
}

func (p *Property) checkLength(field string, n int) error {
	if p.MinLength != nil && int64(n) < *p.MinLength {
		return Invalid(field, "must have at least %d", *p.MinLength)
	}
	if p.MaxLength != nil && int64(n) > *p.MaxLength {
		return Invalid(field, "must have at most %d", *p.MaxLength)
	}
	return nil
}

// CheckConfiguration checks cfg (a string map as Environments and
// MachineSets give it) against items: every key defined, every value of
// its property's form; with required, every required item without a
// default present.
func (ps Properties) CheckConfiguration(field string, cfg map[string]string, required bool) error {
	for _, k := range slices.Sorted(maps.Keys(cfg)) {
		p := ps.Get(k)
		if p == nil {
			return Invalid(field+"."+k, "is not a configuration item of the provider (it has %s)", strings.Join(ps.Names(), ", "))
		}
		if err := p.Check(field+"."+k, cfg[k]); err != nil {
			return err
		}
	}
	if required {
		for _, p := range ps {
			if _, ok := cfg[p.Name]; p.Required && !ok && p.Default == nil {
				return Invalid(field+"."+p.Name, "is required by the provider")
			}
		}
	}
	return nil
}
