package types

import (
	"encoding/json"
	"slices"
	"strings"

	fastjson "github.com/goccy/go-json"
)

// FacetVersions are the versions of an object's facets by facet name, kept
// sorted by name. In JSON it is an object, {"<facet>": "<version>", ...}. A
// few entries in a slice cost a node's cache a third of what a map of them
// does, for every object it holds.
type FacetVersions []FacetVersion

// FacetVersion is one facet's version.
type FacetVersion struct {
	Name    string
	Version Version
}

// Get returns the version of facet name (zero when the object has none).
func (fs FacetVersions) Get(name string) Version {
	if i, ok := fs.find(name); ok {
		return fs[i].Version
	}
	return Version{}
}

// Set sets the version of facet name.
func (fs *FacetVersions) Set(name string, v Version) {
	i, ok := fs.find(name)
	if ok {
		(*fs)[i].Version = v
		return
	}
	*fs = slices.Insert(*fs, i, FacetVersion{Name: name, Version: v})
}

// Equal reports whether both hold the same facets at the same versions.
func (fs FacetVersions) Equal(o FacetVersions) bool { return slices.Equal(fs, o) }

func (fs FacetVersions) find(name string) (int, bool) {
	return slices.BinarySearchFunc(fs, name, func(f FacetVersion, n string) int { return strings.Compare(f.Name, n) })
}

// MarshalJSON writes the object form. Facet names and versions are plain
// ASCII and written as they are (every object the API sends carries them);
// anything else goes through encoding/json.
func (fs FacetVersions) MarshalJSON() ([]byte, error) {
	if fs == nil {
		return []byte("null"), nil
	}
	b := make([]byte, 0, 2+len(fs)*48)
	b = append(b, '{')
	for i, f := range fs {
		v := f.Version.String()
		if !plainJSON(f.Name) || !plainJSON(v) || (i > 0 && fs[i-1].Name >= f.Name) {
			return fs.marshalMap()
		}
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = append(b, f.Name...)
		b = append(b, `":"`...)
		b = append(b, v...)
		b = append(b, '"')
	}
	return append(b, '}'), nil
}

func (fs FacetVersions) marshalMap() ([]byte, error) {
	m := make(map[string]Version, len(fs))
	for _, f := range fs {
		m[f.Name] = f.Version
	}
	return json.Marshal(m)
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

// UnmarshalJSON reads the object form.
func (fs *FacetVersions) UnmarshalJSON(b []byte) error {
	var m map[string]Version
	if err := fastjson.Unmarshal(b, &m); err != nil {
		return err
	}
	if m == nil {
		*fs = nil
		return nil
	}
	out := make(FacetVersions, 0, len(m))
	for k, v := range m {
		out = append(out, FacetVersion{Name: k, Version: v})
	}
	slices.SortFunc(out, func(a, b FacetVersion) int { return strings.Compare(a.Name, b.Name) })
	*fs = out
	return nil
}
