package store

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStoreCompactsItsOwnLevelZero: badger's compactors are off, so without
// compactLoop level 0 would fill to the stall after a dozen memtables and
// every later write would block for good. Writes of many memtables' worth
// complete, level 0 is merged while they go on only once it is deep (each
// merge rewrites the tree), and down to the tree once they stop, and every
// record reads back after a reopen.
func TestStoreCompactsItsOwnLevelZero(t *testing.T) {
	dir := t.TempDir()
	// A 32 MB budget gives 2 MB memtables: 24 MB of writes flush a dozen.
	cfg := Config{Dir: dir, NodeID: "n1", GCInterval: -1, MemoryLimit: 32 << 20}
	s, err := Open(cfg, quietLog())
	require.NoError(t, err)
	pad := strings.Repeat("x", 600) // under the value threshold: kept in the tree
	const n = 30000
	deepest := 0
	for i := range n {
		c := claim(fmt.Sprintf("c%05d", i))
		c.Metadata.Labels["pad"] = pad[:60]
		c.Spec.MachineTemplate = pad
		_, err := s.Put(c, PutOptions{Create: true})
		require.NoError(t, err)
		if i%100 == 0 {
			deepest = max(deepest, s.levelZero())
		}
	}
	assert.GreaterOrEqual(t, deepest, compactL0Busy, "while the writes go on, level 0 is merged only once it is deep")
	require.Greater(t, int(s.db.Levels()[0].NumTables)+len(s.db.Tables()), 0)
	assert.Eventually(t, func() bool {
		// A flush the last check raced with is merged by the next write's
		// kick; kicks further apart than the pause are writes that stopped.
		s.wrote()
		return s.db.Levels()[0].NumTables < compactL0
	}, 60*time.Second, compactPause*3/2, "level 0 is merged once writes stop")
	var below int
	for _, l := range s.db.Levels()[1:] {
		below += l.NumTables
	}
	assert.Positive(t, below, "the merged tables are below level 0")
	require.NoError(t, s.Close())

	s = openStore(t, cfg)
	recs, err := s.List("MachineClaim")
	require.NoError(t, err)
	assert.Len(t, recs, n, "nothing was lost by the merges")
}
