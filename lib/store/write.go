package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// Put writes obj after checking opt's preconditions, all in one transaction.
// It writes, with one new version, only the facets of obj whose JSON differs
// from the stored object's (from opt.Base's when set; every facet when the
// object is new), so a write never touches another writer's facets. When no
// facet differs, a Put with Base writes nothing and returns the stored record;
// one without renews the creating facet (same data, new version). It
// stamps CreatedAt when the object is new (or was deleted) and the caller left
// it zero; an update with a zero CreatedAt keeps the stored one. On success
// obj's metadata carries the record's version, updatedAt and facet versions;
// on error it is left as it was. Validation is the caller's job.
func (s *Store) Put(obj types.Object, opt PutOptions) (Record, error) {
	if obj == nil {
		return Record{}, errors.New("put: nil object")
	}
	kind, name := obj.GetKind(), obj.Meta().Name
	if err := checkKey(kind, name); err != nil {
		return Record{}, fmt.Errorf("put: %w", err)
	}
	saved := *obj.Meta()
	rec, err := s.write(kind, name, func(prev Record, exists bool) (Record, error) {
		live := exists && !prev.Deleted
		switch {
		case opt.Create && live:
			return Record{}, ErrExists
		case opt.Update && !live:
			return Record{}, ErrNotFound
		case !opt.IfVersion.IsZero() && (!live || prev.Version != opt.IfVersion):
			return Record{}, ErrConflict
		case opt.Base != nil && !live:
			return Record{}, ErrNotFound
		}
		meta := obj.Meta()
		*meta = saved
		if meta.CreatedAt.IsZero() {
			meta.CreatedAt = s.cfg.Now().UTC()
			if live {
				if created := storedCreatedAt(prev); !created.IsZero() {
					meta.CreatedAt = created
				}
			}
		}
		facets, err := splitFacets(obj)
		if err != nil {
			return Record{}, err
		}
		changed := facets
		if !live && opt.Facets != nil {
			// A creator writes the facets it owns; others (a drain that came
			// before the node's first report, say) are kept.
			changed = slices.DeleteFunc(slices.Clone(facets), func(f FacetRecord) bool { return !slices.Contains(opt.Facets, f.Name) })
		}
		if live {
			base := prev
			if opt.Base != nil {
				base = *opt.Base
			}
			changed = changedFacets(kind, facets, base.Facets)
		}
		for _, f := range changed {
			if live {
				if old, ok := prev.facet(f.Name); ok && old.Epoch > f.Epoch {
					return Record{}, fmt.Errorf("%w: facet %s is at epoch %d, the write at %d", ErrFenced, f.Name, old.Epoch, f.Epoch)
				}
			}
			if opt.Base != nil && prev.FacetVersion(f.Name) != opt.Base.FacetVersion(f.Name) {
				return Record{}, ErrConflict // another write changed this facet since Base
			}
			if opt.Facets != nil && !slices.Contains(opt.Facets, f.Name) {
				return Record{}, fmt.Errorf("%w: facet %s", ErrNotOwner, f.Name)
			}
		}
		if live && len(changed) == 0 {
			if opt.Base != nil {
				return Record{}, errUnchanged
			}
			// A plain Put that changes nothing still says "this, now": it
			// renews the creating facet, as a write of the whole object did.
			changed = facets[:1]
		}
		v := types.Version{HLC: s.clock.Now(), Node: s.cfg.NodeID}
		next := Record{Kind: kind, Name: name, Tomb: prev.Tomb, DeletedAt: prev.DeletedAt}
		if live || opt.Facets != nil {
			next.Facets = slices.Clone(prev.Facets)
		}
		for _, f := range changed {
			f.Version = v
			if i := slices.IndexFunc(next.Facets, func(g FacetRecord) bool { return g.Name == f.Name }); i >= 0 {
				next.Facets[i] = f
			} else {
				next.Facets = append(next.Facets, f)
			}
		}
		if err := next.finish(); err != nil {
			return Record{}, err
		}
		return next, nil
	})
	if err != nil {
		*obj.Meta() = saved
		return Record{}, fmt.Errorf("put %s/%s: %w", kind, name, err)
	}
	stamp(obj.Meta(), rec)
	return rec, nil
}

// stamp sets the metadata the store owns from rec.
func stamp(m *types.ObjectMeta, rec Record) {
	m.Version = rec.Version
	m.UpdatedAt = HLCTime(rec.Version.HLC)
	m.Facets = make(types.FacetVersions, 0, len(rec.Facets))
	for _, f := range rec.Facets {
		m.Facets.Set(f.Name, f.Version)
	}
}

// storedCreatedAt reads createdAt from a live record's creating facet,
// where every kind keeps it; zero when it cannot.
func storedCreatedAt(r Record) time.Time {
	if len(r.Facets) == 0 {
		return time.Time{}
	}
	var o struct {
		CreatedAt time.Time `json:"createdAt"`
	}
	if err := json.Unmarshal(r.Facets[0].Data, &o); err != nil {
		return time.Time{}
	}
	return o.CreatedAt
}

// Delete replaces the live object kind/name by a tombstone with a new version
// and returns the tombstone; every facet goes with it. It fails with
// ErrNotFound when there is no live object and with ErrConflict when
// ifVersion is set and differs.
func (s *Store) Delete(kind, name string, ifVersion types.Version) (Record, error) {
	if err := checkKey(kind, name); err != nil {
		return Record{}, fmt.Errorf("delete: %w", err)
	}
	rec, err := s.write(kind, name, func(prev Record, exists bool) (Record, error) {
		switch {
		case !exists || prev.Deleted:
			return Record{}, ErrNotFound
		case !ifVersion.IsZero() && prev.Version != ifVersion:
			return Record{}, ErrConflict
		}
		next := Record{
			Kind:      kind,
			Name:      name,
			Tomb:      types.Version{HLC: s.clock.Now(), Node: s.cfg.NodeID},
			DeletedAt: s.cfg.Now().UTC(),
		}
		return next, next.finish()
	})
	if err != nil {
		return Record{}, fmt.Errorf("delete %s/%s: %w", kind, name, err)
	}
	return rec, nil
}

// wholeToFacets turns a record in the form of a whole object with one version
// (as nodes of the previous release send them, and as Record literals often
// are) into facets of that version: a tombstone's version becomes its Tomb,
// an object's JSON is split into its facets.
func wholeToFacets(rec *Record) error {
	switch {
	case len(rec.Facets) > 0 || !rec.Tomb.IsZero():
		return nil
	case rec.Deleted:
		if rec.Tomb.IsZero() {
			rec.Tomb = rec.Version
		}
		return nil
	case len(rec.Data) == 0:
		return errors.New("object without data or facets")
	}
	obj, err := types.New(rec.Kind)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(rec.Data, obj); err != nil {
		return fmt.Errorf("object: %w", err)
	}
	if u, ok := obj.(interface{ Upgrade() }); ok {
		u.Upgrade()
	}
	fs, err := splitFacets(obj)
	if err != nil {
		return err
	}
	for i := range fs {
		fs[i].Version = rec.Version
	}
	rec.Facets = fs
	return nil
}

// errUnchanged tells write that there is nothing to store: no write, no
// error, the stored record is the result.
var errUnchanged = errors.New("unchanged")

// errStale tells write that Apply brings nothing newer: no write, no error.
var errStale = errors.New("stale")

// Apply merges a record from another node (object, facets or tombstone) into
// the stored one facet by facet (see merge) and reports whether that changed
// anything. It moves the clock past rec's version, gives a changed record a
// fresh local Seq and tells watchers. A record that brings nothing newer is
// (false, nil).
func (s *Store) Apply(rec Record) (bool, error) {
	if err := checkKey(rec.Kind, rec.Name); err != nil {
		return false, fmt.Errorf("apply: %w", err)
	}
	if rec.Version.IsZero() {
		return false, fmt.Errorf("apply %s/%s: version is required", rec.Kind, rec.Name)
	}
	_, err := s.write(rec.Kind, rec.Name, func(prev Record, exists bool) (Record, error) {
		if err := wholeToFacets(&rec); err != nil {
			return Record{}, err
		}
		in := Record{Kind: rec.Kind, Name: rec.Name, Tomb: rec.Tomb, DeletedAt: rec.DeletedAt.UTC()}
		for _, f := range rec.Facets {
			if f.Version.IsZero() || !json.Valid(f.Data) {
				return Record{}, fmt.Errorf("facet %q has no version or bad JSON", f.Name)
			}
			f.Data = append(json.RawMessage(nil), f.Data...)
			in.Facets = append(in.Facets, f)
		}
		if !in.Tomb.IsZero() && in.DeletedAt.IsZero() {
			// Collection counts from DeletedAt; a tombstone without one would
			// be collected at once.
			in.DeletedAt = s.cfg.Now().UTC()
		}
		if !exists {
			prev = Record{Kind: rec.Kind, Name: rec.Name}
		}
		next, changed, err := merge(prev, in)
		if err != nil {
			return Record{}, err
		}
		if !changed {
			return Record{}, errStale
		}
		if !next.Deleted {
			// Facets from another node must decode as this kind's.
			obj, err := types.New(next.Kind)
			if err != nil {
				return Record{}, err
			}
			if err := decodeFacets(&next, obj); err != nil {
				return Record{}, err
			}
		}
		s.clock.Update(rec.Version.HLC)
		return next, nil
	})
	if errors.Is(err, errStale) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("apply %s/%s: %w", rec.Kind, rec.Name, err)
	}
	return true, nil
}

// write is the one write path. Under the write lock and in one transaction it
// reads the stored record of kind/name, asks next for the record to store
// (next fails to abort), gives it the next Seq, commits, then tells watchers.
func (s *Store) write(kind, name string, next func(prev Record, exists bool) (Record, error)) (Record, error) {
	if err := s.enter(); err != nil {
		return Record{}, err
	}
	defer s.leave()
	s.wmu.Lock()
	defer s.wmu.Unlock()

	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	prev, exists, err := getRecord(txn, kind, name)
	if err != nil {
		return Record{}, err
	}
	rec, err := next(prev, exists)
	if errors.Is(err, errUnchanged) {
		return prev, nil
	}
	if err != nil {
		return Record{}, err
	}
	rec.Seq = s.seq.Load() + 1
	key := objectKey(kind, name)
	ops := []struct{ k, v []byte }{
		{key, encodeRecord(&rec)},
		{seqKey(rec.Seq), key},
		{keySeq, putUint(rec.Seq)},
		{keyHLC, putUint(s.clock.Last())},
	}
	for _, op := range ops {
		if err := txn.Set(op.k, op.v); err != nil {
			return Record{}, err
		}
	}
	if exists {
		if err := txn.Delete(seqKey(prev.Seq)); err != nil {
			return Record{}, err
		}
	}
	if err := txn.Commit(); err != nil {
		return Record{}, fmt.Errorf("commit: %w", err)
	}
	s.seq.Store(rec.Seq)
	s.notify(rec)
	s.wrote()
	return rec, nil
}
