// Package store is hf's badger-backed object store: versioned records of every
// kind, tombstones, watch, and the hybrid logical clock that versions writes.
//
// Every write (Put, Delete, Apply) runs under one write lock in one badger
// transaction: the preconditions are checked, the record gets the next hybrid
// logical clock version and the next local commit sequence (Seq), and watchers
// are told in Seq order after the commit. Reads (Get, List, Scan) take no lock.
//
// Keys (see record.go):
//
//	o/<kind>/<name>  -> record: binary header + object JSON (or tombstone)
//	q/<seq:8 BE>     -> o/<kind>/<name>, the record that currently holds seq
//	m/seq            -> last local commit sequence
//	m/hlc            -> clock high-water mark
//	m/gcseq          -> highest seq of a collected tombstone
//	m/x/<name>       -> a component's own data for this node (PutMeta)
package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hf-fleet/hf/lib/types"
)

// Sentinel errors callers branch on.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
	ErrConflict = errors.New("version conflict")
	ErrLocked   = errors.New("data dir is in use by another process")
	ErrClosed   = errors.New("store is closed")
	// ErrNotOwner: a write would change a facet its caller does not own.
	ErrNotOwner = errors.New("not the facet's writer")
	// ErrFenced: a write of a facet at an epoch (a claim's round) older than
	// the stored one; its writer has been superseded.
	ErrFenced = errors.New("superseded by a later round")
	// ErrStop, returned by the callback of Each or EachAfter, ends the
	// scan early without an error.
	ErrStop = errors.New("stop the scan")
)

// Defaults applied by Open to zero Config fields.
const (
	DefaultGCInterval   = 5 * time.Minute
	DefaultTombstoneTTL = 24 * time.Hour
	DefaultWatchBuffer  = 1024
)

// Config configures a Store.
type Config struct {
	// Dir is the badger directory; ignored when InMemory.
	Dir      string
	InMemory bool
	// NodeID is stamped on every version this store issues (required).
	NodeID string
	// GCInterval is how often value-log GC and tombstone collection run (default
	// 5m; negative disables the background GC, for tests).
	GCInterval time.Duration
	// TombstoneTTL is how long a delete is remembered (default 24h).
	TombstoneTTL time.Duration
	// WatchBuffer is each watcher's channel size (default 1024).
	WatchBuffer int
	// SyncWrites makes every commit fsync before it returns. Off by default: a
	// process crash loses nothing (the OS holds the pages), a power cut may lose
	// the last writes, which anti-entropy repairs from the peers.
	SyncWrites bool
	// MemoryLimit, when positive, is the process's memory budget in bytes:
	// badger's memtables and caches take at most a sixteenth of it each
	// (and never more than without a budget).
	MemoryLimit int64
	// Now is the wall clock (default time.Now); tests inject one that can go
	// backwards.
	Now func() time.Time
	// FreeSpace tells the free bytes of a directory's disk (default: the
	// disk's own figure); tests inject one.
	FreeSpace func(dir string) (int64, error)
}

// withDefaults returns cfg with every zero field set to its default.
func (cfg Config) withDefaults() Config {
	if cfg.GCInterval == 0 {
		cfg.GCInterval = DefaultGCInterval
	}
	if cfg.TombstoneTTL <= 0 {
		cfg.TombstoneTTL = DefaultTombstoneTTL
	}
	if cfg.WatchBuffer <= 0 {
		cfg.WatchBuffer = DefaultWatchBuffer
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return cfg
}

// Record is one stored object or tombstone.
type Record struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Version is the newest of the facet versions and the deletion's.
	Version types.Version `json:"version"`
	// Seq is this store's local commit sequence of the record (not replicated).
	Seq uint64 `json:"seq"`
	// Deleted means the record has no live object: a tombstone, or facets
	// that arrived without (or before) the object's creating facet.
	Deleted bool `json:"deleted,omitempty"`
	// Tomb is the version of the object's last deletion (zero: never
	// deleted); facets older than it are gone with it.
	Tomb types.Version `json:"tomb,omitzero"`
	// DeletedAt is when the last deletion was written (for collection).
	DeletedAt time.Time `json:"deletedAt,omitzero"`
	// Facets are the object's facets with their versions (see types.Facet).
	Facets []FacetRecord `json:"facets,omitempty"`
	// Data is the full object JSON assembled from the facets, with
	// metadata.version set; empty unless live. Records handed to watchers,
	// returned by writes and read by Get share Facets (and watchers' Data)
	// with the store's recently written records: treat them as read-only.
	Data json.RawMessage `json:"data,omitempty"`
}

// sharedObject is one decoding of a record, made by the first reader that
// asks (or by the write that decoded it already) and read by the others.
type sharedObject struct {
	once sync.Once
	obj  types.Object
	err  error
}

// decodedShare is a sharedObject holding obj, decoded already.
func decodedShare(obj types.Object) *sharedObject {
	sh := &sharedObject{obj: obj}
	sh.once.Do(func() {})
	return sh
}

// View returns the object of a put event's record. A commit's event is
// decoded once for all its watchers (the cluster's cache and every event
// stream of the API read the same object), so the object is read-only:
// whoever needs to change it decodes a copy (Decode). An event without a
// shared decoding (a replayed one) is decoded afresh.
func (e Event) View() (types.Object, error) {
	if e.shared == nil {
		return Decode(e.Record)
	}
	e.shared.once.Do(func() { e.shared.obj, e.shared.err = Decode(e.Record) })
	return e.shared.obj, e.shared.err
}

// PutOptions are the preconditions of a Put.
type PutOptions struct {
	// Create fails with ErrExists when a live object of that name exists.
	Create bool
	// Update fails with ErrNotFound when no live object exists.
	Update bool
	// IfVersion, when not zero, fails with ErrConflict unless the stored version equals it.
	IfVersion types.Version
	// Base, when set, is the stored record obj was read from: only the
	// facets obj changed relative to it are written, and the write fails
	// with ErrConflict when another write changed one of those since.
	Base *Record
	// Facets, when set, are the only facets the write may change; changing
	// another fails with ErrNotOwner. A create writes only these and keeps
	// facets of others that came before the object.
	Facets []string
}

// EventType says what a watch event is.
type EventType int

// Event types.
const (
	EventPut EventType = iota + 1
	EventDelete
	// EventResync means the watcher fell behind and must list again; Record is empty.
	EventResync
	// EventSynced ends the replay of a WatchSnapshot: every record the
	// snapshot held has been sent, live changes follow; Record is empty.
	EventSynced
)

// String names the event type for logs.
func (t EventType) String() string {
	switch t {
	case EventPut:
		return "put"
	case EventDelete:
		return "delete"
	case EventResync:
		return "resync"
	case EventSynced:
		return "synced"
	}
	return fmt.Sprintf("EventType(%d)", int(t))
}

// Event is one change seen by a watcher.
type Event struct {
	Type   EventType
	Record Record

	// shared, when set, is the decoding of Record that every watcher's copy
	// of a commit's event shares (see View).
	shared *sharedObject
}

// Store is the object store. All methods are safe for concurrent use.
type Store struct {
	cfg   Config
	log   *slog.Logger
	db    *badger.DB
	clock *HLC
	// space refuses writes before the disk is too full for badger's maps
	// (nil in memory).
	space *spaceGuard

	// wmu serialises writes, so Seq order is commit order, and guards watchers
	// and gcSeq.
	wmu   sync.Mutex
	seq   atomic.Uint64
	gcSeq uint64
	// collected counts the tombstones collected since Open (Collected).
	collected atomic.Uint64
	// tombs says when CollectTombstones has something to find.
	tombs tombWatch
	// commits counts the group commits since Open (Commits).
	commits atomic.Uint64
	// kindWrites counts each kind's committed records (Writes); the map is
	// made at Open and only read after.
	kindWrites map[string]*atomic.Uint64
	watchers   map[*watcher]struct{}

	// life guards closed and the count of calls inside the badger DB, so Close
	// never closes badger under a running call.
	life   sync.Mutex
	idle   *sync.Cond
	closed bool
	active int

	// queue holds the writes waiting for a group commit; lead (capacity 1) is
	// held by the writer committing them (see write).
	qmu   sync.Mutex
	queue []*pendingWrite
	lead  chan struct{}

	// keys serialises the read-modify-writes of Update per key.
	keysMu sync.Mutex
	keys   map[recordKey]*keyLock

	// hot holds the records written last (see hotRecords).
	hot hotRecords

	// kick wakes compactLoop after a write (see compact.go).
	kick chan struct{}

	done chan struct{}  // closed by Close: stops GC, compaction and watchers
	wg   sync.WaitGroup // GC and compaction loops and watcher goroutines
}

// Open opens (or creates) the store. It fails with a wrapped ErrLocked when
// another process holds the directory.
func Open(cfg Config, log *slog.Logger) (*Store, error) {
	cfg = cfg.withDefaults()
	if log == nil {
		log = slog.Default()
	}
	if cfg.NodeID == "" {
		return nil, errors.New("open store: node id is required")
	}
	if !cfg.InMemory && cfg.Dir == "" {
		return nil, errors.New("open store: dir is required unless in memory")
	}
	opt := badgerOptions(cfg, log)
	var space *spaceGuard
	if !cfg.InMemory {
		if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		space = newSpaceGuard(cfg.Dir, opt.MemTableSize, opt.ValueLogFileSize, cfg.FreeSpace, log)
		if err := space.check(0); err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
	}
	db, err := badger.Open(opt)
	if err != nil {
		if strings.Contains(err.Error(), "Another process is using this Badger database") {
			return nil, fmt.Errorf("open store %s: %w", cfg.Dir, ErrLocked)
		}
		return nil, fmt.Errorf("open store %s: %w", cfg.Dir, err)
	}
	s := &Store{
		cfg:        cfg,
		log:        log,
		db:         db,
		space:      space,
		watchers:   map[*watcher]struct{}{},
		kindWrites: map[string]*atomic.Uint64{},
		kick:       make(chan struct{}, 1),
		lead:       make(chan struct{}, 1),
		done:       make(chan struct{}),
	}
	s.idle = sync.NewCond(&s.life)
	for _, k := range types.Kinds() {
		s.kindWrites[k] = new(atomic.Uint64)
	}
	st, err := recoverState(db)
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open store %s: %w", cfg.Dir, err)
	}
	s.seq.Store(st.seq)
	s.gcSeq = st.gcSeq
	s.tombs.opened(st.tombs, st.oldestTomb)
	s.clock = NewHLC(cfg.Now, st.hlc)
	log.Debug("store opened", "dir", cfg.Dir, "records", st.records, "seq", st.seq, "hlc", st.hlc)
	if cfg.GCInterval > 0 {
		s.wg.Add(1)
		go s.gcLoop()
	}
	// A store left with level-0 tables by a crash is merged soon after Open.
	s.wg.Add(1)
	go s.compactLoop()
	s.wrote()
	return s, nil
}

// recovered is what Open reads back from a store.
type recovered struct {
	seq, hlc, gcSeq uint64
	records         int
	// tombs: a tombstone is stored, the earliest deleted at oldestTomb.
	tombs      bool
	oldestTomb time.Time
}

// recoverState reads the counters and scans every record, so neither the seq
// nor the clock restarts below anything already stored, whatever the wall clock
// says now.
func recoverState(db *badger.DB) (recovered, error) {
	var st recovered
	err := db.View(func(txn *badger.Txn) error {
		var err error
		if st.seq, err = getUint(txn, keySeq); err != nil {
			return err
		}
		if st.hlc, err = getUint(txn, keyHLC); err != nil {
			return err
		}
		if st.gcSeq, err = getUint(txn, keyGCSeq); err != nil {
			return err
		}
		return scanRecords(txn, func(r Record) error {
			st.records++
			st.seq = max(st.seq, r.Seq)
			st.hlc = max(st.hlc, r.Version.HLC)
			if r.Deleted {
				st.oldestTomb, st.tombs = earliest(st.oldestTomb, st.tombs, r.DeletedAt), true
			}
			return nil
		})
	})
	if err != nil {
		return st, fmt.Errorf("recover state: %w", err)
	}
	return st, nil
}

// Close stops the GC loop, closes every watcher's channel and closes badger.
// It is idempotent; calls after Close fail with ErrClosed.
func (s *Store) Close() error {
	s.life.Lock()
	if s.closed {
		s.life.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	// Calls already inside finish first (a Watch among them may still start
	// its goroutine), then the goroutines, which stop on done.
	for s.active > 0 {
		s.idle.Wait()
	}
	s.life.Unlock()
	s.wg.Wait()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	return nil
}

// enter marks a call that uses badger; every successful enter needs a leave.
func (s *Store) enter() error {
	s.life.Lock()
	defer s.life.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.active++
	return nil
}

func (s *Store) leave() {
	s.life.Lock()
	s.active--
	if s.active == 0 {
		s.idle.Broadcast()
	}
	s.life.Unlock()
}

// keyLock is the lock of one key while someone holds or waits for it.
type keyLock struct {
	mu    sync.Mutex
	users int
}

// Cool drops what the store keeps for writes in flight, for a node gone
// idle: the hot records (written during the burst that ended, each a few
// small objects that keep a span of the burst's heap each once its garbage
// is collected) and the key locks' map, which a burst grew and which does
// not shrink when its locks go. A write after it reads from badger.
func (s *Store) Cool() {
	s.hot.clear()
	s.keysMu.Lock()
	if len(s.keys) == 0 {
		s.keys = nil
	}
	s.keysMu.Unlock()
}

// lockKey takes the lock of kind/name and returns its release. Locks of
// different keys are independent, so an Update may nest in another's fn.
func (s *Store) lockKey(kind, name string) (unlock func()) {
	k := recordKey{kind, name}
	s.keysMu.Lock()
	if s.keys == nil {
		s.keys = map[recordKey]*keyLock{}
	}
	l := s.keys[k]
	if l == nil {
		l = &keyLock{}
		s.keys[k] = l
	}
	l.users++
	s.keysMu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		s.keysMu.Lock()
		if l.users--; l.users == 0 {
			delete(s.keys, k)
		}
		s.keysMu.Unlock()
	}
}

// NodeID is the node id stamped on the versions this store issues.
func (s *Store) NodeID() string { return s.cfg.NodeID }

// Seq is the latest local commit sequence.
func (s *Store) Seq() uint64 { return s.seq.Load() }

// Get returns the live record kind/name; ErrNotFound when it is missing or
// deleted.
func (s *Store) Get(kind, name string) (Record, error) {
	return s.get(kind, name, true)
}

// get is Get; with data false the record's object JSON is not assembled
// (for callers that decode its facets).
func (s *Store) get(kind, name string, data bool) (Record, error) {
	rec, ok, err := s.Lookup(kind, name)
	switch {
	case err != nil:
	case !ok || rec.Deleted:
		err = ErrNotFound
	case data:
		err = rec.withData()
	}
	if err != nil {
		return Record{}, fmt.Errorf("get %s/%s: %w", kind, name, err)
	}
	return rec, nil
}

// Deleted reports whether the store holds kind/name's tombstone: it was
// deleted (and its tombstone not yet collected). A record never seen is not
// deleted: a replica may not have it yet.
func (s *Store) Deleted(kind, name string) (bool, error) {
	rec, ok, err := s.Lookup(kind, name)
	return ok && rec.Deleted, err
}

// Lookup returns kind/name's record, live or deleted (a tombstone, or
// facets without their object), without the assembled object JSON (Data is
// nil: the facets are the record); ok is false when the store holds none.
// The record shares its facets with the store's: read only.
func (s *Store) Lookup(kind, name string) (rec Record, ok bool, err error) {
	if err := s.enter(); err != nil {
		return Record{}, false, err
	}
	defer s.leave()
	if rec, ok = s.hot.get(kind, name); ok {
		return rec, true, nil
	}
	err = s.db.View(func(txn *badger.Txn) error {
		rec, ok, err = getRecord(txn, kind, name)
		return err
	})
	return rec, ok, err
}

// List returns the live records of kind, sorted by name.
func (s *Store) List(kind string) ([]Record, error) {
	return s.list(kind, true)
}

// list is List; with data false the object JSON is not assembled.
func (s *Store) list(kind string, data bool) ([]Record, error) {
	out := []Record{}
	err := s.Each(kind, func(r Record) error {
		if data {
			if err := r.withData(); err != nil {
				return err
			}
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", kind, err)
	}
	return out, nil
}

// Each calls fn for every live record of kind, in name order, from one
// consistent snapshot, without the assembled object JSON (Data is nil): for
// readers that decode the facets and need not hold every record at once.
// An error from fn stops it and is returned.
func (s *Store) Each(kind string, fn func(Record) error) error {
	return s.EachAfter(kind, "", fn)
}

// EachAfter is Each over the records whose names sort after after ("": all
// of them), for a list's next page; fn returning ErrStop ends it early,
// and EachAfter then returns nil.
func (s *Store) EachAfter(kind, after string, fn func(Record) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	err := s.db.View(func(txn *badger.Txn) error {
		return scanAfter(txn, kindPrefix(kind), after, func(r Record) error {
			if r.Deleted {
				return nil
			}
			return fn(r)
		})
	})
	if errors.Is(err, ErrStop) {
		return nil
	}
	return err
}

// Scan calls fn for every record of every kind, tombstones included, in
// kind/name order, from one consistent snapshot, with versions and facets but
// without the assembled object JSON (Data is nil). An error from fn stops the
// scan and is returned.
func (s *Store) Scan(fn func(Record) error) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	return s.db.View(func(txn *badger.Txn) error {
		return scanRecords(txn, fn)
	})
}

// Now is the wall clock the store stamps objects with (createdAt, updatedAt,
// deletedAt). Components that write times next to those stamps read it, so one
// injected clock moves them all.
func (s *Store) Now() time.Time { return s.cfg.Now() }

// Clock returns a fresh version from the store's clock (it ticks the clock) and
// persists the clock's high-water mark, so a restarted node never issues it again.
func (s *Store) Clock() types.Version {
	v := types.Version{HLC: s.clock.Now(), Node: s.cfg.NodeID}
	if err := s.persistClock(); err != nil {
		// Nothing to return it to: the version is still good for this run, and
		// the next write persists the mark.
		s.log.Warn("persist clock", "err", err)
	}
	return v
}

// persistClock writes the clock's high-water mark.
func (s *Store) persistClock() error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(keyHLC, putUint(s.clock.Last()))
	})
}
