package store

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/internal/leakcheck"
	"github.com/hf-fleet/hf/lib/types"
)

const waitFor = 10 * time.Second

// next waits for the next event; it fails the test when none comes or the
// channel closes.
func next(t *testing.T, ch <-chan Event) Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "watch channel closed")
		return ev
	case <-time.After(waitFor):
		t.Fatal("no watch event")
		return Event{}
	}
}

// waitClosed waits until ch is closed, discarding events.
func waitClosed(t *testing.T, ch <-chan Event) {
	t.Helper()
	deadline := time.After(waitFor)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("watch channel not closed")
		}
	}
}

// buffered takes what is in ch right now without waiting.
func buffered(ch <-chan Event) []Event {
	var out []Event
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return out
			}
			out = append(out, ev)
		default:
			return out
		}
	}
}

func describe(ev Event) string {
	if ev.Type == EventResync || ev.Type == EventSynced {
		return ev.Type.String()
	}
	return fmt.Sprintf("%s %s %d", ev.Type, ev.Record.Name, ev.Record.Seq)
}

func TestWatchReplayThenLive(t *testing.T) {
	cases := []struct {
		name    string
		fromSeq uint64
		replay  []string
	}{
		// Store: a..e at seq 1..5, c updated at 6, b deleted at 7.
		{"from zero", 0, []string{"put a 1", "put d 4", "put e 5", "put c 6", "delete b 7"}},
		{"from middle", 4, []string{"put e 5", "put c 6", "delete b 7"}},
		{"from last", 7, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newMemStore(t)
			for _, n := range []string{"a", "b", "c", "d", "e"} {
				putClaim(t, s, n)
			}
			_, err := s.Put(claim("c"), PutOptions{Update: true})
			require.NoError(t, err)
			_, err = s.Delete(types.KindMachineClaim, "b", types.Version{})
			require.NoError(t, err)

			ch := s.Watch(t.Context(), tc.fromSeq)
			var got []string
			for range tc.replay {
				got = append(got, describe(next(t, ch)))
			}
			assert.Equal(t, tc.replay, got)

			rec := putClaim(t, s, "f")
			ev := next(t, ch)
			assert.Equal(t, "put f 8", describe(ev))
			assert.Equal(t, rec, ev.Record)
			_, err = s.Delete(types.KindMachineClaim, "f", types.Version{})
			require.NoError(t, err)
			assert.Equal(t, "delete f 9", describe(next(t, ch)))
			assert.Empty(t, buffered(ch))
		})
	}
}

// WatchSnapshot marks the end of its replay, before any live change, and
// owes no marker when it must resync.
func TestWatchSnapshotMarksReplayEnd(t *testing.T) {
	cases := []struct {
		name    string
		fromSeq uint64
		want    []string
	}{
		{"from zero", 0, []string{"put a 1", "put b 2", "synced", "put c 3"}},
		{"from last", 2, []string{"synced", "put c 3"}},
		{"from the future", 99, []string{"resync", "put c 3"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newMemStore(t)
			putClaim(t, s, "a")
			putClaim(t, s, "b")
			ch := s.WatchSnapshot(t.Context(), tc.fromSeq)
			var got []string
			for range len(tc.want) - 1 {
				got = append(got, describe(next(t, ch)))
			}
			putClaim(t, s, "c")
			got = append(got, describe(next(t, ch)))
			assert.Equal(t, tc.want, got)
			assert.Empty(t, buffered(ch))
		})
	}
}

func TestWatchFromFutureSeqResyncs(t *testing.T) {
	s, _ := newMemStore(t)
	putClaim(t, s, "a")
	ch := s.Watch(t.Context(), 99)
	assert.Equal(t, EventResync, next(t, ch).Type)
	putClaim(t, s, "b")
	assert.Equal(t, "put b 2", describe(next(t, ch)))
}

// TestWatchNoGapNoDup starts watchers while writers run and checks each one
// sees strictly increasing seqs and ends with exactly the store's state.
func TestWatchNoGapNoDup(t *testing.T) {
	clk := newFakeClock()
	cfg := memConfig(clk)
	cfg.WatchBuffer = 100000 // no resync here
	s := openStore(t, cfg)
	const writers, each, names = 3, 150, 20

	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				name := fmt.Sprintf("c%d", (w*each+i)%names)
				if i%7 == 3 {
					_, _ = s.Delete(types.KindMachineClaim, name, types.Version{})
					continue
				}
				_, err := s.Put(claim(name), PutOptions{})
				assert.NoError(t, err)
			}
		})
	}
	type seen struct {
		from   uint64
		events []Event
	}
	var watches []seen
	var chans []<-chan Event
	for range 5 {
		require.Eventually(t, func() bool { return s.Seq() > uint64(len(watches))*40 }, waitFor, time.Millisecond)
		from := s.Seq() / 2
		watches = append(watches, seen{from: from})
		chans = append(chans, s.Watch(t.Context(), from))
	}
	wg.Wait()
	final := s.Seq()

	var state []Record
	require.NoError(t, s.Scan(func(r Record) error { state = append(state, r); return nil }))
	for i := range watches {
		w := &watches[i]
		for {
			ev := next(t, chans[i])
			require.NotEqual(t, EventResync, ev.Type)
			w.events = append(w.events, ev)
			if ev.Record.Seq == final {
				break
			}
		}
		last := map[string]Record{}
		prev := w.from
		for _, ev := range w.events {
			require.Greater(t, ev.Record.Seq, prev, "watch %d: seqs strictly increase", i)
			prev = ev.Record.Seq
			assert.Equal(t, ev.Record.Deleted, ev.Type == EventDelete)
			last[ev.Record.Name] = ev.Record
		}
		// Every record written after from is seen, in its final form.
		for _, r := range state {
			if r.Seq > w.from {
				got := last[r.Name]
				got.Data = nil // Scan does not assemble the object JSON
				assert.Equal(t, r, got, "watch %d: %s", i, r.Name)
			}
		}
		assert.Empty(t, buffered(chans[i]))
	}
}

func TestWatchSlowWatcherResyncsWithoutBlockingWriters(t *testing.T) {
	clk := newFakeClock()
	cfg := memConfig(clk)
	cfg.WatchBuffer = 4
	s := openStore(t, cfg)
	ch := s.Watch(t.Context(), 0)

	var wrote atomic.Int64
	go func() {
		for i := range 1000 {
			if _, err := s.Put(claim(fmt.Sprintf("c%d", i%50)), PutOptions{}); err != nil {
				return
			}
			wrote.Add(1)
		}
	}()
	require.Eventually(t, func() bool { return wrote.Load() == 1000 }, waitFor, time.Millisecond,
		"writers finished while nobody read the watch")

	got := buffered(ch)
	require.NotEmpty(t, got)
	require.LessOrEqual(t, len(got), 4)
	resync := -1
	for i, ev := range got {
		if ev.Type == EventResync {
			resync = i
		}
	}
	require.GreaterOrEqual(t, resync, 0, "a resync replaces the lost events: %v", got)
	assert.Zero(t, got[resync].Record.Seq)
	// After the resync come the latest writes, in order, up to the last one.
	prev := uint64(0)
	for _, ev := range got[resync+1:] {
		require.Equal(t, EventPut, ev.Type)
		require.Greater(t, ev.Record.Seq, prev)
		prev = ev.Record.Seq
	}
	if resync < len(got)-1 {
		assert.Equal(t, s.Seq(), prev)
	}

	// The subscriber lists again, then keeps getting live events.
	list, err := s.List(types.KindMachineClaim)
	require.NoError(t, err)
	assert.Len(t, list, 50)
	rec := putClaim(t, s, "after")
	ev := next(t, ch)
	assert.Equal(t, EventPut, ev.Type)
	assert.Equal(t, rec.Seq, ev.Record.Seq)
}

func TestWatchResyncWhileReplaying(t *testing.T) {
	clk := newFakeClock()
	cfg := memConfig(clk)
	cfg.WatchBuffer = 4
	s := openStore(t, cfg)
	for i := range 20 {
		putClaim(t, s, fmt.Sprintf("c%d", i))
	}
	ch := s.Watch(t.Context(), 0)
	// The replay fills the channel; live writes overflow the replay-time queue.
	for i := range 10 {
		_, err := s.Put(claim(fmt.Sprintf("c%d", i)), PutOptions{})
		require.NoError(t, err)
	}
	var events []Event
	for {
		ev := next(t, ch)
		events = append(events, ev)
		if ev.Type == EventResync {
			break
		}
		require.Less(t, len(events), 30, "no resync in %v", events)
	}
	// Whatever follows the resync is live writes in order (how many arrived
	// before the resync depends on scheduling), then the next write.
	prev := uint64(0)
	for _, ev := range buffered(ch) {
		require.Equal(t, EventPut, ev.Type)
		require.Greater(t, ev.Record.Seq, prev)
		prev = ev.Record.Seq
	}
	rec := putClaim(t, s, "live")
	for {
		ev := next(t, ch)
		require.Equal(t, EventPut, ev.Type)
		if ev.Record.Seq == rec.Seq {
			break
		}
		require.Less(t, ev.Record.Seq, rec.Seq)
	}
}

func TestWatchReplayLargerThanBuffer(t *testing.T) {
	clk := newFakeClock()
	cfg := memConfig(clk)
	cfg.WatchBuffer = 2
	s := openStore(t, cfg)
	for i := range 50 {
		putClaim(t, s, fmt.Sprintf("c%d", i))
	}
	ch := s.Watch(t.Context(), 10)
	for seq := uint64(11); seq <= 50; seq++ {
		ev := next(t, ch)
		require.Equal(t, EventPut, ev.Type)
		require.Equal(t, seq, ev.Record.Seq)
	}
	assert.Empty(t, buffered(ch))
}

func TestWatchClosesWithoutLeaks(t *testing.T) {
	base := runtime.NumGoroutine()
	clk := newFakeClock()
	cfg := memConfig(clk)
	cfg.GCInterval = time.Hour // the GC loop runs too
	s, err := Open(cfg, quietLog())
	require.NoError(t, err)
	for i := range 10 {
		putClaim(t, s, fmt.Sprintf("c%d", i))
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancelled := s.Watch(ctx, 0)
	idle := s.Watch(t.Context(), s.Seq())
	replaying := s.Watch(t.Context(), 0) // never read: blocked in its replay
	_ = next(t, cancelled)

	cancel()
	waitClosed(t, cancelled)
	putClaim(t, s, "more")
	assert.Equal(t, "put more 11", describe(next(t, idle)))

	require.NoError(t, s.Close())
	waitClosed(t, idle)
	waitClosed(t, replaying)
	leakcheck.Goroutines(t, base, waitFor)
}

// The watchers of a commit share one decoding of its record (the cache and
// the API's streams read one object): made once by the first that asks, or
// the apply's own check; a replayed event decodes afresh.
func TestWatchersShareTheDecoding(t *testing.T) {
	s, _ := newMemStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	from := s.Seq()
	a, b := s.Watch(ctx, from), s.Watch(ctx, from)
	putClaim(t, s, "c1")
	evA, evB := <-a, <-b
	objA, err := evA.View()
	require.NoError(t, err)
	objB, err := evB.View()
	require.NoError(t, err)
	assert.Same(t, objA, objB, "one decoding for both watchers")
	want, err := Decode(evA.Record)
	require.NoError(t, err)
	assert.Equal(t, want, objA)

	other, _ := newMemStore(t)
	rec, err := s.Get(types.KindMachineClaim, "c1")
	require.NoError(t, err)
	c := other.Watch(ctx, other.Seq())
	changed, err := other.Apply(rec)
	require.NoError(t, err)
	require.True(t, changed)
	evC := <-c
	require.NotNil(t, evC.shared)
	assert.NotNil(t, evC.shared.obj, "the apply's check decoded it already")
	got, err := evC.View()
	require.NoError(t, err)
	assert.Equal(t, want.(*types.MachineClaim).Spec, got.(*types.MachineClaim).Spec)

	replayed := <-s.Watch(ctx, from)
	assert.Nil(t, replayed.shared, "a replay has no shared decoding")
	obj, err := replayed.View()
	require.NoError(t, err)
	assert.Equal(t, want, obj)
}

// A filtered replay leaves out tombstones (Live) and other kinds, and tells
// them from the Seq index and its tombstone marks: entries without a mark
// (an older data dir) are read to learn what they are. Live changes are not
// filtered.
func TestWatchSnapshotOfFiltersReplay(t *testing.T) {
	s, _ := newMemStore(t)
	// Claims a..c at seq 1..3, a template at 4, b deleted at 5.
	for _, n := range []string{"a", "b", "c"} {
		putClaim(t, s, n)
	}
	_, err := s.Put(&types.MachineTemplate{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate},
		Metadata: types.ObjectMeta{Name: "small"},
	}, PutOptions{Create: true})
	require.NoError(t, err)
	_, err = s.Delete(types.KindMachineClaim, "b", types.Version{})
	require.NoError(t, err)

	replay := func(f ReplayFilter) []string {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		ch := s.WatchSnapshotOf(ctx, 0, f)
		var got []string
		for ev := next(t, ch); ev.Type != EventSynced; ev = next(t, ch) {
			got = append(got, describe(ev))
		}
		return got
	}
	claims := map[string]bool{types.KindMachineClaim: true}
	assert.Equal(t, []string{"put a 1", "put c 3", "put small 4", "delete b 5"}, replay(ReplayFilter{}))
	assert.Equal(t, []string{"put a 1", "put c 3", "delete b 5"}, replay(ReplayFilter{Kinds: claims}))
	assert.Equal(t, []string{"put a 1", "put c 3", "put small 4"}, replay(ReplayFilter{Live: true}))
	assert.Equal(t, []string{"put a 1", "put c 3"}, replay(ReplayFilter{Kinds: claims, Live: true}))

	// The marks say which entries are tombstones without their records.
	require.NoError(t, s.db.View(func(txn *badger.Txn) error {
		for seq, want := range map[uint64]bool{1: false, 4: false, 5: true} {
			_, err := txn.Get(tombKey(seq))
			assert.Equal(t, want, err == nil, "seq %d marked", seq)
		}
		return nil
	}))

	// Entries of an older data dir (or written by an earlier release) have
	// no mark: they are read, and the tombstone still left out.
	require.NoError(t, s.db.Update(func(txn *badger.Txn) error { return txn.Delete(tombKey(5)) }))
	assert.Equal(t, []string{"put a 1", "put c 3"}, replay(ReplayFilter{Kinds: claims, Live: true}))
	assert.Equal(t, []string{"put a 1", "put c 3", "delete b 5"}, replay(ReplayFilter{Kinds: claims}))

	// A tombstone written over, or collected, takes its mark with it.
	putClaim(t, s, "b")
	_, err = s.Delete(types.KindMachineClaim, "c", types.Version{})
	require.NoError(t, err)
	putClaim(t, s, "c")
	require.NoError(t, s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefixTomb})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			t.Errorf("mark left: %x", it.Item().Key())
		}
		return nil
	}))
	assert.Equal(t, []string{"put a 1", "put b 6", "put c 8"}, replay(ReplayFilter{Kinds: claims, Live: true}))

	// Live events pass whatever the filter.
	ch := s.WatchSnapshotOf(t.Context(), 0, ReplayFilter{Kinds: claims, Live: true})
	for ev := next(t, ch); ev.Type != EventSynced; ev = next(t, ch) {
	}
	_, err = s.Delete(types.KindMachineClaim, "a", types.Version{})
	require.NoError(t, err)
	assert.Equal(t, "delete a 9", describe(next(t, ch)))

	// A marked entry is skipped on the mark, its record not read: put a
	// live record where a's tombstone is, and the replay still leaves seq 9
	// out (read, it would send "put a 9").
	require.NoError(t, s.db.Update(func(txn *badger.Txn) error {
		rec, ok, err := getRecord(txn, types.KindMachineClaim, "b")
		require.True(t, ok)
		require.NoError(t, err)
		rec.Name, rec.Seq = "a", 9
		return txn.Set(objectKey(types.KindMachineClaim, "a"), encodeRecord(&rec))
	}))
	assert.Equal(t, []string{"put b 6", "put c 8"}, replay(ReplayFilter{Kinds: claims, Live: true}))
	assert.Contains(t, replay(ReplayFilter{Kinds: claims}), "put a 9", "unfiltered, the entry is read")
}
