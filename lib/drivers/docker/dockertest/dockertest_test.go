package dockertest

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readTar returns the regular files of a tarball and its symlinks' targets.
func readTar(t *testing.T, data []byte) (files map[string][]byte, links map[string]string) {
	t.Helper()
	files, links = map[string][]byte{}, map[string]string{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, links
		}
		require.NoError(t, err)
		switch h.Typeflag {
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			require.NoError(t, err)
			files[h.Name] = b
		case tar.TypeSymlink:
			links[h.Name] = h.Linkname
		}
	}
}

func TestBuildImage(t *testing.T) {
	img := BuildImage(t, "hf-test/box:1")
	data, err := os.ReadFile(img.Path)
	require.NoError(t, err)
	sum := sha256.Sum256(data)
	assert.Equal(t, "sha256:"+hex.EncodeToString(sum[:]), img.Sum)

	files, _ := readTar(t, data)
	var manifest []manifestEntry
	require.NoError(t, json.Unmarshal(files["manifest.json"], &manifest))
	require.Len(t, manifest, 1)
	assert.Equal(t, []string{"hf-test/box:1"}, manifest[0].RepoTags)
	cfgBytes := files[manifest[0].Config]
	require.NotEmpty(t, cfgBytes)
	cfgSum := sha256.Sum256(cfgBytes)
	assert.Equal(t, "sha256:"+hex.EncodeToString(cfgSum[:]), img.ID, "the image id is the config's digest")

	var cfg imageConfig
	require.NoError(t, json.Unmarshal(cfgBytes, &cfg))
	assert.Equal(t, DefaultCmd(), cfg.Config.Cmd)
	assert.Equal(t, []string{"PATH=/bin"}, cfg.Config.Env)
	require.Len(t, manifest[0].Layers, 1)
	layer := files[manifest[0].Layers[0]]
	layerSum := sha256.Sum256(layer)
	assert.Equal(t, []string{"sha256:" + hex.EncodeToString(layerSum[:])}, cfg.RootFS.DiffIDs)

	layerFiles, links := readTar(t, layer)
	bb, err := os.ReadFile(BusyboxPath)
	require.NoError(t, err)
	assert.Equal(t, bb, layerFiles["bin/busybox"])
	for _, a := range Applets() {
		assert.Equal(t, "busybox", links["bin/"+a], a)
	}

	other := BuildImage(t, "")
	assert.NotEqual(t, img.ID, other.ID, "every image is distinct")
	otherData, err := os.ReadFile(other.Path)
	require.NoError(t, err)
	otherFiles, _ := readTar(t, otherData)
	var otherManifest []manifestEntry
	require.NoError(t, json.Unmarshal(otherFiles["manifest.json"], &otherManifest))
	assert.Nil(t, otherManifest[0].RepoTags)
	assert.Equal(t, layer, otherFiles[otherManifest[0].Layers[0]], "the layer is the same bytes every time")

	path, s := BuildImageTar(t)
	assert.FileExists(t, path)
	assert.True(t, strings.HasPrefix(s, "sha256:"))
}

func TestLoadImage(t *testing.T) {
	cli := Client(t)
	img := LoadImage(t, cli, "hf-test/loaded:"+strings.TrimPrefix(BuildImage(t, "").ID, "sha256:")[:12])
	got, err := cli.ImageInspect(t.Context(), img.Tag)
	require.NoError(t, err)
	assert.Equal(t, img.ID, got.ID)
	assert.Equal(t, DefaultCmd(), []string(got.Config.Cmd))
	require.NoError(t, RemoveImage(t.Context(), cli, img.ID))
	_, err = cli.ImageInspect(t.Context(), img.ID)
	assert.Error(t, err, "removed")
	require.NoError(t, RemoveImage(t.Context(), cli, img.ID), "removing a removed image is fine")
}

func TestServeFile(t *testing.T) {
	path, _ := BuildImageTar(t)
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	srv := NewFileServer(t, path)
	assert.True(t, strings.HasPrefix(srv.URL, "http://127.0.0.1:"))

	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	got, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, want, got)

	resp, err = http.Get(srv.URL + ".other")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Equal(t, int64(2), srv.Hits())

	assert.True(t, strings.HasSuffix(ServeFile(t, path), "/"+filepath.Base(path)))
}
