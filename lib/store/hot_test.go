package store

import (
	"fmt"
	"testing"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestHotRecordsBounded(t *testing.T) {
	var h hotRecords
	for i := range 5 * hotSize {
		h.put(Record{Kind: types.KindMachineClaim, Name: fmt.Sprint(i)})
	}
	assert.LessOrEqual(t, len(h.cur)+len(h.old), 2*hotSize)
	for i := 4 * hotSize; i < 5*hotSize; i++ {
		_, ok := h.get(types.KindMachineClaim, fmt.Sprint(i))
		require.True(t, ok, "record %d, among the last written, is hot", i)
	}
	_, ok := h.get(types.KindMachineClaim, "0")
	assert.False(t, ok, "the oldest generation is gone")

	// Writing a key again keeps one copy, the newest.
	h.put(Record{Kind: types.KindMachineClaim, Name: "x", Seq: 1})
	for i := range hotSize {
		h.put(Record{Kind: types.KindMachineClaim, Name: fmt.Sprint("y", i)})
	}
	h.put(Record{Kind: types.KindMachineClaim, Name: "x", Seq: 2})
	r, ok := h.get(types.KindMachineClaim, "x")
	require.True(t, ok)
	assert.Equal(t, uint64(2), r.Seq)
	_, inOld := h.old[hotKey(types.KindMachineClaim, "x")]
	assert.False(t, inOld)

	h.drop(types.KindMachineClaim, "x")
	_, ok = h.get(types.KindMachineClaim, "x")
	assert.False(t, ok)
}

// TestHotRecordIsBadgers: after every kind of write the hot record is the
// one badger holds, so reading either is the same; a collected tombstone
// leaves the hot set with it.
func TestHotRecordIsBadgers(t *testing.T) {
	s, clk := newMemStore(t)
	same := func(name string) {
		t.Helper()
		hot, ok := s.hot.get(types.KindMachineClaim, name)
		require.True(t, ok, "%s is hot after its write", name)
		require.NoError(t, s.db.View(func(txn *badger.Txn) error {
			disk, found, err := getRecord(txn, types.KindMachineClaim, name)
			require.NoError(t, err)
			require.True(t, found)
			assert.Equal(t, disk, hot)
			return nil
		}))
	}
	putClaim(t, s, "a")
	same("a")
	_, err := Update(s, types.KindMachineClaim, "a", func(c *types.MachineClaim) error {
		c.Metadata.Labels["team"] = "b"
		return nil
	})
	require.NoError(t, err)
	same("a")
	c, err := Get[types.MachineClaim](s, types.KindMachineClaim, "a")
	require.NoError(t, err)
	assert.Equal(t, "b", c.Metadata.Labels["team"], "a read sees the update")

	// A record from another node.
	remote := claim("r")
	remote.Metadata.Version = types.Version{HLC: s.clock.Now() + 1000, Node: "n2"}
	fs, err := splitFacets(remote)
	require.NoError(t, err)
	for i := range fs {
		fs[i].Version = remote.Metadata.Version
	}
	changed, err := s.Apply(Record{Kind: types.KindMachineClaim, Name: "r", Version: remote.Metadata.Version, Facets: fs})
	require.NoError(t, err)
	require.True(t, changed)
	same("r")

	_, err = s.Delete(types.KindMachineClaim, "a", types.Version{})
	require.NoError(t, err)
	same("a")
	_, err = s.Get(types.KindMachineClaim, "a")
	require.ErrorIs(t, err, ErrNotFound)

	n, err := s.CollectTombstones(clk.Now().Add(1))
	require.NoError(t, err)
	require.Equal(t, 1, n)
	_, ok := s.hot.get(types.KindMachineClaim, "a")
	assert.False(t, ok, "a collected tombstone is not hot")
	_, err = s.Get(types.KindMachineClaim, "a")
	require.ErrorIs(t, err, ErrNotFound)
	rec := putClaim(t, s, "a") // a create, as if the name had never been used
	assert.True(t, rec.Tomb.IsZero())
}

// TestCoolForgetsWritesInFlight: an idle store's Cool drops the hot records
// and the key locks' grown map; reads and writes after it go to badger and
// see every write made before.
func TestCoolForgetsWritesInFlight(t *testing.T) {
	s, _ := newMemStore(t)
	for i := range 20 {
		putClaim(t, s, fmt.Sprint("c", i))
	}
	_, ok := s.hot.get(types.KindMachineClaim, "c3")
	require.True(t, ok)
	s.Cool()
	_, ok = s.hot.get(types.KindMachineClaim, "c3")
	assert.False(t, ok, "no record is hot after Cool")
	assert.Nil(t, s.keys, "the key locks' map is dropped once no lock is held")

	c, err := Get[types.MachineClaim](s, types.KindMachineClaim, "c3")
	require.NoError(t, err, "a read after Cool finds the record in badger")
	assert.Equal(t, "c3", c.Metadata.Name)
	_, err = Update(s, types.KindMachineClaim, "c3", func(c *types.MachineClaim) error {
		c.Metadata.Labels["team"] = "b"
		return nil
	})
	require.NoError(t, err, "and a write builds on it")
	c, err = Get[types.MachineClaim](s, types.KindMachineClaim, "c3")
	require.NoError(t, err)
	assert.Equal(t, "b", c.Metadata.Labels["team"])
	_, ok = s.hot.get(types.KindMachineClaim, "c3")
	assert.True(t, ok, "the write is hot again")
}
