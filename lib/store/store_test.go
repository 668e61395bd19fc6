package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestOpenNeedsNodeAndDir(t *testing.T) {
	_, err := Open(Config{InMemory: true}, quietLog())
	assert.ErrorContains(t, err, "node id")
	_, err = Open(Config{NodeID: "n1"}, quietLog())
	assert.ErrorContains(t, err, "dir")
}

func TestPutGetStampsMetadata(t *testing.T) {
	s, clk := newMemStore(t)
	c := claim("c1")
	rec, err := s.Put(c, PutOptions{Create: true})
	require.NoError(t, err)

	assert.Equal(t, types.KindMachineClaim, rec.Kind)
	assert.Equal(t, "c1", rec.Name)
	assert.Equal(t, uint64(1), rec.Seq)
	assert.Equal(t, "n1", rec.Version.Node)
	assert.Equal(t, HLCFromTime(clk.Now()), rec.Version.HLC)
	assert.Equal(t, rec.Version, c.Metadata.Version, "caller's object is stamped")
	assert.True(t, c.Metadata.CreatedAt.Equal(clk.Now()))
	assert.True(t, c.Metadata.UpdatedAt.Equal(clk.Now()))

	assert.Nil(t, rec.Data, "a write returns the facets; the JSON is assembled when asked for")
	data, err := rec.JSON()
	require.NoError(t, err)
	got, err := s.Get(types.KindMachineClaim, "c1")
	require.NoError(t, err)
	assert.Equal(t, rec, got)
	assert.JSONEq(t, string(data), string(got.Data))
	var back types.MachineClaim
	require.NoError(t, json.Unmarshal(got.Data, &back))
	assert.Equal(t, rec.Version, back.Metadata.Version, "data carries the version")
	assert.Equal(t, "alice", back.Spec.User)
	assert.Equal(t, uint64(1), s.Seq())

	// An update keeps the stored CreatedAt when the caller leaves it zero.
	clk.Add(time.Minute)
	c2 := claim("c1")
	rec2, err := s.Put(c2, PutOptions{Update: true})
	require.NoError(t, err)
	assert.Equal(t, 1, rec2.Version.Compare(rec.Version))
	assert.True(t, c2.Metadata.CreatedAt.Equal(clk.Now().Add(-time.Minute)), "created at kept")
	assert.True(t, c2.Metadata.UpdatedAt.Equal(clk.Now()))
	// ...and keeps the caller's when set.
	c3 := claim("c1")
	c3.Metadata.CreatedAt = time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	_, err = s.Put(c3, PutOptions{})
	require.NoError(t, err)
	got3, err := Get[types.MachineClaim](s, types.KindMachineClaim, "c1")
	require.NoError(t, err)
	assert.True(t, got3.Metadata.CreatedAt.Equal(c3.Metadata.CreatedAt))
}

func TestPutPreconditions(t *testing.T) {
	other := func(live Record) types.Version { return types.Version{HLC: live.Version.HLC + 1, Node: "n2"} }
	cases := []struct {
		name    string
		obj     string
		opt     func(live Record) PutOptions
		wantErr error
	}{
		{"create new", "new", func(Record) PutOptions { return PutOptions{Create: true} }, nil},
		{"create over live", "live", func(Record) PutOptions { return PutOptions{Create: true} }, ErrExists},
		{"create over tombstone", "gone", func(Record) PutOptions { return PutOptions{Create: true} }, nil},
		{"update live", "live", func(Record) PutOptions { return PutOptions{Update: true} }, nil},
		{"update missing", "missing", func(Record) PutOptions { return PutOptions{Update: true} }, ErrNotFound},
		{"update tombstone", "gone", func(Record) PutOptions { return PutOptions{Update: true} }, ErrNotFound},
		{"if version matches", "live", func(l Record) PutOptions { return PutOptions{IfVersion: l.Version} }, nil},
		{"update if version matches", "live", func(l Record) PutOptions { return PutOptions{Update: true, IfVersion: l.Version} }, nil},
		{"if version differs", "live", func(l Record) PutOptions { return PutOptions{IfVersion: other(l)} }, ErrConflict},
		{"if version on missing", "missing", func(l Record) PutOptions { return PutOptions{IfVersion: other(l)} }, ErrConflict},
		{"if version on tombstone", "gone", func(l Record) PutOptions { return PutOptions{IfVersion: l.Version} }, ErrConflict},
		{"update with stale version", "live", func(l Record) PutOptions { return PutOptions{Update: true, IfVersion: other(l)} }, ErrConflict},
		{"upsert missing", "upsert", func(Record) PutOptions { return PutOptions{} }, nil},
		{"upsert live", "live", func(Record) PutOptions { return PutOptions{} }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newMemStore(t)
			live := putClaim(t, s, "live")
			putClaim(t, s, "gone")
			_, err := s.Delete(types.KindMachineClaim, "gone", types.Version{})
			require.NoError(t, err)

			c := claim(tc.obj)
			before := c.Metadata
			seq := s.Seq()
			rec, err := s.Put(c, tc.opt(live))
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
				assert.Contains(t, err.Error(), tc.obj)
				assert.Equal(t, before, c.Metadata, "metadata untouched on failure")
				assert.Equal(t, seq, s.Seq())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, seq+1, rec.Seq)
			got, err := s.Get(types.KindMachineClaim, tc.obj)
			require.NoError(t, err)
			assert.Equal(t, rec.Version, got.Version)
		})
	}
}

func TestPutRefusesEmptyKindOrName(t *testing.T) {
	s, _ := newMemStore(t)
	noKind := claim("x")
	noKind.Kind = ""
	_, err := s.Put(noKind, PutOptions{})
	assert.ErrorIs(t, err, types.ErrInvalid)
	assert.ErrorContains(t, err, "kind")
	_, err = s.Put(claim(""), PutOptions{})
	assert.ErrorIs(t, err, types.ErrInvalid)
	assert.ErrorContains(t, err, "name")
	_, err = s.Delete("", "x", types.Version{})
	assert.ErrorIs(t, err, types.ErrInvalid)
}

func TestDelete(t *testing.T) {
	s, clk := newMemStore(t)
	rec := putClaim(t, s, "c1")

	_, err := s.Delete(types.KindMachineClaim, "c1", types.Version{HLC: 1, Node: "x"})
	require.ErrorIs(t, err, ErrConflict)
	_, err = s.Delete(types.KindMachineClaim, "nope", types.Version{})
	require.ErrorIs(t, err, ErrNotFound)

	clk.Add(time.Second)
	tomb, err := s.Delete(types.KindMachineClaim, "c1", rec.Version)
	require.NoError(t, err)
	assert.True(t, tomb.Deleted)
	assert.Empty(t, tomb.Data)
	assert.True(t, tomb.DeletedAt.Equal(clk.Now()))
	assert.Equal(t, 1, tomb.Version.Compare(rec.Version))
	assert.Equal(t, rec.Seq+1, tomb.Seq)

	_, err = s.Get(types.KindMachineClaim, "c1")
	require.ErrorIs(t, err, ErrNotFound)
	list, err := s.List(types.KindMachineClaim)
	require.NoError(t, err)
	assert.Empty(t, list)
	_, err = s.Delete(types.KindMachineClaim, "c1", types.Version{})
	require.ErrorIs(t, err, ErrNotFound, "a tombstone is not live")

	// Re-create after the delete: new CreatedAt, newer version.
	clk.Add(time.Second)
	c := claim("c1")
	again, err := s.Put(c, PutOptions{Create: true})
	require.NoError(t, err)
	assert.Equal(t, 1, again.Version.Compare(tomb.Version))
	assert.True(t, c.Metadata.CreatedAt.Equal(clk.Now()))
	assert.False(t, again.Deleted)
}

func TestListSortedByNameAndKind(t *testing.T) {
	s, _ := newMemStore(t)
	for _, n := range []string{"b", "c", "a"} {
		putClaim(t, s, n)
	}
	// A kind whose name extends another's must not leak into its list.
	ms := &types.MachineSet{TypeMeta: types.TypeMeta{Kind: types.KindMachineSet}, Metadata: types.ObjectMeta{Name: "a"}}
	_, err := s.Put(ms, PutOptions{})
	require.NoError(t, err)
	m := &types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: "z"}}
	_, err = s.Put(m, PutOptions{})
	require.NoError(t, err)
	_, err = s.Delete(types.KindMachineClaim, "c", types.Version{})
	require.NoError(t, err)

	list, err := s.List(types.KindMachineClaim)
	require.NoError(t, err)
	require.Len(t, list, 2)
	assert.Equal(t, "a", list[0].Name)
	assert.Equal(t, "b", list[1].Name)
	machines, err := s.List(types.KindMachine)
	require.NoError(t, err)
	require.Len(t, machines, 1)
	assert.Equal(t, "z", machines[0].Name)
	none, err := s.List(types.KindNode)
	require.NoError(t, err)
	assert.Empty(t, none)
}

// TestEachAfter: a scan starts past the name it is given (a name that
// extends it still comes), skips tombstones, stays within its kind and
// ends early, without an error, when the callback says ErrStop.
func TestEachAfter(t *testing.T) {
	s, _ := newMemStore(t)
	for _, n := range []string{"a", "b1", "b", "b10", "c", "d"} {
		putClaim(t, s, n)
	}
	_, err := s.Delete(types.KindMachineClaim, "c", types.Version{})
	require.NoError(t, err)
	m := &types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: "b2"}}
	_, err = s.Put(m, PutOptions{})
	require.NoError(t, err)
	names := func(after string, stopAt int) []string {
		var out []string
		require.NoError(t, s.EachAfter(types.KindMachineClaim, after, func(r Record) error {
			if len(out) == stopAt {
				return ErrStop
			}
			out = append(out, r.Name)
			return nil
		}))
		return out
	}
	assert.Equal(t, []string{"a", "b", "b1", "b10", "d"}, names("", -1))
	assert.Equal(t, []string{"b1", "b10", "d"}, names("b", -1))
	assert.Equal(t, []string{"b10", "d"}, names("b1", -1))
	assert.Equal(t, []string{"d"}, names("c", -1), "past a tombstone's name")
	assert.Equal(t, []string{"d"}, names("b2", -1), "past a name of another kind")
	assert.Empty(t, names("d", -1))
	assert.Equal(t, []string{"b1", "b10"}, names("b", 2))
	boom := errors.New("boom")
	assert.ErrorIs(t, s.EachAfter(types.KindMachineClaim, "", func(Record) error { return boom }), boom)
}

func TestScanIncludesTombstones(t *testing.T) {
	s, _ := newMemStore(t)
	putClaim(t, s, "a")
	putClaim(t, s, "b")
	_, err := s.Delete(types.KindMachineClaim, "a", types.Version{})
	require.NoError(t, err)
	m := &types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: "m"}}
	_, err = s.Put(m, PutOptions{})
	require.NoError(t, err)

	var got []string
	require.NoError(t, s.Scan(func(r Record) error {
		got = append(got, fmt.Sprintf("%s/%s deleted=%v", r.Kind, r.Name, r.Deleted))
		return nil
	}))
	assert.Equal(t, []string{"Machine/m deleted=false", "MachineClaim/a deleted=true", "MachineClaim/b deleted=false"}, got)

	stop := errors.New("stop")
	n := 0
	err = s.Scan(func(Record) error { n++; return stop })
	assert.ErrorIs(t, err, stop)
	assert.Equal(t, 1, n)
}

func TestApply(t *testing.T) {
	mk := func(name string, hlc uint64, node string, deleted bool) Record {
		r := Record{Kind: types.KindMachineClaim, Name: name, Version: types.Version{HLC: hlc, Node: node}, Deleted: deleted}
		if !deleted {
			c := claim(name)
			c.Metadata.Version = r.Version
			r.Data, _ = json.Marshal(c)
		}
		return r
	}
	const base = 1 << 40
	cases := []struct {
		name        string
		stored      []Record // applied first
		rec         Record
		wantApplied bool
		wantLive    bool
	}{
		{"new object", nil, mk("x", base, "n2", false), true, true},
		{"new tombstone", nil, mk("x", base, "n2", true), true, false},
		{"newer object", []Record{mk("x", base, "n2", false)}, mk("x", base+1, "n2", false), true, true},
		{"older object", []Record{mk("x", base, "n2", false)}, mk("x", base-1, "n2", false), false, true},
		{"equal version", []Record{mk("x", base, "n2", false)}, mk("x", base, "n2", false), false, true},
		{"same hlc higher node wins", []Record{mk("x", base, "n2", false)}, mk("x", base, "n3", false), true, true},
		{"same hlc lower node loses", []Record{mk("x", base, "n2", false)}, mk("x", base, "n1", false), false, true},
		{"newer tombstone deletes", []Record{mk("x", base, "n2", false)}, mk("x", base+1, "n2", true), true, false},
		// Merges are deterministic: every copy keeps the newest deletion,
		// even one that removes nothing (the object was made again since).
		{"older tombstone kept, removes nothing", []Record{mk("x", base, "n2", false)}, mk("x", base-1, "n2", true), true, true},
		{"older object vs tombstone", []Record{mk("x", base, "n2", true)}, mk("x", base-1, "n2", false), false, false},
		{"newer object resurrects", []Record{mk("x", base, "n2", true)}, mk("x", base+1, "n2", false), true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newMemStore(t)
			for _, r := range tc.stored {
				ok, err := s.Apply(r)
				require.NoError(t, err)
				require.True(t, ok)
			}
			seq := s.Seq()
			ok, err := s.Apply(tc.rec)
			require.NoError(t, err)
			assert.Equal(t, tc.wantApplied, ok)
			if tc.wantApplied {
				assert.Equal(t, seq+1, s.Seq(), "fresh local seq")
				assert.GreaterOrEqual(t, s.clock.Last(), tc.rec.Version.HLC, "clock moved past remote")
			} else {
				assert.Equal(t, seq, s.Seq())
			}
			got, err := s.Get(types.KindMachineClaim, "x")
			if !tc.wantLive {
				assert.ErrorIs(t, err, ErrNotFound)
				return
			}
			require.NoError(t, err)
			if tc.wantApplied && !tc.rec.Deleted {
				assert.Equal(t, tc.rec.Version, got.Version)
			}
		})
	}
}

func TestApplyAdvancesClock(t *testing.T) {
	s, clk := newMemStore(t)
	future := HLCFromTime(clk.Now().Add(time.Hour)) + 7
	ok, err := s.Apply(Record{Kind: types.KindMachineClaim, Name: "x", Version: types.Version{HLC: future, Node: "n2"}, Deleted: true})
	require.NoError(t, err)
	require.True(t, ok)
	rec := putClaim(t, s, "y")
	assert.Greater(t, rec.Version.HLC, future)

	// A replicated tombstone without DeletedAt gets the local time.
	tomb := Record{}
	require.NoError(t, s.Scan(func(r Record) error {
		if r.Name == "x" {
			tomb = r
		}
		return nil
	}))
	assert.True(t, tomb.DeletedAt.Equal(clk.Now()))
}

func TestApplyRejectsBadRecords(t *testing.T) {
	s, _ := newMemStore(t)
	_, err := s.Apply(Record{Kind: types.KindMachineClaim, Name: "x"})
	assert.ErrorContains(t, err, "version")
	_, err = s.Apply(Record{Kind: types.KindMachineClaim, Name: "x", Version: types.Version{HLC: 1, Node: "n"}})
	assert.ErrorContains(t, err, "data")
	_, err = s.Apply(Record{Name: "x", Version: types.Version{HLC: 1, Node: "n"}, Deleted: true})
	assert.ErrorIs(t, err, types.ErrInvalid)
}

func TestClockIssuesFreshVersions(t *testing.T) {
	s, _ := newMemStore(t)
	a := s.Clock()
	b := s.Clock()
	assert.Equal(t, "n1", a.Node)
	assert.Equal(t, 1, b.Compare(a))
	rec := putClaim(t, s, "c")
	assert.Equal(t, 1, rec.Version.Compare(b))
}

func TestPersistenceAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	clk := newFakeClock()
	cfg := Config{Dir: dir, NodeID: "n1", GCInterval: -1, Now: clk.Now}
	s, err := Open(cfg, quietLog())
	require.NoError(t, err)
	a := putClaim(t, s, "a")
	_, err = a.JSON() // (Get returns it with the JSON)
	require.NoError(t, err)
	putClaim(t, s, "b")
	tomb, err := s.Delete(types.KindMachineClaim, "b", types.Version{})
	require.NoError(t, err)
	issued := s.Clock()
	require.NoError(t, s.Close())
	require.NoError(t, s.Close(), "close is idempotent")
	_, err = s.Get(types.KindMachineClaim, "a")
	require.ErrorIs(t, err, ErrClosed)
	_, err = s.Put(claim("z"), PutOptions{})
	require.ErrorIs(t, err, ErrClosed)

	// The wall clock went back an hour while the node was down.
	clk.Add(-time.Hour)
	s2 := openStore(t, cfg)
	got, err := s2.Get(types.KindMachineClaim, "a")
	require.NoError(t, err)
	assert.Equal(t, a, got)
	_, err = s2.Get(types.KindMachineClaim, "b")
	assert.ErrorIs(t, err, ErrNotFound)
	var tombs int
	require.NoError(t, s2.Scan(func(r Record) error {
		if r.Deleted {
			tombs++
			assert.Equal(t, tomb.Version, r.Version)
			assert.True(t, r.DeletedAt.Equal(tomb.DeletedAt))
		}
		return nil
	}))
	assert.Equal(t, 1, tombs)
	assert.Equal(t, tomb.Seq, s2.Seq(), "seq survives")

	c, err := s2.Put(claim("c"), PutOptions{Create: true})
	require.NoError(t, err)
	assert.Equal(t, tomb.Seq+1, c.Seq)
	assert.Equal(t, 1, c.Version.Compare(issued), "no version older than one issued before the restart")
}

func TestErrLockedWhenDirInUse(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	cfg := Config{Dir: dir, NodeID: "n1", GCInterval: -1}
	openStore(t, cfg)
	_, err := Open(cfg, quietLog())
	require.ErrorIs(t, err, ErrLocked)
	assert.Contains(t, err.Error(), dir)
}

func TestClosedStore(t *testing.T) {
	s, _ := newMemStore(t)
	require.NoError(t, s.Close())
	_, err := s.List(types.KindMachineClaim)
	assert.ErrorIs(t, err, ErrClosed)
	_, err = s.Delete(types.KindMachineClaim, "x", types.Version{})
	assert.ErrorIs(t, err, ErrClosed)
	_, err = s.Apply(Record{Kind: "K", Name: "x", Version: types.Version{HLC: 1, Node: "n"}, Deleted: true})
	assert.ErrorIs(t, err, ErrClosed)
	assert.ErrorIs(t, s.Scan(func(Record) error { return nil }), ErrClosed)
	_, err = s.CollectTombstones(time.Now())
	assert.ErrorIs(t, err, ErrClosed)
	_, open := <-s.Watch(t.Context(), 0)
	assert.False(t, open, "watch on a closed store is a closed channel")
}

// TestCloseWhileBusy closes the store under writers, readers and new watchers:
// every call either works or fails with ErrClosed, and nothing hangs.
func TestCloseWhileBusy(t *testing.T) {
	s, _ := newMemStore(t)
	for i := range 20 {
		putClaim(t, s, fmt.Sprintf("c%d", i))
	}
	okOrClosed := func(err error) {
		if err != nil && !errors.Is(err, ErrClosed) {
			assert.NoError(t, err)
		}
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				var err error
				switch i % 4 {
				case 0:
					_, err = s.Put(claim(fmt.Sprintf("c%d", i%20)), PutOptions{})
				case 1:
					_, err = s.Get(types.KindMachineClaim, fmt.Sprintf("c%d", i%20))
					if errors.Is(err, ErrNotFound) {
						err = nil
					}
				case 2:
					_, err = s.List(types.KindMachineClaim)
				case 3:
					ctx, cancel := context.WithCancel(t.Context())
					ch := s.Watch(ctx, uint64(w))
					<-ch // an event, or closed by Close
					cancel()
					for range ch { // until the watcher closes it
					}
				}
				okOrClosed(err)
				if errors.Is(err, ErrClosed) {
					return
				}
			}
		})
	}
	require.Eventually(t, func() bool { return s.Seq() > 100 }, waitFor, time.Millisecond)
	require.NoError(t, s.Close())
	wg.Wait()
}

func TestWatchWithDoneContext(t *testing.T) {
	s, _ := newMemStore(t)
	putClaim(t, s, "a")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	waitClosed(t, s.Watch(ctx, 0))
}

func TestInMemoryTakesLargeObjects(t *testing.T) {
	st, err := Open(Config{InMemory: true, NodeID: "n1"}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	tmpl := &types.MachineTemplate{TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate}, Metadata: types.ObjectMeta{Name: "big",
		Annotations: map[string]string{"blob": strings.Repeat("x", 900_000)}}}
	_, err = st.Put(tmpl, PutOptions{Create: true})
	require.NoError(t, err)
	got, err := Get[types.MachineTemplate](st, types.KindMachineTemplate, "big")
	require.NoError(t, err)
	assert.Len(t, got.Metadata.Annotations["blob"], 900_000)
}

// Writes counts each kind's committed records: puts, deletions and records
// applied from other nodes, not writes that changed nothing.
func TestWritesPerKind(t *testing.T) {
	s, _ := newMemStore(t)
	assert.Zero(t, s.Writes(types.KindMachineClaim))
	_, err := s.Put(claim("c1"), PutOptions{})
	require.NoError(t, err)
	rec, err := s.Delete(types.KindMachineClaim, "c1", types.Version{})
	require.NoError(t, err)
	assert.Equal(t, uint64(2), s.Writes(types.KindMachineClaim))
	changed, err := s.Apply(rec)
	require.NoError(t, err)
	require.False(t, changed)
	assert.Equal(t, uint64(2), s.Writes(types.KindMachineClaim), "a stale apply is no write")
	v := types.Version{HLC: rec.Version.HLC + 1, Node: "other"}
	_, err = s.Apply(Record{Kind: types.KindMachineClaim, Name: "c2", Version: v, Tomb: v})
	require.NoError(t, err)
	assert.Equal(t, uint64(3), s.Writes(types.KindMachineClaim))
	assert.Zero(t, s.Writes(types.KindToken))
	assert.Zero(t, s.Writes("NoSuchKind"))
}

// Deleted tells a deleted record (its tombstone is here) from one never
// seen, which Get answers alike.
func TestDeletedTellsTombstoneFromUnseen(t *testing.T) {
	s, _ := newMemStore(t)
	putClaim(t, s, "c1")
	gone, err := s.Deleted(types.KindMachineClaim, "c1")
	require.NoError(t, err)
	assert.False(t, gone, "live")
	_, err = s.Delete(types.KindMachineClaim, "c1", types.Version{})
	require.NoError(t, err)
	gone, err = s.Deleted(types.KindMachineClaim, "c1")
	require.NoError(t, err)
	assert.True(t, gone, "its tombstone")
	gone, err = s.Deleted(types.KindMachineClaim, "never")
	require.NoError(t, err)
	assert.False(t, gone, "never seen")
}
