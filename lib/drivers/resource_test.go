package drivers

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestCloneResource(t *testing.T) {
	orig := types.Resource{
		ID:        "r1",
		Info:      map[string]string{"host": "a"},
		Endpoints: []types.Endpoint{{Protocol: "ssh", Address: "a:22"}},
		Data:      json.RawMessage(`{"x":1}`),
	}
	c := CloneResource(orig)
	require.Equal(t, orig, c)
	c.Info["host"] = "b"
	c.Endpoints[0].Address = "b:22"
	c.Data[2] = 'y'
	assert.Equal(t, "a", orig.Info["host"])
	assert.Equal(t, "a:22", orig.Endpoints[0].Address)
	assert.Equal(t, `{"x":1}`, string(orig.Data))
	assert.Equal(t, types.Resource{}, CloneResource(types.Resource{}))
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	require.NoError(t, WriteFileAtomic(path, []byte("one"), 0o600))
	require.NoError(t, WriteFileAtomic(path, []byte("two"), 0o640))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "two", string(b))
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o640), st.Mode().Perm())
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temporary file is left")

	err = WriteFileAtomic(filepath.Join(dir, "missing", "x"), []byte("x"), 0o600)
	assert.ErrorContains(t, err, "missing")
}

func TestReplaceFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	require.NoError(t, ReplaceFile(path, []byte("one"), 0o600))
	require.NoError(t, ReplaceFile(path, []byte("two"), 0o600))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, "two", string(b))
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	assert.Len(t, entries, 1, "no temp file left behind")
}
