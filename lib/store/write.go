package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"time"

	"github.com/dgraph-io/badger/v4"

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

// errHeld is errStale for a record the store holds exactly: every facet and
// the deletion at the versions it brings.
var errHeld = fmt.Errorf("%w: held", errStale)

// Apply merges a record from another node (object, facets or tombstone) into
// the stored one facet by facet (see merge) and reports whether that changed
// anything. It moves the clock past rec's version, gives a changed record a
// fresh local Seq and tells watchers. A record that brings nothing newer is
// (false, nil).
func (s *Store) Apply(rec Record) (bool, error) {
	r := s.ApplyBatch([]Record{rec})[0]
	return r.Changed, r.Err
}

// Applied is what ApplyBatch did with one record.
type Applied struct {
	Changed bool
	// Held: the record changed nothing because the store held it already,
	// every facet and the deletion at the versions it brings (not older
	// ones).
	Held bool
	Err  error
}

// ApplyBatch applies recs as Apply does, one result per record, queued
// together so that they share a commit (a replication message's records,
// say).
func (s *Store) ApplyBatch(recs []Record) []Applied {
	out := make([]Applied, len(recs))
	ws := make([]*pendingWrite, 0, len(recs))
	at := make([]int, 0, len(recs))
	for i, rec := range recs {
		if err := checkKey(rec.Kind, rec.Name); err != nil {
			out[i].Err = fmt.Errorf("apply: %w", err)
			continue
		}
		if rec.Version.IsZero() {
			out[i].Err = fmt.Errorf("apply %s/%s: version is required", rec.Kind, rec.Name)
			continue
		}
		w := &pendingWrite{kind: rec.Kind, name: rec.Name, done: make(chan struct{})}
		w.next = s.applyNext(rec, w)
		ws = append(ws, w)
		at = append(at, i)
	}
	if err := s.run(ws); err != nil {
		for _, i := range at {
			out[i].Err = fmt.Errorf("apply %s/%s: %w", recs[i].Kind, recs[i].Name, err)
		}
		return out
	}
	for j, w := range ws {
		i := at[j]
		switch {
		case errors.Is(w.err, errHeld):
			out[i].Held = true
		case errors.Is(w.err, errStale):
		case w.err != nil:
			out[i].Err = fmt.Errorf("apply %s/%s: %w", recs[i].Kind, recs[i].Name, w.err)
		default:
			out[i].Changed = true
		}
	}
	return out
}

// applyNext is the write of Apply: merge rec into what is stored. The
// check that the result decodes leaves its decoding in w for the watchers.
func (s *Store) applyNext(rec Record, w *pendingWrite) func(prev Record, exists bool) (Record, error) {
	return func(prev Record, exists bool) (Record, error) {
		if err := wholeToFacets(&rec); err != nil {
			return Record{}, err
		}
		in := Record{Kind: rec.Kind, Name: rec.Name, Tomb: rec.Tomb, DeletedAt: rec.DeletedAt.UTC()}
		in.Facets = make([]FacetRecord, 0, len(rec.Facets))
		for _, f := range rec.Facets {
			if f.Version.IsZero() {
				return Record{}, fmt.Errorf("facet %q has no version", f.Name)
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
			if holds(prev, in) {
				return Record{}, errHeld
			}
			return Record{}, errStale
		}
		if next.Deleted {
			// Kept facets of an object not (or no longer) created are
			// decoded when its creating facet comes: until then they must
			// at least be JSON.
			for _, f := range next.Facets {
				if !json.Valid(f.Data) {
					return Record{}, fmt.Errorf("facet %q: bad JSON", f.Name)
				}
			}
		} else {
			// Facets from another node must decode as this kind's (which
			// also checks they are JSON).
			obj, err := types.New(next.Kind)
			if err != nil {
				return Record{}, err
			}
			if err := decodeFacets(&next, obj); err != nil {
				return Record{}, err
			}
			w.share = decodedShare(obj)
		}
		s.clock.Update(rec.Version.HLC)
		return next, nil
	}
}

// write is the one write path. It reads the stored record of kind/name,
// asks next for the record to store (next fails to abort), gives it the next
// Seq, commits, then tells watchers, all under the write lock.
//
// Writes that arrive while another commits are committed together, in one
// badger transaction (group commit): the first writer to take the lead
// commits everything queued up to then, in arrival order, each write reading
// what the ones before it in the batch wrote, and wakes the others. A write
// is acknowledged only after the commit that holds it; next may run more than
// once (a batch too big for one transaction is split and run again), so it
// must not have effects outside the record it returns.
func (s *Store) write(kind, name string, next func(prev Record, exists bool) (Record, error)) (Record, error) {
	w := &pendingWrite{kind: kind, name: name, next: next, done: make(chan struct{})}
	if err := s.run([]*pendingWrite{w}); err != nil {
		return Record{}, err
	}
	return w.rec, w.err
}

// run queues ws, one after the other, and returns once each is committed or
// has failed (its rec and err say which).
func (s *Store) run(ws []*pendingWrite) error {
	if len(ws) == 0 {
		return nil
	}
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	if err := s.Writable(); err != nil {
		return err
	}
	s.qmu.Lock()
	s.queue = append(s.queue, ws...)
	s.qmu.Unlock()
	for _, w := range ws {
		s.wait(w)
	}
	return nil
}

// wait returns when w is done, leading commits of the queue while it waits
// and no other writer does.
func (s *Store) wait(w *pendingWrite) {
	for {
		select {
		case <-w.done:
			return
		case s.lead <- struct{}{}:
			// The leader commits what is queued, oldest first: w, unless an
			// earlier leader took it, or more than maxBatch were ahead of it
			// (then it goes round again).
			s.commitQueued()
		}
	}
}

// commitQueued commits the oldest maxBatch queued writes. The caller holds
// the lead, which it gives back.
func (s *Store) commitQueued() {
	defer func() { <-s.lead }()
	s.qmu.Lock()
	n := min(len(s.queue), maxBatch)
	batch := slices.Clone(s.queue[:n])
	// Delete zeroes the places the rest moved out of: the queue keeps the
	// room of a burst, not its writes (their records and callbacks, each
	// the last object of a burst-time page on an idle node).
	s.queue = slices.Delete(s.queue, 0, n)
	s.qmu.Unlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.commitBatch(batch)
}

// callNext runs w's next; a panic in it fails w alone (the leader runs the
// others' next too, and must not take them down with it).
func (s *Store) callNext(w *pendingWrite, prev Record, exists bool) (rec Record, err error) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("store: a write panicked", "kind", w.kind, "name", w.name, "panic", p, "stack", string(debug.Stack()))
			err = fmt.Errorf("write panicked: %v", p)
		}
	}()
	return w.next(prev, exists)
}

// Writes counts the records of kind this store has committed since it was
// opened: its own writes and those applied from other nodes, deletions
// included. It moves before a write is acknowledged, so a reader that
// derived something from kind's records can tell with one load whether a
// write it must see came since.
func (s *Store) Writes(kind string) uint64 {
	if c := s.kindWrites[kind]; c != nil {
		return c.Load()
	}
	return 0
}

// Commits is how many transactions of writes this store has committed since
// it was opened; with Seq it tells how many writes shared a commit.
func (s *Store) Commits() uint64 { return s.commits.Load() }

// maxBatch bounds the writes of one group commit.
const maxBatch = 256

// pendingWrite is one write waiting in the group-commit queue.
type pendingWrite struct {
	kind, name string
	next       func(prev Record, exists bool) (Record, error)
	rec        Record
	err        error
	stored     bool // rec is to be committed (not unchanged or failed)
	// share is the decoding of rec the write made (an apply's check), for
	// the watchers; set by next.
	share *sharedObject
	done  chan struct{}
}

// commitBatch commits batch in one transaction and finishes each write.
// Called with s.wmu held.
func (s *Store) commitBatch(batch []*pendingWrite) {
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	seq := s.seq.Load()
	var written map[recordKey]Record // this batch's writes, for the ones after them
	for i, w := range batch {
		w.rec, w.err, w.stored = Record{}, nil, false
		prev, exists, err := s.prevRecord(txn, written, w.kind, w.name)
		if err != nil {
			w.err = err
			continue
		}
		rec, err := s.callNext(w, prev, exists)
		if errors.Is(err, errUnchanged) {
			w.rec = prev
			continue
		}
		if err != nil {
			w.err = err
			continue
		}
		rec.Seq = seq + 1
		if err := setRecord(txn, objectKey(w.kind, w.name), &rec, prev, exists, s.clock.Last()); err != nil {
			// The transaction may hold part of w: commit the writes before
			// it on their own (their next runs again on what is stored),
			// then the rest. A batch too big for one transaction is split
			// so; a write refused alone fails alone.
			txn.Discard()
			if i > 0 {
				s.commitBatch(batch[:i])
			}
			rest := batch[i:]
			if !errors.Is(err, badger.ErrTxnTooBig) || i == 0 {
				w.err = err
				finish(batch[i : i+1])
				rest = batch[i+1:]
			}
			if len(rest) > 0 {
				s.commitBatch(rest)
			}
			return
		}
		seq = rec.Seq
		w.rec, w.stored = rec, true
		if len(batch) > 1 {
			if written == nil {
				written = map[recordKey]Record{}
			}
			written[hotKey(w.kind, w.name)] = rec
		}
	}
	if seq != s.seq.Load() {
		if err := txn.Commit(); err != nil {
			for _, w := range batch {
				w.rec, w.stored = Record{}, false
				if w.err == nil {
					w.err = fmt.Errorf("commit: %w", err)
				}
			}
			finish(batch)
			return
		}
		s.seq.Store(seq)
		s.commits.Add(1)
		var bytes int64
		for _, w := range batch {
			if w.stored {
				bytes += w.rec.size()
				if c := s.kindWrites[w.kind]; c != nil {
					c.Add(1)
				}
				s.hot.put(w.rec)
				if w.rec.Deleted {
					s.tombs.noted(w.rec.DeletedAt)
				}
				s.notify(w.rec, w.share)
			}
		}
		if s.space != nil {
			s.space.wrote(bytes)
		}
		s.wrote()
	}
	finish(batch)
}

// prevRecord is the stored record a write of kind/name builds on: an earlier
// write of the same batch's, the hot one, or badger's.
func (s *Store) prevRecord(txn *badger.Txn, written map[recordKey]Record, kind, name string) (Record, bool, error) {
	if r, ok := written[hotKey(kind, name)]; ok {
		return r, true, nil
	}
	if r, ok := s.hot.get(kind, name); ok {
		return r, true, nil
	}
	return getRecord(txn, kind, name)
}

// finish wakes the writers of batch.
func finish(batch []*pendingWrite) {
	for _, w := range batch {
		close(w.done)
	}
}

// setRecord puts rec (its Seq set) into txn in place of prev: the record,
// its Seq index entry and the counters.
func setRecord(txn *badger.Txn, key []byte, rec *Record, prev Record, exists bool, hlc uint64) error {
	ops := []struct{ k, v []byte }{
		{key, encodeRecord(rec)},
		{seqKey(rec.Seq), key},
		{keySeq, putUint(rec.Seq)},
		{keyHLC, putUint(hlc)},
	}
	if rec.Deleted {
		ops = append(ops, struct{ k, v []byte }{tombKey(rec.Seq), nil})
	}
	for _, op := range ops {
		if err := txn.Set(op.k, op.v); err != nil {
			return err
		}
	}
	if exists {
		if err := deleteSeq(txn, prev); err != nil {
			return err
		}
	}
	return nil
}

// deleteSeq removes rec's Seq index entry and its tombstone mark.
func deleteSeq(txn *badger.Txn, rec Record) error {
	if err := txn.Delete(seqKey(rec.Seq)); err != nil {
		return err
	}
	if rec.Deleted {
		return txn.Delete(tombKey(rec.Seq))
	}
	return nil
}

// Admits is nil while the store has room for new work (a request through
// the API): the disk has SpaceHeadroom beyond what any write needs, so the
// writes of what is under way still find room once it says ErrNoSpace.
func (s *Store) Admits() error {
	if s.space == nil {
		return nil
	}
	return s.space.admit(time.Now())
}

// Space is the free bytes of the store's disk and those it needs free to
// write at all (it takes no new work below need + SpaceHeadroom); ok is
// false in memory, or when the disk cannot be asked.
func (s *Store) Space() (free, need int64, ok bool) {
	if s.space == nil {
		return 0, 0, false
	}
	return s.space.figures(time.Now())
}

// Writable is nil while the store takes writes: in memory always, on disk
// while its disk has room (see spaceGuard); else the ErrNoSpace that
// refuses them.
func (s *Store) Writable() error {
	if s.space == nil {
		return nil
	}
	return s.space.allow(time.Now())
}

// size is about the bytes r takes in badger's logs: its facets and keys.
func (r Record) size() int64 {
	n := int64(128 + len(r.Kind) + len(r.Name))
	for _, f := range r.Facets {
		n += int64(64 + len(f.Data))
	}
	return n
}
