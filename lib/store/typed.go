package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// ErrNoChange, returned by an Update function, means there is nothing to
// write: Update returns the current object and no error.
var ErrNoChange = errors.New("no change")

// updateTries bounds Update's read-modify-write attempts.
const updateTries = 20

// Decode turns a live record into its typed object (via types.New). The
// object's metadata.version is the record's version. A tombstone is ErrNotFound.
func Decode(rec Record) (types.Object, error) {
	if rec.Deleted {
		return nil, fmt.Errorf("decode %s/%s: %w", rec.Kind, rec.Name, ErrNotFound)
	}
	obj, err := types.New(rec.Kind)
	if err != nil {
		return nil, fmt.Errorf("decode %s/%s: %w", rec.Kind, rec.Name, err)
	}
	if err := decodeInto(rec, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// decodeInto unmarshals rec into obj and checks it is the kind rec says.
func decodeInto(rec Record, obj types.Object) error {
	if rec.Deleted {
		return fmt.Errorf("decode %s/%s: %w", rec.Kind, rec.Name, ErrNotFound)
	}
	if len(rec.Facets) > 0 {
		if err := decodeFacets(&rec, obj); err != nil {
			return fmt.Errorf("decode %s/%s: %w", rec.Kind, rec.Name, err)
		}
		if obj.GetKind() != rec.Kind {
			return fmt.Errorf("decode %s/%s: data says kind %q", rec.Kind, rec.Name, obj.GetKind())
		}
		return nil
	}
	if err := json.Unmarshal(rec.Data, obj); err != nil {
		return fmt.Errorf("decode %s/%s: %w", rec.Kind, rec.Name, err)
	}
	if obj.GetKind() != rec.Kind {
		return fmt.Errorf("decode %s/%s: data says kind %q", rec.Kind, rec.Name, obj.GetKind())
	}
	stamp(obj.Meta(), rec)
	return nil
}

// checkType refuses a Go type that is not the one types.New makes for kind.
func checkType[PT types.Object](kind string) error {
	proto, err := types.New(kind)
	if err != nil {
		return err
	}
	if _, ok := proto.(PT); !ok {
		return fmt.Errorf("kind %s is %T, not %T", kind, proto, *new(PT))
	}
	return nil
}

// Get reads the live object kind/name as a *T, e.g.
// store.Get[types.Node](s, types.KindNode, "n1").
func Get[T any, PT interface {
	*T
	types.Object
}](s *Store, kind, name string) (PT, error) {
	if err := checkType[PT](kind); err != nil {
		return nil, fmt.Errorf("get %s/%s: %w", kind, name, err)
	}
	rec, err := s.get(kind, name, false)
	if err != nil {
		return nil, err
	}
	obj := PT(new(T))
	if err := decodeInto(rec, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// List reads the live objects of kind as *T, sorted by name.
func List[T any, PT interface {
	*T
	types.Object
}](s *Store, kind string) ([]PT, error) {
	if err := checkType[PT](kind); err != nil {
		return nil, fmt.Errorf("list %s: %w", kind, err)
	}
	recs, err := s.list(kind, false)
	if err != nil {
		return nil, err
	}
	out := make([]PT, 0, len(recs))
	for _, rec := range recs {
		obj := PT(new(T))
		if err := decodeInto(rec, obj); err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}

// Update is a read-modify-write of the live object kind/name: it reads it, lets
// fn change it and writes the facets fn changed, unless another write changed
// one of those facets in between (then it tries again, a bounded number of
// times; local writers of one object take turns, so only writes replicated
// in meanwhile make it retry). Writes to other facets meanwhile are no
// conflict: they are kept. An error from fn aborts and is returned as is;
// ErrNoChange from fn returns the current object and no error. fn may run
// several times and must not change the name. The result is the stored object
// after the write.
func Update[T any, PT interface {
	*T
	types.Object
}](s *Store, kind, name string, fn func(PT) error) (PT, error) {
	return update[T, PT](s, kind, name, nil, fn)
}

// UpdateFacet is Update for a writer that owns facet only: a change fn makes
// to any other facet fails with ErrNotOwner.
func UpdateFacet[T any, PT interface {
	*T
	types.Object
}](s *Store, kind, name, facet string, fn func(PT) error) (PT, error) {
	return update[T, PT](s, kind, name, []string{facet}, fn)
}

func update[T any, PT interface {
	*T
	types.Object
}](s *Store, kind, name string, facets []string, fn func(PT) error) (PT, error) {
	if err := checkType[PT](kind); err != nil {
		return nil, fmt.Errorf("update %s/%s: %w", kind, name, err)
	}
	defer s.lockKey(kind, name)()
	for try := 0; try < updateTries; try++ {
		rec, err := s.get(kind, name, false)
		if err != nil {
			return nil, err
		}
		obj := PT(new(T))
		if err := decodeInto(rec, obj); err != nil {
			return nil, err
		}
		if err := fn(obj); err != nil {
			if !errors.Is(err, ErrNoChange) {
				return nil, err
			}
			cur := PT(new(T))
			if err := decodeInto(rec, cur); err != nil {
				return nil, err
			}
			return cur, nil
		}
		if obj.GetKind() != kind || obj.Meta().Name != name {
			return nil, fmt.Errorf("update %s/%s: fn changed the kind or name to %s/%s", kind, name, obj.GetKind(), obj.Meta().Name)
		}
		out, err := s.Put(obj, PutOptions{Base: &rec, Facets: facets})
		if err == nil {
			if onlyOurs(rec, out) {
				// What is stored is obj: its facets as read or as written
				// now, its metadata stamped by Put. Only the derived fields
				// are left to compute (a decode would cost as much again).
				if d, ok := any(obj).(interface{ Derive() }); ok {
					d.Derive()
				}
				return obj, nil
			}
			cur := PT(new(T))
			if err := decodeInto(out, cur); err != nil {
				return nil, err
			}
			return cur, nil
		}
		if !errors.Is(err, ErrConflict) {
			return nil, err
		}
		// A replicated write won the race: back off a little, with jitter.
		time.Sleep(time.Duration(rand.Int64N(int64(try+1) * int64(100*time.Microsecond))))
	}
	return nil, fmt.Errorf("update %s/%s: gave up after %d tries: %w", kind, name, updateTries, ErrConflict)
}

// onlyOurs reports whether every facet of out, the record a write based on
// base produced, is base's or this write's own (the newest version): no
// other writer changed a facet between the read and the write.
func onlyOurs(base, out Record) bool {
	for _, f := range out.Facets {
		if f.Version != out.Version && f.Version != base.FacetVersion(f.Name) {
			return false
		}
	}
	return len(out.Facets) >= len(base.Facets) && out.Tomb == base.Tomb
}
