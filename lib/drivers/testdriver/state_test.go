package testdriver

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
)

// TestJournalReplays checks that changes written as journal lines come back
// on the next Prepare, that Prepare folds them into the snapshot, and that
// the journal stays bounded however many changes are made.
func TestJournalReplays(t *testing.T) {
	dir := t.TempDir()
	d := prepared(t, dir, `{}`)
	var kept []string
	for i := range 3 * minCompact {
		r, err := d.Allocate(t.Context(), plain, nil)
		require.NoError(t, err)
		if i%3 == 0 {
			kept = append(kept, r.ID)
			continue
		}
		require.NoError(t, d.Deallocate(t.Context(), r))
	}
	d.mu.Lock()
	lines := d.journaled
	d.mu.Unlock()
	assert.LessOrEqual(t, lines, max(minCompact, len(kept)), "the journal is folded into the snapshot")

	held, err := loadState(dir)
	require.NoError(t, err)
	assert.ElementsMatch(t, kept, slices.Collect(maps.Keys(held)))

	again := prepared(t, dir, `{}`)
	assert.Equal(t, len(kept), again.Held())
	_, err = os.Stat(filepath.Join(dir, JournalFile))
	assert.ErrorIs(t, err, os.ErrNotExist, "Prepare starts from a snapshot alone")
}

// TestJournalCutShort checks that a last line cut short by a crash is
// ignored, and that a bad line before the last is an error naming the file.
func TestJournalCutShort(t *testing.T) {
	dir := t.TempDir()
	d := prepared(t, dir, `{}`)
	r, err := d.Allocate(t.Context(), plain, nil)
	require.NoError(t, err)
	path := filepath.Join(dir, JournalFile)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	require.NoError(t, err)
	_, err = f.WriteString(`{"put":{"id":"test-cut`)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	held, err := loadState(dir)
	require.NoError(t, err)
	assert.Equal(t, []string{r.ID}, slices.Collect(maps.Keys(held)))
	// Prepare replaces the cut line, so appends after it start a line.
	again := prepared(t, dir, `{}`)
	_, err = again.Allocate(t.Context(), plain, nil)
	require.NoError(t, err)
	held, err = loadState(dir)
	require.NoError(t, err)
	assert.Len(t, held, 2)

	require.NoError(t, os.WriteFile(path, []byte("{\"put\":\n{\"del\":\"x\"}\n"), 0o600))
	_, err = loadState(dir)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path+": line 1: corrupt")
	require.NoError(t, os.WriteFile(path, []byte("{}\n"), 0o600))
	bad := newDriver(drivers.Env{Instance: "test", DataDir: dir, NodeName: "n"})
	err = bad.Prepare(t.Context(), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "line 1: neither put nor del")
}
