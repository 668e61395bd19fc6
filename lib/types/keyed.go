package types

import (
	"encoding/json"
	"slices"
	"strings"

	fastjson "github.com/goccy/go-json"
)

// Keyed slices: FacetVersions and PhaseTimes are slices kept sorted by a
// string key that read and write as a JSON object, {"<key>": <value>, ...}.
// An object holds a few such entries, and a node's cache holds every
// object: in a slice they cost a third or less of what a map of them does.

// keyedFind finds key in s, sorted by keyOf.
func keyedFind[E any](s []E, key string, keyOf func(E) string) (int, bool) {
	return slices.BinarySearchFunc(s, key, func(e E, k string) int { return strings.Compare(keyOf(e), k) })
}

// keyedMarshal writes s as a JSON object from keyOf(e) to the value
// appendValue appends for e, in JSON: the bytes encoding/json writes for the map of them
// (keys sorted, escaped as it escapes them; of two entries of one key, the
// later). Plain keys, the usual ones, are written as they are.
func keyedMarshal[E any](s []E, keyOf func(E) string, appendValue func([]byte, E) ([]byte, error)) ([]byte, error) {
	if s == nil {
		return []byte("null"), nil
	}
	if !slices.IsSortedFunc(s, func(a, b E) int { return strings.Compare(keyOf(a), keyOf(b)) }) {
		s = slices.Clone(s)
		slices.SortStableFunc(s, func(a, b E) int { return strings.Compare(keyOf(a), keyOf(b)) })
	}
	b := make([]byte, 0, 2+len(s)*48)
	b = append(b, '{')
	for i, e := range s {
		k := keyOf(e)
		if i+1 < len(s) && keyOf(s[i+1]) == k {
			continue // the map keeps the later
		}
		if len(b) > 1 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendJSONString(b, k); err != nil {
			return nil, err
		}
		if b, err = appendValue(append(b, ':'), e); err != nil {
			return nil, err
		}
	}
	return append(b, '}'), nil
}

// appendJSONString appends s as a JSON string, as encoding/json writes it.
func appendJSONString(b []byte, s string) ([]byte, error) {
	if plainJSON(s) {
		return append(append(append(b, '"'), s...), '"'), nil
	}
	q, err := json.Marshal(s)
	return append(b, q...), err
}

// plainJSON reports whether s is a JSON string's content as it is: printable
// ASCII without quotes, backslashes or what encoding/json escapes for HTML.
func plainJSON(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// keyedUnmarshal reads a JSON object of V values into a slice sorted by
// key, each entry mk(key, value); null is nil.
func keyedUnmarshal[V, E any](b []byte, mk func(string, V) E, keyOf func(E) string) ([]E, error) {
	var m map[string]V
	if err := fastjson.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, nil
	}
	out := make([]E, 0, len(m))
	for k, v := range m {
		out = append(out, mk(k, v))
	}
	slices.SortFunc(out, func(a, b E) int { return strings.Compare(keyOf(a), keyOf(b)) })
	return out, nil
}
