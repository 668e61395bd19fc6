package config

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/hf-fleet/hf/lib/types"
)

// ErrUnknownKey is wrapped by the error for a key that Config does not have.
var ErrUnknownKey = errors.New("unknown key")

// shape is what kind of value a key holds.
type shape int

const (
	shapeLeaf   shape = iota // a scalar or a list of scalars
	shapeStruct              // a mapping with fixed keys
	shapeList                // a list of mappings with fixed keys
	shapeMap                 // a free-form mapping (labels, driver config)
)

// schema describes Config as its mapstructure tags see it.
type schema struct {
	shape  shape
	typ    reflect.Type
	index  []int              // field index path from Config
	fields map[string]*schema // shapeStruct
	elem   *schema            // shapeList
}

// configSchema walks Config's mapstructure tags.
func configSchema() *schema {
	return schemaOf(reflect.TypeFor[Config](), nil)
}

func schemaOf(t reflect.Type, index []int) *schema {
	s := &schema{typ: t, index: index}
	switch {
	case t.Kind() == reflect.Struct:
		s.shape = shapeStruct
		s.fields = map[string]*schema{}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
			if name == "" || name == "-" || !f.IsExported() {
				continue
			}
			s.fields[name] = schemaOf(f.Type, append(append([]int(nil), index...), i))
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		s.shape = shapeList
		s.elem = schemaOf(t.Elem(), nil)
	case t.Kind() == reflect.Map:
		s.shape = shapeMap
	}
	return s
}

// leaf is a key viper knows: a scalar or list of scalars outside any list.
type leaf struct {
	key   string // "cluster.join"
	index []int  // field index path in Config
}

// walk calls fn with the key of every field below s that is not a
// section (a struct of keys), in key order, descending into sections.
func (s *schema) walk(prefix string, fn func(key string, f *schema)) {
	for _, name := range sortedKeys(s.fields) {
		f, key := s.fields[name], joinKey(prefix, name)
		if f.shape == shapeStruct {
			f.walk(key, fn)
			continue
		}
		fn(key, f)
	}
}

// leaves returns every leaf key below s, sorted.
func (s *schema) leaves(prefix string) []leaf {
	var out []leaf
	s.walk(prefix, func(key string, f *schema) {
		if f.shape == shapeLeaf {
			out = append(out, leaf{key: key, index: f.index})
		}
	})
	return out
}

// objectLists returns every key below s that holds a list of mappings
// (api.tokens, drivers): only the file can set those.
func (s *schema) objectLists(prefix string) []string {
	var out []string
	s.walk(prefix, func(key string, f *schema) {
		if f.shape == shapeList {
			out = append(out, key)
		}
	})
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// unknownKeyError names a key of the file that Config does not have.
type unknownKeyError struct {
	key  string
	at   string // "hf.yml line 12"
	hint string // a known key spelled alike
}

func (e *unknownKeyError) Error() string {
	msg := fmt.Sprintf("config: unknown key %q", e.key)
	if e.at != "" {
		msg += " (" + e.at + ")"
	}
	if e.hint != "" {
		msg += fmt.Sprintf("; did you mean %q?", e.hint)
	}
	return msg
}

// Unwrap makes errors.Is true for both ErrUnknownKey and types.ErrInvalid.
func (e *unknownKeyError) Unwrap() []error { return []error{ErrUnknownKey, types.ErrInvalid} }

// checkKeys reports every key of v that s does not have, and every value whose
// shape (mapping, list) is wrong for its key, so that decoding sees known keys
// only. at turns a key path into "file line N".
func (s *schema) checkKeys(path string, v any, at func(string) string) []error {
	if v == nil {
		return nil
	}
	switch s.shape {
	case shapeStruct:
		m, ok := v.(map[string]any)
		if !ok {
			return []error{fieldErr(path, at(path), "must be a mapping of keys, got %s", describeValue(v))}
		}
		var errs []error
		for _, k := range sortedKeys(m) {
			kp := joinKey(path, k)
			f, ok := s.fields[k]
			if !ok {
				errs = append(errs, &unknownKeyError{key: kp, at: at(kp), hint: s.suggest(path, k)})
				continue
			}
			errs = append(errs, f.checkKeys(kp, m[k], at)...)
		}
		return errs
	case shapeList:
		l, ok := v.([]any)
		if !ok {
			return []error{fieldErr(path, at(path), "must be a list, got %s", describeValue(v))}
		}
		var errs []error
		for i, e := range l {
			errs = append(errs, s.elem.checkKeys(path+"["+strconv.Itoa(i)+"]", e, at)...)
		}
		return errs
	case shapeMap:
		if _, ok := v.(map[string]any); !ok {
			return []error{fieldErr(path, at(path), "must be a mapping, got %s", describeValue(v))}
		}
	case shapeLeaf:
		// A list in the file is a YAML list: a string is not split on commas
		// (the environment's lists are) nor taken as a list of one.
		if _, ok := v.([]any); s.typ.Kind() == reflect.Slice && !ok {
			return []error{fieldErr(path, at(path), "must be a list, got %s", describeValue(v))}
		}
		if msg := quotedScalar(s.typ, v); msg != "" {
			return []error{fieldErr(path, at(path), "%s", msg)}
		}
	}
	return nil
}

// quotedScalar refuses text in the file where a key wants a number or a
// bool ("5", "true"): the weak typing that parses the environment's and the
// flags' strings would take it as 5 or true. A duration is text ("30s").
func quotedScalar(t reflect.Type, v any) string {
	s, ok := v.(string)
	if !ok || t == durationType {
		return ""
	}
	var want string
	var parses bool
	switch t.Kind() {
	case reflect.Bool:
		want = "true or false"
		_, err := strconv.ParseBool(s)
		parses = err == nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		want = "a whole number"
		_, err := strconv.ParseInt(strings.TrimSpace(s), 0, 64)
		parses = err == nil
	case reflect.Float32, reflect.Float64:
		want = "a number"
		_, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		parses = err == nil
	default:
		return ""
	}
	msg := fmt.Sprintf("must be %s, got %s", want, describeValue(v))
	if parses {
		msg += ": write it without quotes"
	}
	return msg
}

// suggest returns the known key closest to the unknown key k, or "".
func (s *schema) suggest(path, k string) string {
	best, bestDist := "", 3
	for _, name := range sortedKeys(s.fields) {
		d := editDistance(strings.ToLower(k), name)
		if d < bestDist && d < len(name) {
			best, bestDist = name, d
		}
	}
	if best == "" {
		return ""
	}
	return joinKey(path, best)
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
