package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	fastjson "github.com/goccy/go-json"
	"slices"
	"strconv"
	"sync"

	"github.com/hf-fleet/hf/lib/types"
)

// FacetRecord is one stored facet of an object (see types.Facet): its name,
// the version of its last write and its JSON.
type FacetRecord struct {
	Name string `json:"name"`
	// Epoch orders copies before Version does (types.Facet.Epoch).
	Epoch   uint64          `json:"epoch,omitempty"`
	Version types.Version   `json:"version"`
	Data    json.RawMessage `json:"data"`
}

// newer reports whether f supersedes g: a higher epoch, or the same epoch and
// a higher version.
func (f FacetRecord) newer(g FacetRecord) bool {
	if f.Epoch != g.Epoch {
		return f.Epoch > g.Epoch
	}
	return f.Version.Compare(g.Version) > 0
}

// facet returns the record's facet name, if it has one.
func (r *Record) facet(name string) (FacetRecord, bool) {
	for _, f := range r.Facets {
		if f.Name == name {
			return f, true
		}
	}
	return FacetRecord{}, false
}

// FacetVersion is the version of facet name (zero when the record lacks it).
func (r *Record) FacetVersion(name string) types.Version {
	f, _ := r.facet(name)
	return f.Version
}

// splitFacets marshals obj's facets, in the kind's order.
func splitFacets(obj types.Object) ([]FacetRecord, error) {
	fs := obj.Facets()
	out := make([]FacetRecord, len(fs))
	for i, f := range fs {
		var b []byte
		var err error
		if m, ok := f.Value.(json.Marshaler); ok {
			// A facet that writes itself (a machine's owner part, a node's
			// report) does so with goccy already: compact and escaped as
			// Marshal would leave it, so Marshal's check and copy of the
			// result is skipped (TestSplitFacetsMarshalers).
			b, err = m.MarshalJSON()
		} else {
			b, err = fastjson.Marshal(f.Value)
		}
		if err != nil {
			return nil, fmt.Errorf("marshal facet %s: %w", f.Name, err)
		}
		out[i] = FacetRecord{Name: f.Name, Epoch: f.Epoch, Data: b}
	}
	return out, nil
}

// finish sets what follows from a record's facets and tombstone: its version
// (the newest of them) and whether it is live (it has a creating facet newer
// than its last deletion). Facets older than the tombstone are dropped. The
// object JSON is assembled when asked for (withData).
func (r *Record) finish() error {
	names := types.FacetNames(r.Kind)
	if names == nil {
		return fmt.Errorf("unknown kind %q", r.Kind)
	}
	r.Facets = slices.DeleteFunc(r.Facets, func(f FacetRecord) bool {
		return f.Version.Compare(r.Tomb) <= 0 || !slices.Contains(names, f.Name)
	})
	slices.SortFunc(r.Facets, func(a, b FacetRecord) int {
		return slices.Index(names, a.Name) - slices.Index(names, b.Name)
	})
	r.Version = r.Tomb
	for _, f := range r.Facets {
		if f.Version.Compare(r.Version) > 0 {
			r.Version = f.Version
		}
	}
	_, live := r.facet(names[0])
	r.Deleted = !live
	r.Data = nil
	return nil
}

// assemble builds the object JSON of a live record from its facets, with the
// metadata the store owns: name, version, updatedAt and the facet versions.
func assemble(r *Record) (json.RawMessage, error) {
	obj, err := types.New(r.Kind)
	if err != nil {
		return nil, err
	}
	if err := decodeFacets(r, obj); err != nil {
		return nil, err
	}
	return fastjson.Marshal(obj)
}

// decodeFacets fills obj, a new object of r's kind, from r's facets, with
// the metadata the store owns, and derives what is derived (the phase of a
// claim from its election and binding, say).
func decodeFacets(r *Record, obj types.Object) error {
	for _, f := range obj.Facets() {
		fr, ok := r.facet(f.Name)
		if !ok {
			continue
		}
		if err := fastjson.Unmarshal(fr.Data, f.Value); err != nil {
			return fmt.Errorf("facet %s: %w", f.Name, err)
		}
	}
	types.Upgrade(obj)
	types.SetKind(obj, r.Kind)
	obj.Meta().Name = r.Name
	stamp(obj.Meta(), *r)
	if d, ok := obj.(interface{ Derive() }); ok {
		d.Derive()
	}
	return nil
}

// merge returns the union of two copies of one object: the later deletion,
// and of each facet the newer version, minus what that deletion removed.
// changed reports whether the result differs from a.
func merge(a, b Record) (out Record, changed bool, err error) {
	out = Record{Kind: a.Kind, Name: a.Name, Seq: a.Seq, Tomb: a.Tomb, DeletedAt: a.DeletedAt}
	if b.Tomb.Compare(a.Tomb) > 0 {
		out.Tomb, out.DeletedAt = b.Tomb, b.DeletedAt
	}
	// A record has a few facets: a scan beats a map.
	out.Facets = make([]FacetRecord, 0, len(a.Facets)+len(b.Facets))
	out.Facets = append(out.Facets, a.Facets...)
	for _, f := range b.Facets {
		i := slices.IndexFunc(out.Facets, func(g FacetRecord) bool { return g.Name == f.Name })
		switch {
		case i < 0:
			out.Facets = append(out.Facets, f)
		case f.newer(out.Facets[i]):
			out.Facets[i] = f
		}
	}
	if err := out.finish(); err != nil {
		return Record{}, false, err
	}
	return out, !sameFacets(a, out), nil
}

// holds reports whether stored holds all of in: its deletion and each of
// its facets at the same version (and epoch).
func holds(stored, in Record) bool {
	if in.Tomb != stored.Tomb && !in.Tomb.IsZero() {
		return false
	}
	for _, f := range in.Facets {
		g, ok := stored.facet(f.Name)
		if !ok || g.Version != f.Version || g.Epoch != f.Epoch {
			return false
		}
	}
	return true
}

// sameFacets reports whether two records hold the same tombstone and facet
// versions.
func sameFacets(a, b Record) bool {
	return a.Tomb == b.Tomb && len(a.Facets) == len(b.Facets) && holds(b, a)
}

// Fingerprint is a hash of the record's tombstone and facet versions: two
// copies of an object are the same exactly when their fingerprints are
// (anti-entropy compares them).
func (r *Record) Fingerprint() uint64 {
	// The bytes hashed are the tombstone's version, then for each facet
	// "\x00name\x00epoch\x00version" (decimal epoch, versions as String
	// writes them); built in one buffer, not a string per facet.
	var scratch [128]byte
	b := r.Tomb.AppendText(scratch[:0])
	for _, f := range r.Facets {
		b = append(b, 0)
		b = append(b, f.Name...)
		b = append(b, 0)
		b = strconv.AppendUint(b, f.Epoch, 10)
		b = append(b, 0)
		b = f.Version.AppendText(b)
	}
	return fnv1a(fnvOffset, b)
}

const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

func fnv1a(h uint64, s []byte) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// changedFacets returns the facets of next whose data differs from base's.
// A facet base lacks counts as the kind's zero value of it: writing the zero
// value of a facet nobody has written is no change.
func changedFacets(kind string, next, base []FacetRecord) []FacetRecord {
	var out []FacetRecord
	for _, f := range next {
		i := slices.IndexFunc(base, func(b FacetRecord) bool { return b.Name == f.Name })
		switch {
		case i >= 0 && bytes.Equal(base[i].Data, f.Data):
		case i < 0 && bytes.Equal(zeroFacet(kind, f.Name), f.Data):
		default:
			out = append(out, f)
		}
	}
	return out
}

var zeroFacets sync.Map // kind -> map[facet]data

// zeroFacet is the JSON of facet name of an empty object of kind.
func zeroFacet(kind, name string) []byte {
	if m, ok := zeroFacets.Load(kind); ok {
		return m.(map[string][]byte)[name]
	}
	m := map[string][]byte{}
	if obj, err := types.New(kind); err == nil {
		if fs, err := splitFacets(obj); err == nil {
			for _, f := range fs {
				m[f.Name] = f.Data
			}
		}
	}
	zeroFacets.Store(kind, m)
	return m[name]
}
