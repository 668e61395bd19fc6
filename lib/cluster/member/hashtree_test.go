package member

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/internal/intern"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// rec is a record of claim name at hlc, with one facet so that its
// fingerprint depends on the version.
func rec(name string, hlc, seq uint64) store.Record {
	v := types.Version{HLC: hlc, Node: "n1"}
	return store.Record{Kind: types.KindMachineClaim, Name: name, Version: v, Seq: seq,
		Facets: []store.FacetRecord{{Name: "spec", Version: v}}}
}

func treeOf(recs ...store.Record) *hashTree {
	t := newHashTree()
	for i := range recs {
		t.apply(&recs[i])
	}
	return t
}

// levels returns every hash of every level of t.
func levels(t *hashTree) [][]uint64 {
	out := [][]uint64{t.children(1, []int{0})}
	parents := []int{0}
	for l := 1; l <= treeDepth; l++ {
		all := make([]int, levelWidth(l-1))
		for i := range all {
			all[i] = i
		}
		parents = all
		out = append(out, t.children(l, parents))
	}
	return out
}

func TestHashTreeOrderAndIncrements(t *testing.T) {
	var final []store.Record
	for i := range 500 {
		final = append(final, rec(fmt.Sprintf("c%d", i), uint64(100+i), 0))
	}
	shuffled := append([]store.Record(nil), final...)
	rand.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	a, b := treeOf(final...), treeOf(shuffled...)
	assert.Equal(t, levels(a), levels(b), "order of input does not matter")

	// The same final state reached through older versions first.
	inc := newHashTree()
	seq := uint64(0)
	for i, r := range final {
		seq++
		old := rec(r.Name, 1, seq)
		inc.apply(&old)
		if i%3 == 0 {
			seq++
			tomb := old
			tomb.Seq, tomb.Deleted, tomb.Version = seq, true, types.Version{HLC: 2, Node: "n1"}
			inc.apply(&tomb)
		}
	}
	for _, r := range final {
		seq++
		r.Seq = seq
		inc.apply(&r)
	}
	ra, na := a.root()
	ri, ni := inc.root()
	assert.Equal(t, ra, ri, "updates move the tree to where a fresh build is")
	assert.Equal(t, na, ni)
	assert.Equal(t, 500, ni)
	assert.Equal(t, levels(a), levels(inc))
	assert.Empty(t, inc.tombs, "a record replacing a tombstone clears it")

	older := rec("c1", 1, 1)
	inc.apply(&older)
	r2, _ := inc.root()
	assert.Equal(t, ri, r2, "an event with an older Seq does not replace a later one")
}

func TestHashTreeEmptyNeverZero(t *testing.T) {
	empty := newHashTree()
	h, n := empty.root()
	assert.Zero(t, h)
	assert.Zero(t, n)
	for _, hs := range levels(empty) {
		for _, x := range hs {
			require.Zero(t, x)
		}
	}
	one := treeOf(rec("a", 1, 1))
	h, n = one.root()
	assert.NotZero(t, h)
	assert.Equal(t, 1, n)
}

// descend runs a round's descent between two trees and returns the
// differing leaves, the subtrees where b holds nothing, and where a does.
func descend(a, b *hashTree) (leaves []int, bEmpty, aEmpty []subtree) {
	parents := []int{0}
	for l := 1; l <= treeDepth && len(parents) > 0; l++ {
		d := b.compare(l, parents, a.children(l, parents))
		for _, i := range d.Empty {
			bEmpty = append(bEmpty, subtree{l, i})
		}
		for _, i := range d.Missing {
			aEmpty = append(aEmpty, subtree{l, i})
		}
		parents = d.Differ
	}
	return parents, bEmpty, aEmpty
}

func TestHashTreeDescent(t *testing.T) {
	var common []store.Record
	for i := range 2000 {
		common = append(common, rec(fmt.Sprintf("c%d", i), uint64(10+i), 0))
	}
	a, b := treeOf(common...), treeOf(common...)
	leaves, be, ae := descend(a, b)
	assert.Empty(t, leaves, "in sync")
	assert.Empty(t, be)
	assert.Empty(t, ae)

	extra := rec("the-difference", 5, 0)
	a.apply(&extra)
	leaves, be, ae = descend(a, b)
	assert.Equal(t, []int{leafOf(Key{extra.Kind, extra.Name})}, leaves, "the descent ends at the one leaf that differs")
	assert.Empty(t, be)
	assert.Empty(t, ae)

	fresh := newHashTree()
	leaves, be, _ = descend(a, fresh)
	assert.Empty(t, leaves)
	assert.Len(t, be, treeFanout, "an empty peer is empty under every top-level node")
	_, _, ae = descend(fresh, a)
	assert.Len(t, ae, treeFanout)
	keys := 0
	for _, s := range be {
		keys += len(a.under(s.level, s.index, 0))
	}
	assert.Equal(t, 2001, keys, "under lists every record once")
}

func TestLeavesSpread(t *testing.T) {
	used := map[int]bool{}
	for i := range 40000 {
		used[leafOf(Key{"MachineClaim", fmt.Sprintf("claim-%d", i)})] = true
	}
	assert.Greater(t, len(used), NumLeaves*99/100, "40k keys should touch nearly every leaf")
}

func TestReconcile(t *testing.T) {
	mineOf := func(es ...store.Record) []entry { return treeOf(es...).entries(leavesOf(es...)) }
	theirsOf := func(settledBelow uint64, es ...store.Record) []leafEntry {
		var out []leafEntry
		for _, e := range treeOf(es...).entries(leavesOf(es...)) {
			out = append(out, leafEntry{Key: e.Key, Hash: e.hash, Settled: settled(e.Version, settledBelow)})
		}
		return out
	}
	keys := func(names ...string) []Key {
		var out []Key
		for _, n := range names {
			out = append(out, Key{"MachineClaim", n})
		}
		return out
	}
	facet := rec("a", 1, 0)
	facet.Facets = append(facet.Facets, store.FacetRecord{Name: "status", Version: types.Version{HLC: 0, Node: "n2"}})
	otherNode := rec("a", 1, 0)
	otherNode.Version.Node = "n2"
	tests := []struct {
		name     string
		mine     []store.Record
		leaves   []int
		theirs   []leafEntry
		inFlight uint64
		push     []Key
		pull     []Key
	}{
		{"same", []store.Record{rec("a", 1, 0)}, leavesOf(rec("a", 1, 0)), theirsOf(0, rec("a", 1, 0)), 0, nil, nil},
		{"peer lacks", []store.Record{rec("a", 1, 0)}, leavesOf(rec("a", 1, 0)), nil, 0, keys("a"), nil},
		// Copies that differ go both ways: either may hold a newer facet.
		{"peer older", []store.Record{rec("a", 2, 0)}, leavesOf(rec("a", 1, 0)), theirsOf(0, rec("a", 1, 0)), 0, keys("a"), keys("a")},
		{"same version, another older facet", []store.Record{facet}, leavesOf(facet), theirsOf(0, rec("a", 1, 0)), 0, keys("a"), keys("a")},
		{"same hlc, other node", []store.Record{otherNode}, leavesOf(otherNode), theirsOf(0, rec("a", 1, 0)), 0, keys("a"), keys("a")},
		{"we lack", nil, leavesOf(rec("a", 1, 0)), theirsOf(0, rec("a", 2, 0)), 0, nil, keys("a")},
		{"outside the leaves ignored", []store.Record{rec("a", 1, 0)}, leavesOf(rec("a", 1, 0)), theirsOf(0, rec("a", 1, 0), rec("q", 5, 0)), 0, nil, nil},
		{"in flight left alone", []store.Record{rec("a", 10, 0), rec("b", 1, 0)}, leavesOf(rec("a", 1, 0), rec("b", 1, 0), rec("c", 1, 0)),
			theirsOf(5, rec("c", 10, 0)), 5, keys("b"), nil},
		{"settled newer pulled", []store.Record{rec("a", 1, 0)}, leavesOf(rec("a", 1, 0)), theirsOf(5, rec("a", 3, 0)), 5, keys("a"), keys("a")},
		{"unsettled newer left alone", []store.Record{rec("a", 1, 0)}, leavesOf(rec("a", 1, 0)), theirsOf(5, rec("a", 7, 0)), 5, keys("a"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			push, pull := reconcile(mineOf(tt.mine...), tt.leaves, tt.theirs, tt.inFlight)
			assert.Equal(t, tt.push, push, "push")
			assert.Equal(t, tt.pull, pull, "pull")
		})
	}
}

// leavesOf is the leaves of records, without repeats.
func leavesOf(recs ...store.Record) []int {
	var out []int
	seen := map[int]bool{}
	for _, r := range recs {
		if b := leafOf(Key{r.Kind, r.Name}); !seen[b] {
			seen[b] = true
			out = append(out, b)
		}
	}
	return out
}

func TestComputeDigest(t *testing.T) {
	a := openTestStore(t, "n1")
	b := openTestStore(t, "n2")
	da, err := ComputeDigest(a)
	require.NoError(t, err)
	db, err := ComputeDigest(b)
	require.NoError(t, err)
	assert.Equal(t, da, db, "empty stores")

	r := putClaim(t, a, "c1")
	_, err = b.Apply(r)
	require.NoError(t, err)
	da, _ = ComputeDigest(a)
	db, _ = ComputeDigest(b)
	assert.Equal(t, da, db)
	assert.Equal(t, 1, da.Records)

	del, err := a.Delete(r.Kind, r.Name, types.Version{})
	require.NoError(t, err)
	da, _ = ComputeDigest(a)
	assert.NotEqual(t, da, db, "a tombstone counts")
	_, err = b.Apply(del)
	require.NoError(t, err)
	db, _ = ComputeDigest(b)
	assert.Equal(t, da, db)

	tree, err := scanTree(a)
	require.NoError(t, err)
	assert.Contains(t, tree.tombs, Key{r.Kind, r.Name})
}

// TestKeeperFollowsStore: the kept tree stays equal to one built from
// scratch through writes, deletes, a watch that falls behind and a
// tombstone collection.
func TestKeeperFollowsStore(t *testing.T) {
	clock := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := func() time.Time { return clock }
	st, err := store.Open(store.Config{InMemory: true, NodeID: "n1", GCInterval: -1, WatchBuffer: 8, Now: now}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	for i := range 100 {
		putClaim(t, st, fmt.Sprintf("before-%d", i))
	}
	k := newKeeper(st, slog.New(slog.DiscardHandler), 10*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); k.run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	// same builds the digest from scratch, a scan of the whole store: checked
	// every millisecond, it took the CPU the keeper needed to catch up, and
	// under CI's load the burst's catch-up missed 10 s once.
	same := func() bool {
		want, err := ComputeDigest(st)
		require.NoError(t, err)
		root, n := k.current(ctx).root()
		return root == want.Root && n == want.Records
	}
	require.Eventually(t, same, 30*time.Second, 20*time.Millisecond, "the first build")

	// A burst far beyond the watch buffer: the keeper falls behind and resumes.
	for i := range 2000 {
		putClaim(t, st, fmt.Sprintf("burst-%d", i))
	}
	_, err = st.Delete(types.KindMachineClaim, "before-1", types.Version{})
	require.NoError(t, err)
	require.Eventually(t, same, 30*time.Second, 20*time.Millisecond, "after the burst")
	ok := k.current(ctx).hasTomb(Key{types.KindMachineClaim, "before-1"})
	assert.True(t, ok, "the tree holds the tombstone")

	clock = clock.Add(48 * time.Hour)
	n, err := st.CollectTombstones(clock.Add(-time.Hour))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Eventually(t, same, 30*time.Second, 20*time.Millisecond, "after the collection")
	ok = k.current(ctx).hasTomb(Key{types.KindMachineClaim, "before-1"})
	assert.False(t, ok, "the rebuilt tree has no collected tombstone")
}

func openTestStore(t testing.TB, id string) *store.Store {
	t.Helper()
	st, err := store.Open(store.Config{InMemory: true, NodeID: id, GCInterval: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func putClaim(t testing.TB, st *store.Store, name string) store.Record {
	t.Helper()
	r, err := st.Put(&types.MachineClaim{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
		Metadata: types.ObjectMeta{Name: name},
		Spec:     types.MachineClaimSpec{MachineTemplate: "t"},
	}, store.PutOptions{})
	require.NoError(t, err)
	return r
}

// trim gives back a tree's spare room and leaves its records and hashes as
// they were; the tree goes on taking records after.
func TestHashTreeTrim(t *testing.T) {
	var recs []store.Record
	for i := range 30_000 {
		recs = append(recs, rec(fmt.Sprintf("c%05d", i), uint64(100+i), 0))
	}
	tr := treeOf(recs...)
	room := func() (n, c int) {
		for _, es := range tr.leaves {
			n, c = n+len(es), c+cap(es)
		}
		return n, c
	}
	before, beforeCap := room()
	wantLevels, wantRoot := levels(tr), func() uint64 { r, _ := tr.root(); return r }()
	all := make([]int, NumLeaves)
	for i := range all {
		all[i] = i
	}
	wantEntries := tr.entries(all)
	tr.trim(intern.New())
	after, afterCap := room()
	assert.Equal(t, before, after)
	assert.Less(t, afterCap, beforeCap-before/4, "spare room given back (%d of %d slots before, %d after)", beforeCap-before, beforeCap, afterCap-after)
	assert.Equal(t, wantLevels, levels(tr))
	assert.Equal(t, wantEntries, tr.entries(all))
	copied := 0
	for _, es := range tr.leaves {
		for _, e := range es {
			if e.Name == recs[0].Name {
				assert.True(t, unsafe.StringData(e.Name) != unsafe.StringData(recs[0].Name), "the names are copied out of the burst's heap")
				copied++
			}
		}
	}
	assert.Equal(t, 1, copied, "the first record's entry was looked at")
	root, _ := tr.root()
	assert.Equal(t, wantRoot, root)

	more := rec("c99999", 1, 0)
	tr.apply(&more)
	assert.Equal(t, levels(treeOf(append(recs, more)...)), levels(tr), "records after a trim")
}

// The tree keeps little of a tombstone: its entry and what a collection
// picks it by, not the record (anti-entropy reads that from the store). A
// copy of each record made a burst's deleted claims the biggest thing a
// node held for the ten minutes tombstones are kept, and slowed the bursts
// after it (the collector scanned it over and over).
func TestHashTreeTombstonesAreSmall(t *testing.T) {
	const n = 50_000
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	tr := newHashTree()
	before := heap()
	for i := range n {
		// A tombstone as the store hands it: the facets that outlived the
		// deletion with their data (a late status write), and its time.
		r := rec(fmt.Sprintf("bench-0123abcd-%05d", i), 10, uint64(i+1))
		r.Deleted, r.Tomb, r.DeletedAt = true, types.Version{HLC: 9, Node: "n1"}, time.Unix(1_700_000_000, 0)
		r.Facets[0].Data = []byte(`{"phase":"Terminating","node":"n2","machine":"m-0123456789abcdef"}`)
		tr.apply(&r)
	}
	per := float64(heap()-before) / n
	runtime.KeepAlive(tr)
	t.Logf("%.0f bytes of heap per tombstone", per)
	// ~275 bytes; a whole record each took ~550. The bound leaves 6 MB of
	// room for what other goroutines of the package keep meanwhile.
	assert.Less(t, per, 400.0, "bytes per tombstone (entry, name, collection key)")
	assert.Len(t, tr.tombs, n)
	got := collectible(tr, func() *[NumLeaves]uint64 {
		var f [NumLeaves]uint64
		for i := range f {
			f[i] = n
		}
		return &f
	}(), time.Unix(1_700_000_001, 0))
	assert.Len(t, got, n, "each one collectible once every peer holds it")
	assert.Empty(t, collectible(tr, &[NumLeaves]uint64{}, time.Unix(1_700_000_001, 0)), "none before the peers do")
	assert.Empty(t, collectible(tr, func() *[NumLeaves]uint64 {
		var f [NumLeaves]uint64
		for i := range f {
			f[i] = n
		}
		return &f
	}(), time.Unix(1_700_000_000, 0)), "none deleted at or after the time asked")

	// A tombstone without a time counts as deleted before any; facets
	// without their object (no tombstone) are never collected.
	small := newHashTree()
	untimed := rec("untimed", 10, 1)
	untimed.Deleted, untimed.Tomb = true, types.Version{HLC: 9, Node: "n1"}
	orphan := rec("orphan", 10, 2)
	orphan.Deleted, orphan.DeletedAt = true, time.Unix(1, 0)
	small.apply(&untimed)
	small.apply(&orphan)
	var floor [NumLeaves]uint64
	floor[leafOf(Key{untimed.Kind, "untimed"})], floor[leafOf(Key{orphan.Kind, "orphan"})] = 9, 9
	got = collectible(small, &floor, time.Unix(2, 0))
	require.Len(t, got, 1)
	assert.Equal(t, "untimed", got[0].Name)
}
