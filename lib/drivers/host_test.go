package drivers

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHostResources(t *testing.T) {
	r, err := HostResources(t.Context())
	require.NoError(t, err)
	assert.Greater(t, r.CPU, 0.0)
	assert.Greater(t, r.RAMGB, 0.0)
	assert.Zero(t, r.DiskGB, "no disk asked for")

	withDisk, err := HostResources(t.Context(), t.TempDir())
	require.NoError(t, err)
	assert.Equal(t, r.CPU, withDisk.CPU)
	assert.Greater(t, withDisk.DiskGB, 0.0)

	_, err = HostResources(t.Context(), "/no/such/path/hf-test")
	assert.ErrorContains(t, err, "/no/such/path/hf-test")
	_, err = HostResources(t.Context(), "/a", "/b")
	assert.ErrorContains(t, err, "at most one disk path")
}
