package store

import (
	"bytes"
	"context"
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// Watch streams changes: first every record with Seq > fromSeq in Seq order
// (tombstones as EventDelete), from a snapshot taken when Watch is called, then
// every later commit as it happens, with no gap and no duplicate between the
// two. Watch(ctx, 0) therefore starts with the whole store.
//
// Writers never wait for a watcher. A watcher whose channel (WatchBuffer
// events) is full, or which falls more than WatchBuffer events behind while it
// is still replaying, loses its queued events and gets one EventResync instead;
// it should list again, then carry on with the live events that follow. When
// fromSeq cannot be replayed (it is ahead of this store's Seq, e.g. after the
// data dir was replaced, or tombstones after it have been collected) the first
// event is EventResync. The channel is closed when ctx is done or the store
// closes; a Watch on a closed store returns a closed channel.
func (s *Store) Watch(ctx context.Context, fromSeq uint64) <-chan Event {
	return s.watch(ctx, fromSeq, false, ReplayFilter{})
}

// WatchSnapshot is Watch with one more event: EventSynced once the replay is
// done, before the first live change, so the subscriber knows when it holds
// the whole snapshot. A watcher that owes a resync gets EventResync instead.
func (s *Store) WatchSnapshot(ctx context.Context, fromSeq uint64) <-chan Event {
	return s.watch(ctx, fromSeq, true, ReplayFilter{})
}

// ReplayFilter narrows what a watch replays from its snapshot; live events
// are not filtered. The zero value replays everything.
type ReplayFilter struct {
	// Kinds, when not nil, are the only kinds replayed.
	Kinds map[string]bool
	// Live leaves tombstones out: for a subscriber that starts from nothing
	// and has no use for the deletions of objects it never saw.
	Live bool
}

// WatchSnapshotOf is WatchSnapshot whose replay leaves out what f does. The
// Seq index says each entry's kind, and the tombstone marks beside it
// (written since 2026-12-05) which entries are tombstones, so what is left
// out is not read: a new event stream on a node that had created and
// deleted 20,000 claims used to read them all before its first event.
func (s *Store) WatchSnapshotOf(ctx context.Context, fromSeq uint64, f ReplayFilter) <-chan Event {
	return s.watch(ctx, fromSeq, true, f)
}

func (s *Store) watch(ctx context.Context, fromSeq uint64, mark bool, f ReplayFilter) <-chan Event {
	w := &watcher{ctx: ctx, out: make(chan Event, s.cfg.WatchBuffer), limit: s.cfg.WatchBuffer, mark: mark, filter: f}
	if err := s.enter(); err != nil {
		close(w.out)
		return w.out
	}
	defer s.leave()

	s.wmu.Lock()
	cur := s.seq.Load()
	var snap *badger.Txn
	switch {
	case fromSeq > cur || (fromSeq > 0 && fromSeq < s.gcSeq):
		w.resync = true
	case fromSeq < cur:
		// Opened under the write lock: the snapshot holds exactly the commits
		// up to cur, and every later one goes to w's queue.
		snap = s.db.NewTransaction(false)
	}
	s.watchers[w] = struct{}{}
	s.wg.Add(1)
	s.wmu.Unlock()

	go s.runWatcher(w, snap, fromSeq)
	return w.out
}

// watcher is one Watch subscription. Until its replay is done, live events
// wait in queue (at most limit of them); afterwards writers send to out
// directly and never block.
type watcher struct {
	ctx   context.Context
	out   chan Event
	limit int
	mark  bool // send EventSynced after the replay
	// filter leaves entries out of the replay.
	filter ReplayFilter

	mu     sync.Mutex
	live   bool    // replay done: push sends to out
	closed bool    // out is closed
	resync bool    // events were dropped: EventResync is owed
	queue  []Event // live events that arrived during the replay
}

// runWatcher replays the snapshot, hands over to live delivery and closes the
// channel when ctx is done or the store closes.
func (s *Store) runWatcher(w *watcher, snap *badger.Txn, fromSeq uint64) {
	defer s.wg.Done()
	defer s.dropWatcher(w)
	if snap != nil {
		ok := s.replay(w, snap, fromSeq)
		snap.Discard()
		if !ok {
			return
		}
	}
	if w.mark && !w.behind() && !w.send(Event{Type: EventSynced}, s.done) {
		return
	}
	if !w.goLive(s.done) {
		return
	}
	select {
	case <-w.ctx.Done():
	case <-s.done:
	}
}

// replay sends the snapshot's records with Seq > fromSeq in Seq order. It stops
// early (true) when the watcher already owes a resync, and returns false when
// ctx is done or the store closes.
func (s *Store) replay(w *watcher, snap *badger.Txn, fromSeq uint64) bool {
	it := snap.NewIterator(badger.IteratorOptions{Prefix: prefixSeq, PrefetchValues: true, PrefetchSize: 100})
	defer it.Close()
	// tombs walks the tombstone marks beside the index, both in Seq order.
	var tombs *badger.Iterator
	if w.filter.Live {
		tombs = snap.NewIterator(badger.IteratorOptions{Prefix: prefixTomb})
		defer tombs.Close()
		tombs.Seek(tombKey(fromSeq + 1))
	}
	for it.Seek(seqKey(fromSeq + 1)); it.Valid(); it.Next() {
		if w.behind() {
			return true
		}
		if tombs != nil {
			seq := it.Item().Key()[len(prefixSeq):]
			for tombs.Valid() && bytes.Compare(tombs.Item().Key()[len(prefixTomb):], seq) < 0 {
				tombs.Next()
			}
			if tombs.Valid() && bytes.Equal(tombs.Item().Key()[len(prefixTomb):], seq) {
				continue
			}
		}
		key, err := it.Item().ValueCopy(nil)
		if err != nil {
			s.log.Warn("watch replay", "err", err)
			continue
		}
		kind, name, err := parseObjectKey(key)
		if err != nil {
			s.log.Warn("watch replay", "err", err)
			continue
		}
		if w.filter.Kinds != nil && !w.filter.Kinds[kind] {
			continue
		}
		rec, ok, err := getRecord(snap, kind, name)
		if err != nil || !ok {
			s.log.Warn("watch replay: seq index points at no record", "kind", kind, "name", name, "err", err)
			continue
		}
		if w.filter.Live && rec.Deleted {
			continue
		}
		if !w.send(eventOf(rec), s.done) {
			return false
		}
	}
	return true
}

// dropWatcher unregisters w and closes its channel.
func (s *Store) dropWatcher(w *watcher) {
	s.wmu.Lock()
	delete(s.watchers, w)
	s.wmu.Unlock()
	w.mu.Lock()
	w.closed = true
	close(w.out)
	w.mu.Unlock()
}

// notify hands a committed record to every watcher. Called with s.wmu held, so
// watchers see commits in Seq order.
// The watchers' events share one decoding of rec: share when the write
// decoded it already, else made by the first watcher that asks.
func (s *Store) notify(rec Record, share *sharedObject) {
	if len(s.watchers) == 0 {
		return
	}
	ev := eventOf(rec)
	if ev.Type == EventPut {
		if ev.shared = share; share == nil {
			ev.shared = &sharedObject{}
		}
	}
	for w := range s.watchers {
		w.push(ev)
	}
}

func eventOf(rec Record) Event {
	if rec.Deleted {
		return Event{Type: EventDelete, Record: rec}
	}
	return Event{Type: EventPut, Record: rec}
}

// push delivers a live event without blocking: to out once live (on a full
// channel: drop what is queued there and send EventResync), else to the
// replay-time queue (when that is full: drop it and owe EventResync).
//
// Dropping is safe because the subscriber lists after it receives EventResync,
// and every dropped event's write committed before that.
func (w *watcher) push(ev Event) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.closed:
		return
	case !w.live:
		if w.resync {
			return
		}
		if len(w.queue) >= w.limit {
			w.queue = nil
			w.resync = true
			return
		}
		w.queue = append(w.queue, ev)
		return
	}
	select {
	case w.out <- ev:
	default:
		w.sendResync()
	}
}

// sendResync empties out and puts EventResync in it. Called with w.mu held by
// the only sender, so the send cannot block.
func (w *watcher) sendResync() {
drain:
	for {
		select {
		case <-w.out:
		default:
			break drain
		}
	}
	w.out <- Event{Type: EventResync}
}

// behind reports whether the watcher owes a resync.
func (w *watcher) behind() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.resync
}

// send blocks until ev is delivered; false when ctx is done or the store closes.
func (w *watcher) send(ev Event, done <-chan struct{}) bool {
	select {
	case w.out <- ev:
		return true
	case <-w.ctx.Done():
		return false
	case <-done:
		return false
	}
}

// goLive delivers what queued up during the replay (or the owed resync) and
// switches push to direct delivery; false when ctx is done or the store closes.
func (w *watcher) goLive(done <-chan struct{}) bool {
	for {
		w.mu.Lock()
		if w.resync {
			w.sendResync()
			w.resync = false
			w.queue = nil
			w.live = true
			w.mu.Unlock()
			return true
		}
		if len(w.queue) == 0 {
			w.queue = nil
			w.live = true
			w.mu.Unlock()
			return true
		}
		ev := w.queue[0]
		w.queue[0] = Event{}
		w.queue = w.queue[1:]
		w.mu.Unlock()
		if !w.send(ev, done) {
			return false
		}
	}
}
