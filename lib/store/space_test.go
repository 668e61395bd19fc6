package store

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// paddedClaim is a claim of about size bytes (its metadata), so writes
// reach both badger's write-ahead log and, above the value threshold, its
// value log.
func paddedClaim(name string, size int) *types.MachineClaim {
	c := claim(name)
	c.Spec.Metadata = map[string]string{"pad": strings.Repeat("x", size)}
	return c
}

// The store refuses writes, with ErrNoSpace saying what is free and what
// it needs, once its disk has less room than badger's maps may take; it
// writes again once there is room, and a store that cannot keep that room
// does not open.
func TestWritesRefusedWhenTheDiskIsFull(t *testing.T) {
	var free atomic.Int64
	free.Store(1 << 40)
	cfg := Config{Dir: t.TempDir(), NodeID: "n1", GCInterval: -1, Now: newFakeClock().Now,
		FreeSpace: func(string) (int64, error) { return free.Load(), nil }}
	s := openStore(t, cfg)
	putClaim(t, s, "a")
	need, err := s.space.need()
	require.NoError(t, err)
	assert.Greater(t, need, int64(4*8<<20), "the reserve covers a memtable's rotation at least")

	// Nearly full: writes go on, new work is declined.
	free.Store(need + SpaceHeadroom - 1)
	s.space.mu.Lock()
	s.space.looked = time.Time{}
	s.space.mu.Unlock()
	require.ErrorIs(t, s.Admits(), ErrNoSpace, "within the headroom: no new work")
	require.NoError(t, s.Writable(), "but what is under way still writes")
	putClaim(t, s, "under-way")

	free.Store(need - 1)
	s.space.mu.Lock()
	s.space.looked = time.Time{} // look now, not at the next spaceEvery
	s.space.mu.Unlock()
	_, err = s.Put(claim("b"), PutOptions{Create: true})
	require.ErrorIs(t, err, ErrNoSpace)
	assert.Contains(t, err.Error(), "MiB free, the store needs")
	assert.Contains(t, err.Error(), cfg.Dir)
	got := s.ApplyBatch([]Record{rec(t, s, "a")})
	require.ErrorIs(t, got[0].Err, ErrNoSpace, "a peer's records are refused too")
	_, err = s.Delete(types.KindMachineClaim, "a", types.Version{})
	require.ErrorIs(t, err, ErrNoSpace)
	_, err = s.CollectTombstones(time.Now())
	require.ErrorIs(t, err, ErrNoSpace)
	_, err = s.Get(types.KindMachineClaim, "a")
	require.NoError(t, err, "reads go on")

	// The verdict holds for spaceEvery, then the disk is asked again.
	free.Store(1 << 40)
	_, err = s.Put(claim("b"), PutOptions{Create: true})
	require.ErrorIs(t, err, ErrNoSpace)
	require.Eventually(t, func() bool {
		_, err := s.Put(claim("b"), PutOptions{Create: true})
		return err == nil
	}, 10*time.Second, 50*time.Millisecond)

	require.NoError(t, s.Close())
	free.Store(s.space.reserve() - 1)
	_, err = Open(cfg, quietLog())
	require.ErrorIs(t, err, ErrNoSpace, "no room to open: badger's first write-ahead log would not fit")
}

// A burst looks at the disk again after spaceBytes, whatever the time.
func TestSpaceLookedAtAgainAfterABurst(t *testing.T) {
	var asked atomic.Int64
	g := newSpaceGuard(t.TempDir(), 8<<20, 16<<20, func(string) (int64, error) {
		asked.Add(1)
		return 1 << 40, nil
	}, quietLog())
	now := time.Unix(1000, 0)
	require.NoError(t, g.allow(now))
	require.NoError(t, g.allow(now))
	assert.Equal(t, int64(1), asked.Load(), "within spaceEvery: the last verdict")
	g.wrote(spaceBytes)
	require.NoError(t, g.allow(now))
	assert.Equal(t, int64(2), asked.Load(), "after spaceBytes: asked again")
	require.NoError(t, g.allow(now.Add(spaceEvery)))
	assert.Equal(t, int64(3), asked.Load())

	// A disk that cannot be asked does not stop the store.
	broken := newSpaceGuard(t.TempDir(), 8<<20, 16<<20, func(string) (int64, error) {
		return 0, errors.New("statfs: no")
	}, quietLog())
	require.NoError(t, broken.allow(now))
}

// rec is the stored record of claim name, to apply again.
func rec(t *testing.T, s *Store, name string) Record {
	t.Helper()
	r, err := s.Get(types.KindMachineClaim, name)
	require.NoError(t, err, fmt.Sprintf("get %s", name))
	return r
}
