package types

import "slices"

// FacetVersions are the versions of an object's facets by facet name, kept
// sorted by name (a keyed slice, see keyedMarshal). In JSON it is an object,
// {"<facet>": "<version>", ...}.
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

func (fs FacetVersions) find(name string) (int, bool) { return keyedFind(fs, name, facetName) }

func facetName(f FacetVersion) string { return f.Name }

// MarshalJSON writes the object form.
func (fs FacetVersions) MarshalJSON() ([]byte, error) {
	return keyedMarshal(fs, facetName, func(b []byte, f FacetVersion) ([]byte, error) {
		if !plainJSON(f.Version.Node) {
			return appendJSONString(b, f.Version.String())
		}
		return append(f.Version.AppendText(append(b, '"')), '"'), nil
	})
}

// UnmarshalJSON reads the object form.
func (fs *FacetVersions) UnmarshalJSON(b []byte) error {
	out, err := keyedUnmarshal(b, func(k string, v Version) FacetVersion { return FacetVersion{Name: k, Version: v} }, facetName)
	if err != nil {
		return err
	}
	*fs = out
	return nil
}
