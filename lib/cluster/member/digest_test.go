package member

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

func entry(name string, hlc uint64) Entry {
	return Entry{Key: Key{"MachineClaim", name}, Version: types.Version{HLC: hlc, Node: "n1"}}
}

func TestSnapshotHashes(t *testing.T) {
	a := newSnapshot([]Entry{entry("a", 1), entry("b", 2), entry("c", 3)})
	b := newSnapshot([]Entry{entry("c", 3), entry("a", 1), entry("b", 2)})
	assert.Equal(t, a.digest, b.digest, "order of input does not matter")
	assert.Equal(t, 3, a.digest.Records)

	c := newSnapshot([]Entry{entry("a", 1), entry("b", 2), entry("c", 4)})
	diff := a.digest.Diff(c.digest)
	assert.Equal(t, []int{bucketOf(Key{"MachineClaim", "c"})}, diff)

	empty := newSnapshot(nil)
	for _, h := range empty.digest.Hashes {
		require.Zero(t, h)
	}
	assert.Len(t, a.digest.Diff(empty.digest), 3-collisions(a))
}

// collisions counts entries sharing a bucket with an earlier one.
func collisions(s *snapshot) int {
	n := 0
	for _, es := range s.entries {
		if len(es) > 1 {
			n += len(es) - 1
		}
	}
	return n
}

func TestBucketsSpread(t *testing.T) {
	used := map[int]bool{}
	for i := range 10000 {
		used[bucketOf(Key{"MachineClaim", fmt.Sprintf("claim-%d", i)})] = true
	}
	assert.Greater(t, len(used), NumBuckets*95/100, "10k keys should touch nearly every bucket")
}

func TestReconcile(t *testing.T) {
	b := func(names ...string) []int {
		var out []int
		for _, n := range names {
			out = append(out, bucketOf(Key{"MachineClaim", n}))
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
	tests := []struct {
		name     string
		mine     []Entry
		buckets  []int
		theirs   []Entry
		inFlight uint64
		push     []Key
		pull     []Key
	}{
		{"same", []Entry{entry("a", 1)}, b("a"), []Entry{entry("a", 1)}, 0, nil, nil},
		{"peer lacks", []Entry{entry("a", 1)}, b("a"), nil, 0, keys("a"), nil},
		// Copies that differ go both ways: either may hold a newer facet.
		{"peer older", []Entry{entry("a", 2)}, b("a"), []Entry{entry("a", 1)}, 0, keys("a"), keys("a")},
		{"peer newer", []Entry{entry("a", 1)}, b("a"), []Entry{entry("a", 2)}, 0, keys("a"), keys("a")},
		{"same version, another older facet", []Entry{{Key: Key{"MachineClaim", "a"}, Version: types.Version{HLC: 1, Node: "n1"}, Sum: 7}}, b("a"),
			[]Entry{entry("a", 1)}, 0, keys("a"), keys("a")},
		{"we lack", nil, b("a"), []Entry{entry("a", 2)}, 0, nil, keys("a")},
		{"same hlc, other node", []Entry{{Key: Key{"MachineClaim", "a"}, Version: types.Version{HLC: 1, Node: "n2"}}}, b("a"),
			[]Entry{entry("a", 1)}, 0, keys("a"), keys("a")},
		{"outside the buckets ignored", []Entry{entry("a", 1), entry("zz", 1)}, b("a"), []Entry{entry("a", 1), entry("q", 5)}, 0, nil, nil},
		{"in flight left alone", []Entry{entry("a", 10), entry("b", 1)}, b("a", "b"), []Entry{entry("c", 10)}, 5, keys("b"), nil},
		{"settled newer pulled", []Entry{entry("a", 1)}, b("a"), []Entry{entry("a", 3)}, 5, keys("a"), keys("a")},
		{"unsettled newer left alone", []Entry{entry("a", 1)}, b("a"), []Entry{entry("a", 7)}, 5, keys("a"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			push, pull := reconcile(newSnapshot(tt.mine), tt.buckets, tt.theirs, tt.inFlight)
			assert.Equal(t, tt.push, push, "push")
			assert.Equal(t, tt.pull, pull, "pull")
		})
	}
}

func TestComputeDigest(t *testing.T) {
	a := openTestStore(t, "n1")
	b := openTestStore(t, "n2")
	da, err := ComputeDigest(a)
	require.NoError(t, err)
	db, err := ComputeDigest(b)
	require.NoError(t, err)
	assert.Equal(t, da, db, "empty stores")

	rec := putClaim(t, a, "c1")
	_, err = b.Apply(rec)
	require.NoError(t, err)
	da, _ = ComputeDigest(a)
	db, _ = ComputeDigest(b)
	assert.Equal(t, da, db)
	assert.Equal(t, 1, da.Records)

	del, err := a.Delete(rec.Kind, rec.Name, types.Version{})
	require.NoError(t, err)
	da, _ = ComputeDigest(a)
	assert.NotEqual(t, da, db, "a tombstone counts")
	_, err = b.Apply(del)
	require.NoError(t, err)
	db, _ = ComputeDigest(b)
	assert.Equal(t, da, db)

	snap, err := scanSnapshot(a)
	require.NoError(t, err)
	assert.Contains(t, snap.tombs, Key{rec.Kind, rec.Name})
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
	rec, err := st.Put(&types.MachineClaim{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
		Metadata: types.ObjectMeta{Name: name},
		Spec:     types.MachineClaimSpec{MachineTemplate: "t"},
	}, store.PutOptions{})
	require.NoError(t, err)
	return rec
}
