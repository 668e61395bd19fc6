package store

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// tombstones lists the names of stored tombstones.
func tombstones(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	require.NoError(t, s.Scan(func(r Record) error {
		if r.Deleted {
			out = append(out, r.Name)
		}
		return nil
	}))
	return out
}

func TestCollectTombstones(t *testing.T) {
	s, clk := newMemStore(t)
	t0 := clk.Now()
	for _, n := range []string{"a", "b", "c", "keep"} {
		putClaim(t, s, n)
	}
	del := func(name string) {
		_, err := s.Delete(types.KindMachineClaim, name, types.Version{})
		require.NoError(t, err)
	}
	del("a")
	del("c")
	putClaim(t, s, "c") // re-created: no longer a tombstone
	clk.Add(time.Hour)
	del("b")
	require.Equal(t, []string{"a", "b"}, tombstones(t, s))

	steps := []struct {
		name      string
		olderThan time.Time
		want      int
		left      []string
	}{
		{"nothing old enough", t0, 0, []string{"a", "b"}},
		{"the first delete", t0.Add(30 * time.Minute), 1, []string{"b"}},
		{"again is a no-op", t0.Add(30 * time.Minute), 0, []string{"b"}},
		{"the rest", t0.Add(2 * time.Hour), 1, nil},
	}
	collected := s.Collected()
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			n, err := s.CollectTombstones(st.olderThan)
			require.NoError(t, err)
			assert.Equal(t, st.want, n)
			assert.Equal(t, st.left, tombstones(t, s))
			collected += uint64(n)
			assert.Equal(t, collected, s.Collected(), "Collected counts every collection")
		})
	}
	list, err := s.List(types.KindMachineClaim)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, "c", list[0].Name)
	assert.Equal(t, "keep", list[1].Name)
}

func TestCollectKeepsReplacedTombstone(t *testing.T) {
	s, _ := newMemStore(t)
	putClaim(t, s, "a")
	tomb, err := s.Delete(types.KindMachineClaim, "a", types.Version{})
	require.NoError(t, err)
	// Found by a scan, then re-created before the collection got the lock.
	putClaim(t, s, "a")
	n, err := s.collect([]Tombstone{{types.KindMachineClaim, "a", tomb.Version}})
	require.NoError(t, err)
	assert.Zero(t, n)
	_, err = s.Get(types.KindMachineClaim, "a")
	assert.NoError(t, err)
}

func TestWatchFromBeforeCollectedTombstoneResyncs(t *testing.T) {
	dir := t.TempDir()
	clk := newFakeClock()
	cfg := Config{Dir: dir, NodeID: "n1", GCInterval: -1, Now: clk.Now}
	s, err := Open(cfg, quietLog())
	require.NoError(t, err)
	putClaim(t, s, "a")                                             // seq 1
	putClaim(t, s, "b")                                             // seq 2
	_, err = s.Delete(types.KindMachineClaim, "a", types.Version{}) // seq 3
	require.NoError(t, err)
	putClaim(t, s, "c") // seq 4
	require.NoError(t, s.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(tombKey(3))
		return err
	}), "the tombstone is marked")
	n, err := s.CollectTombstones(clk.Now().Add(time.Second))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.ErrorIs(t, s.db.View(func(txn *badger.Txn) error {
		_, err := txn.Get(tombKey(3))
		return err
	}), badger.ErrKeyNotFound, "its mark went with it")
	require.NoError(t, s.Close())

	// The collected seq is remembered across a restart.
	s = openStore(t, cfg)
	cases := []struct {
		name  string
		from  uint64
		first string
	}{
		{"before the tombstone: resync", 2, "resync"},
		{"after it: replay", 3, "put c 4"},
		{"from zero: full replay without it", 0, "put b 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ch := s.Watch(t.Context(), tc.from)
			assert.Equal(t, tc.first, describe(next(t, ch)))
		})
	}
}

// warnCounter is a slog handler counting records at Warn and above.
type warnCounter struct{ n atomic.Int64 }

func (h *warnCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h *warnCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.n.Add(1)
	}
	return nil
}
func (h *warnCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *warnCounter) WithGroup(string) slog.Handler      { return h }

func TestGCLoopCollectsTombstonesAndRunsValueLogGC(t *testing.T) {
	clk := newFakeClock()
	cfg := Config{Dir: t.TempDir(), NodeID: "n1", GCInterval: 10 * time.Millisecond, TombstoneTTL: time.Hour, Now: clk.Now}
	warns := &warnCounter{}
	s, err := Open(cfg, slog.New(warns))
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	putClaim(t, s, "a")
	_, err = s.Delete(types.KindMachineClaim, "a", types.Version{})
	require.NoError(t, err)
	require.Equal(t, []string{"a"}, tombstones(t, s))
	clk.Add(2 * time.Hour)
	require.Eventually(t, func() bool { return len(tombstones(t, s)) == 0 }, waitFor, 10*time.Millisecond)
	require.NoError(t, s.Close())
	// Value-log GC ran on every round and found nothing to rewrite, which is
	// not worth a warning.
	assert.Zero(t, warns.n.Load())
}

func TestCollectTombstoneList(t *testing.T) {
	s, _ := newMemStore(t)
	for _, n := range []string{"gone", "recreated", "live"} {
		putClaim(t, s, n)
	}
	var list []Tombstone
	for _, n := range []string{"gone", "recreated"} {
		rec, err := s.Delete(types.KindMachineClaim, n, types.Version{})
		require.NoError(t, err)
		list = append(list, Tombstone{Kind: rec.Kind, Name: rec.Name, Version: rec.Version})
	}
	live, err := s.Get(types.KindMachineClaim, "live")
	require.NoError(t, err)
	list = append(list, Tombstone{Kind: live.Kind, Name: live.Name, Version: live.Version})
	putClaim(t, s, "recreated") // after the list was made: kept

	n, err := s.CollectTombstoneList(list)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "only the tombstone still stored at its version")
	assert.Equal(t, uint64(1), s.Collected())
	assert.Empty(t, tombstones(t, s))
	_, err = s.Get(types.KindMachineClaim, "recreated")
	assert.NoError(t, err)
	_, err = s.Get(types.KindMachineClaim, "live")
	assert.NoError(t, err)
}

func TestMeta(t *testing.T) {
	s, _ := newMemStore(t)
	_, err := s.Meta("peers")
	assert.ErrorIs(t, err, ErrNotFound)
	require.NoError(t, s.PutMeta("peers", []byte(`["a"]`)))
	v, err := s.Meta("peers")
	require.NoError(t, err)
	assert.Equal(t, `["a"]`, string(v))
	var n int
	require.NoError(t, s.Scan(func(Record) error { n++; return nil }))
	assert.Zero(t, n, "meta is no record")
}

// A collection scans the store only when a stored tombstone can be old
// enough: not when none is stored (an idle node scanned and decoded every
// record every GCInterval), not for a cutoff before the earliest delete,
// and again once a delete, here or from a peer, can be due. A store opened
// on data knows its tombstones from Open's own scan.
func TestCollectTombstonesScansOnlyWhenDue(t *testing.T) {
	clk := newFakeClock()
	cfg := Config{Dir: t.TempDir(), NodeID: "n1", GCInterval: -1, Now: clk.Now}
	s, err := Open(cfg, quietLog())
	require.NoError(t, err)
	first := s
	t.Cleanup(func() { _ = first.Close() })
	for _, n := range []string{"a", "b", "c"} {
		putClaim(t, s, n)
	}
	collect := func(olderThan time.Time, want, scans int) {
		t.Helper()
		n, err := s.CollectTombstones(olderThan)
		require.NoError(t, err)
		assert.Equal(t, want, n, "collected")
		s.tombs.mu.Lock()
		assert.Equal(t, scans, s.tombs.scans, "scans")
		s.tombs.mu.Unlock()
	}
	collect(clk.Now(), 0, 0) // none stored, as Open found: no scan
	t0 := clk.Now()
	_, err = s.Delete(types.KindMachineClaim, "a", types.Version{})
	require.NoError(t, err)
	clk.Add(time.Hour)
	collect(t0, 0, 0)                  // deleted at t0, not before it: no scan
	collect(t0.Add(time.Minute), 1, 1) // due: scanned and collected
	collect(t0.Add(2*time.Hour), 0, 1) // none left
	assert.Empty(t, tombstones(t, s))

	// A tombstone from a peer, deleted there before anything here.
	peer, _ := newMemStore(t)
	putClaim(t, peer, "z")
	tomb, err := peer.Delete(types.KindMachineClaim, "z", types.Version{})
	require.NoError(t, err)
	_, err = s.Apply(tomb)
	require.NoError(t, err)
	collect(tomb.DeletedAt, 0, 1)                  // not before its own DeletedAt
	collect(tomb.DeletedAt.Add(time.Second), 1, 2) // due
	assert.Empty(t, tombstones(t, s))

	// Reopened on a store holding a tombstone: known without a scan, kept
	// while too young, collected once due.
	clk.Add(time.Hour)
	t1 := clk.Now()
	_, err = s.Delete(types.KindMachineClaim, "b", types.Version{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	s = openStore(t, cfg)
	collect(t1, 0, 0)                  // b is not due yet: no scan
	collect(t1.Add(time.Second), 1, 1) // now it is
	assert.Empty(t, tombstones(t, s))
}

// The watch's bookkeeping around a scan: a tombstone committed while a scan
// runs (its snapshot may not hold it) is still due later; a failed scan, or
// one that left some of what it found, makes the next collection scan.
func TestTombWatchAroundAScan(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	var w tombWatch
	w.opened(true, t0)
	require.True(t, w.begin(t0.Add(time.Minute)))
	w.noted(t0.Add(2 * time.Minute)) // during the scan
	w.end(true, false, time.Time{})  // the scan left nothing it saw
	assert.False(t, w.begin(t0.Add(2*time.Minute)), "nothing deleted before the noted one")
	require.True(t, w.begin(t0.Add(3*time.Minute)), "the one noted during the scan is due")
	w.end(true, true, t0.Add(5*time.Minute)) // it left one deleted at +5m
	assert.False(t, w.begin(t0.Add(5*time.Minute)))
	require.True(t, w.begin(t0.Add(6*time.Minute)))
	w.end(false, false, time.Time{}) // failed
	require.True(t, w.begin(t0.Add(-time.Hour)), "after a failed scan, any cutoff scans")
	w.end(true, false, time.Time{})
	assert.False(t, w.begin(t0.Add(time.Hour)), "and a clean one leaves nothing due")
	assert.Equal(t, 4, w.scans)
}
