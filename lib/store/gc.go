package store

import (
	"errors"
	"fmt"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hf-fleet/hf/lib/types"
)

// maxVlogRewrites bounds one GC round's value-log rewrites.
const maxVlogRewrites = 64

// collectBatch is how many tombstones one collection transaction removes.
const collectBatch = 256

// gcLoop runs value-log GC and tombstone collection every GCInterval until the
// store closes.
func (s *Store) gcLoop() {
	defer s.wg.Done()
	t := time.NewTicker(s.cfg.GCInterval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.runGC()
		}
	}
}

// runGC is one GC round.
func (s *Store) runGC() {
	if !s.cfg.InMemory {
		s.valueLogGC()
	}
	n, err := s.CollectTombstones(s.cfg.Now().Add(-s.cfg.TombstoneTTL))
	switch {
	case errors.Is(err, ErrClosed):
	case err != nil:
		s.log.Warn("collect tombstones", "err", err)
	case n > 0:
		s.log.Debug("tombstones collected", "count", n)
	}
}

// valueLogGC rewrites value-log files until badger finds none worth it.
func (s *Store) valueLogGC() {
	if err := s.enter(); err != nil {
		return
	}
	defer s.leave()
	for i := 0; i < maxVlogRewrites; i++ {
		select {
		case <-s.done:
			return
		default:
		}
		// A rewrite copies a file's live values into the current one.
		if err := s.space.check(s.space.vlogLimit); err != nil {
			s.log.Warn("value log gc: skipped", "err", err)
			return
		}
		err := s.db.RunValueLogGC(0.5)
		switch {
		case err == nil:
			s.log.Debug("value log rewritten")
			continue
		case errors.Is(err, badger.ErrNoRewrite), errors.Is(err, badger.ErrRejected):
		default:
			s.log.Warn("value log gc", "err", err)
		}
		return
	}
}

// Tombstone names one stored tombstone: a deleted record at its version.
type Tombstone struct {
	Kind, Name string
	Version    types.Version
}

// CollectTombstoneList removes the given tombstones that are still stored at
// their version (a key re-created or deleted again meanwhile is kept, and
// so is a live record) and returns how many it removed. It is for a caller
// that knows better than the TTL which deletes every replica has seen
// (member's early collection); watchers see what they see for
// CollectTombstones.
func (s *Store) CollectTombstoneList(ts []Tombstone) (int, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	return s.collectAll(ts)
}

// collectAll collects ts in batches; the caller has entered.
func (s *Store) collectAll(ts []Tombstone) (int, error) {
	total := 0
	for len(ts) > 0 {
		batch := ts[:min(len(ts), collectBatch)]
		ts = ts[len(batch):]
		n, err := s.collect(batch)
		total += n
		if err != nil {
			return total, fmt.Errorf("collect tombstones: %w", err)
		}
	}
	return total, nil
}

// CollectTombstones removes the tombstones deleted before olderThan and returns
// how many it removed. A tombstone replaced meanwhile (re-created, or a newer
// delete) is kept. Watchers that later ask to replay from before a collected
// tombstone get EventResync.
func (s *Store) CollectTombstones(olderThan time.Time) (int, error) {
	if err := s.enter(); err != nil {
		return 0, err
	}
	defer s.leave()
	if err := s.Writable(); err != nil {
		return 0, err
	}
	s.tombs.scan.Lock()
	defer s.tombs.scan.Unlock()
	if !s.tombs.begin(olderThan) {
		return 0, nil // no stored tombstone is that old (see tombWatch)
	}
	// Find them without the write lock; collect re-checks each one under it.
	var found []Tombstone
	var left time.Time
	var anyLeft bool
	err := s.db.View(func(txn *badger.Txn) error {
		return scanRecords(txn, func(r Record) error {
			switch {
			case !r.Deleted:
			case r.DeletedAt.Before(olderThan):
				found = append(found, Tombstone{r.Kind, r.Name, r.Version})
			default:
				left, anyLeft = earliest(left, anyLeft, r.DeletedAt), true
			}
			return nil
		})
	})
	if err != nil {
		s.tombs.end(false, false, time.Time{})
		return 0, fmt.Errorf("collect tombstones: %w", err)
	}
	n, err := s.collectAll(found)
	s.tombs.end(err == nil && n == len(found), anyLeft, left)
	return n, err
}

// collect removes the tombstones of batch that are still stored as found.
func (s *Store) collect(batch []Tombstone) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	n, gcSeq := 0, s.gcSeq
	for _, t := range batch {
		r, ok, err := getRecord(txn, t.Kind, t.Name)
		if err != nil {
			return 0, err
		}
		if !ok || !r.Deleted || r.Version != t.Version {
			continue
		}
		if err := txn.Delete(objectKey(t.Kind, t.Name)); err != nil {
			return 0, err
		}
		if err := deleteSeq(txn, r); err != nil {
			return 0, err
		}
		gcSeq = max(gcSeq, r.Seq)
		n++
	}
	if n == 0 {
		return 0, nil
	}
	if err := txn.Set(keyGCSeq, putUint(gcSeq)); err != nil {
		return 0, err
	}
	if err := txn.Commit(); err != nil {
		return 0, err
	}
	for _, t := range batch {
		s.hot.drop(t.Kind, t.Name)
	}
	s.gcSeq = gcSeq
	s.collected.Add(uint64(n))
	s.wrote()
	return n, nil
}

// Collected is how many tombstones this store has collected since it was
// opened. Watchers see no event for a collection: whoever keeps a summary of
// the records (anti-entropy's hash tree) compares this to know when to
// build it again.
func (s *Store) Collected() uint64 { return s.collected.Load() }
