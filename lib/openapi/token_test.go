package openapi

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadOrCreateAdminToken(t *testing.T) {
	t.Run("given wins and is not written", func(t *testing.T) {
		dir := t.TempDir()
		tok, created, err := LoadOrCreateAdminToken(dir, "from-config")
		require.NoError(t, err)
		assert.Equal(t, "from-config", tok)
		assert.False(t, created)
		assert.NoFileExists(t, filepath.Join(dir, AdminTokenFile))
	})
	t.Run("created once with 0600 in a 0700 dir, then read back", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data", "node")
		tok, created, err := LoadOrCreateAdminToken(dir, "")
		require.NoError(t, err)
		assert.True(t, created)
		raw, err := hex.DecodeString(tok)
		require.NoError(t, err)
		assert.Len(t, raw, 32)

		fi, err := os.Stat(filepath.Join(dir, AdminTokenFile))
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
		di, err := os.Stat(dir)
		require.NoError(t, err)
		assert.Equal(t, os.FileMode(0o700), di.Mode().Perm())

		again, created, err := LoadOrCreateAdminToken(dir, "")
		require.NoError(t, err)
		assert.False(t, created)
		assert.Equal(t, tok, again)
	})
	t.Run("a token written by hand is trimmed", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, AdminTokenFile), []byte("  hand-made\n"), 0o600))
		tok, created, err := LoadOrCreateAdminToken(dir, "")
		require.NoError(t, err)
		assert.False(t, created)
		assert.Equal(t, "hand-made", tok)
	})
	t.Run("an empty file is an error, not a new token", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, AdminTokenFile), nil, 0o600))
		_, _, err := LoadOrCreateAdminToken(dir, "")
		assert.Error(t, err)
	})
	t.Run("an unreadable path is an error", func(t *testing.T) {
		dir := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(dir, AdminTokenFile), 0o700))
		_, _, err := LoadOrCreateAdminToken(dir, "")
		assert.Error(t, err)
	})
	t.Run("two tokens differ", func(t *testing.T) {
		a, _, err := LoadOrCreateAdminToken(t.TempDir(), "")
		require.NoError(t, err)
		b, _, err := LoadOrCreateAdminToken(t.TempDir(), "")
		require.NoError(t, err)
		assert.NotEqual(t, a, b)
	})
}
