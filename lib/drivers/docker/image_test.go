package docker

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/docker/docker/api/types/image"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers/docker/dockertest"
	"github.com/hf-fleet/hf/lib/types"
)

// tarballTemplate is a template whose image is the tarball at url.
func tarballTemplate(t *testing.T, url, sum string) types.MachineTemplate {
	t.Helper()
	b, err := json.Marshal(map[string]any{"image": map[string]string{"url": url, "sum": sum}})
	require.NoError(t, err)
	return template("tarball", types.Resources{CPU: 0.2, RAMGB: 0.1}, map[string]string{Type: string(b)})
}

// TestTarballImageLoadedOnce: several allocations of one tarball image, two
// of them at once, download it once and load it into the engine once.
func TestTarballImageLoadedOnce(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := dockertest.BuildImage(t, "")
	dockertest.RemoveImageLater(t, f.cli, img.ID)
	srv := dockertest.NewFileServer(t, img.Path)
	d := f.driver(t, "node-a", "docker", nil)
	tmpl := tarballTemplate(t, srv.URL, img.Sum)

	var wg sync.WaitGroup
	res := make([]*types.Resource, 2)
	errs := make([]error, 2)
	for i := range res {
		wg.Go(func() { res[i], errs[i] = d.Allocate(t.Context(), tmpl, map[string]string{"N": "x"}) })
	}
	wg.Wait()
	for i := range res {
		deallocateLater(t, d, res[i])
		require.NoError(t, errs[i])
	}
	r, err := d.Allocate(t.Context(), tmpl, nil)
	require.NoError(t, err)
	deallocateLater(t, d, r)
	res = append(res, r)

	for _, r := range res {
		assert.Equal(t, img.ID, r.Info["image_id"])
		assert.Equal(t, srv.URL, r.Info["image"])
		phase, err := d.Status(t.Context(), r)
		require.NoError(t, err)
		assert.Equal(t, types.MachineRunning, phase)
	}
	assert.Equal(t, int64(1), d.loads.Load(), "the tarball is loaded once")
	assert.Equal(t, int64(1), srv.Hits(), "the tarball is downloaded once")

	// Someone removes the image: the next allocation loads it again from the
	// download cache, without downloading it again.
	for _, r := range res {
		require.NoError(t, d.Deallocate(t.Context(), r))
	}
	_, err = f.cli.ImageRemove(t.Context(), img.ID, image.RemoveOptions{Force: true, PruneChildren: true})
	require.NoError(t, err)
	r, err = d.Allocate(t.Context(), tmpl, nil)
	require.NoError(t, err)
	deallocateLater(t, d, r)
	assert.Equal(t, int64(2), d.loads.Load())
	assert.Equal(t, int64(1), srv.Hits())
}

// TestTaggedTarball: a tarball that names a tag is loaded and known by its id.
func TestTaggedTarball(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	img := dockertest.BuildImage(t, "hf-test/tagged:"+f.ns)
	dockertest.RemoveImageLater(t, f.cli, img.ID)
	url := dockertest.ServeFile(t, img.Path)
	d := f.driver(t, "node-a", "docker", nil)
	st, err := d.state()
	require.NoError(t, err)
	id, err := d.resolveImage(t.Context(), st, ImageRef{URL: url, Sum: img.Sum})
	require.NoError(t, err)
	assert.Equal(t, img.ID, id)
	got, err := f.cli.ImageInspect(t.Context(), "hf-test/tagged:"+f.ns)
	require.NoError(t, err)
	assert.Equal(t, img.ID, got.ID)
}

// TestNotAnImageTarball: a download that is not a `docker save` tarball fails
// with the engine's reason and is not remembered as loaded.
func TestNotAnImageTarball(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	path := filepath.Join(t.TempDir(), "notes.tar")
	data := []byte("these are not the layers you are looking for\n")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	sum := sha256.Sum256(data)
	ref := ImageRef{URL: dockertest.ServeFile(t, path), Sum: "sha256:" + hex.EncodeToString(sum[:])}
	d := f.driver(t, "node-a", "docker", nil)
	st, err := d.state()
	require.NoError(t, err)
	_, err = d.resolveImage(t.Context(), st, ref)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "load: ")
	t.Logf("reason: %v", err)
	assert.Empty(t, d.images.get(ref.Sum))
}
