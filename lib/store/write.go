package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// Put writes obj after checking opt's preconditions, all in one transaction. It
// stamps obj's metadata: Version (the next clock value), UpdatedAt, and
// CreatedAt when the object is new (or was deleted) and the caller left it zero;
// an update with a zero CreatedAt keeps the stored one. On error obj's metadata
// is left as it was. Validation is the caller's job.
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
		}
		meta := obj.Meta()
		now := s.cfg.Now().UTC()
		meta.Version = types.Version{HLC: s.clock.Now(), Node: s.cfg.NodeID}
		meta.UpdatedAt = now
		if meta.CreatedAt.IsZero() {
			meta.CreatedAt = now
			if live {
				if created := storedCreatedAt(prev.Data); !created.IsZero() {
					meta.CreatedAt = created
				}
			}
		}
		data, err := json.Marshal(obj)
		if err != nil {
			return Record{}, fmt.Errorf("marshal: %w", err)
		}
		return Record{Kind: kind, Name: name, Version: meta.Version, Data: data}, nil
	})
	if err != nil {
		*obj.Meta() = saved
		return Record{}, fmt.Errorf("put %s/%s: %w", kind, name, err)
	}
	return rec, nil
}

// storedCreatedAt reads metadata.createdAt from stored object JSON; zero when
// it cannot.
func storedCreatedAt(data []byte) time.Time {
	var o struct {
		Metadata struct {
			CreatedAt time.Time `json:"createdAt"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(data, &o); err != nil {
		return time.Time{}
	}
	return o.Metadata.CreatedAt
}

// Delete replaces the live object kind/name by a tombstone with a new version
// and returns the tombstone. It fails with ErrNotFound when there is no live
// object and with ErrConflict when ifVersion is set and differs.
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
		return Record{
			Kind:      kind,
			Name:      name,
			Version:   types.Version{HLC: s.clock.Now(), Node: s.cfg.NodeID},
			Deleted:   true,
			DeletedAt: s.cfg.Now().UTC(),
		}, nil
	})
	if err != nil {
		return Record{}, fmt.Errorf("delete %s/%s: %w", kind, name, err)
	}
	return rec, nil
}

// errStale tells write that Apply's record is not newer: no write, no error.
var errStale = errors.New("stale")

// Apply stores a record from another node (object or tombstone) when its
// version is newer than the stored one, tombstones included, and reports
// whether it did. It moves the clock past rec's version, gives the record a
// fresh local Seq and tells watchers. An equal or older version is (false, nil).
func (s *Store) Apply(rec Record) (bool, error) {
	if err := checkKey(rec.Kind, rec.Name); err != nil {
		return false, fmt.Errorf("apply: %w", err)
	}
	if rec.Version.IsZero() {
		return false, fmt.Errorf("apply %s/%s: version is required", rec.Kind, rec.Name)
	}
	if !rec.Deleted && len(rec.Data) == 0 {
		return false, fmt.Errorf("apply %s/%s: object without data", rec.Kind, rec.Name)
	}
	_, err := s.write(rec.Kind, rec.Name, func(prev Record, exists bool) (Record, error) {
		if exists && rec.Version.Compare(prev.Version) <= 0 {
			return Record{}, errStale
		}
		s.clock.Update(rec.Version.HLC)
		out := Record{Kind: rec.Kind, Name: rec.Name, Version: rec.Version, Deleted: rec.Deleted}
		if rec.Deleted {
			// Collection counts from DeletedAt; a tombstone without one would be
			// collected at once.
			out.DeletedAt = rec.DeletedAt.UTC()
			if out.DeletedAt.IsZero() {
				out.DeletedAt = s.cfg.Now().UTC()
			}
		} else {
			out.Data = append(json.RawMessage(nil), rec.Data...)
		}
		return out, nil
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
	return rec, nil
}
