package drivers

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestResourceFile(t *testing.T) {
	dir := t.TempDir()
	f := ResourceFile[types.Resource]{Dir: dir, Name: "x.json", Version: 2}
	rs, err := f.Load()
	require.NoError(t, err)
	assert.Empty(t, rs, "no file means nothing held")

	want := []types.Resource{{ID: "a", Driver: "test"}, {ID: "b", Driver: "test", Info: map[string]string{"k": "v"}}}
	require.NoError(t, f.Save(want))
	got, err := f.Load()
	require.NoError(t, err)
	assert.Equal(t, want, got)
	info, err := os.Stat(f.Path())
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())

	for name, content := range map[string]string{
		"empty":   "  \n",
		"corrupt": `{"version": 2, "resources": [`,
		"unknown": `{"version": 2, "resources": [], "extra": 1}`,
	} {
		t.Run(name, func(t *testing.T) {
			require.NoError(t, os.WriteFile(f.Path(), []byte(content), 0o600))
			_, err := f.Load()
			require.Error(t, err)
			assert.Contains(t, err.Error(), "repair or remove it")
			assert.Contains(t, err.Error(), filepath.Base(f.Path()))
		})
	}
	require.NoError(t, os.WriteFile(f.Path(), []byte(`{"version": 1, "resources": []}`), 0o600))
	_, err = f.Load()
	assert.ErrorContains(t, err, "version 1, want 2")

	mem := ResourceFile[types.Resource]{Name: "x.json", Version: 1}
	require.NoError(t, mem.Save(want), "no dir keeps nothing on disk")
	rs, err = mem.Load()
	require.NoError(t, err)
	assert.Empty(t, rs)
}
