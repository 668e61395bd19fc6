package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/internal/syncbuf"
	"github.com/hf-fleet/hf/lib/buildinfo"
	"github.com/hf-fleet/hf/lib/cluster"
	"github.com/hf-fleet/hf/lib/config"
	"github.com/hf-fleet/hf/lib/openapi"
)

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// A store that cannot close (badger retrying a flush for ever) does not hold
// the node: it stops without it, with an error that says so.
func TestCloseWithinGivesUp(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	err := closeWithin(closerFunc(func() error { <-block; return nil }), 20*time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not close within 20ms")
	assert.NoError(t, closeWithin(closerFunc(func() error { return nil }), time.Minute))
	assert.EqualError(t, closeWithin(closerFunc(func() error { return errors.New("disk gone") }), time.Minute), "disk gone")
}

// A cloud driver needs its plugin: without hf-driver-cloud beside the node
// or on PATH, the node refuses to start and says what it looked for.
func TestCloudDriverNeedsItsPlugin(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	cfg := config.Config{DataDir: t.TempDir(), Drivers: []config.DriverConfig{
		{Name: "test"},
		{Name: "gce", Config: map[string]any{"project": "p", "zone": "z"}},
	}}
	_, err := prepareDrivers(context.Background(), cfg, "n1", slog.New(slog.DiscardHandler))
	require.Error(t, err)
	assert.Regexp(t, `^drivers\[1\]\.config: the gce driver runs in hf-driver-cloud, which is neither next to /\S+ nor on PATH`, err.Error())
}

// The node's errors of logs and shells are the API's too, said once.
func TestAPIError(t *testing.T) {
	err := apiError(fmt.Errorf("%s (driver %s): %w", "m-1", "test", cluster.ErrNoShell))
	assert.ErrorIs(t, err, openapi.ErrNoShell)
	assert.ErrorIs(t, err, cluster.ErrNoShell)
	assert.Equal(t, "m-1 (driver test): the machine's driver runs no shells", err.Error())
	err = apiError(fmt.Errorf("m-2: %w", cluster.ErrNoLogs))
	assert.ErrorIs(t, err, openapi.ErrNoLogs)
	assert.NotErrorIs(t, err, openapi.ErrNoShell)
	assert.ErrorIs(t, apiError(fmt.Errorf("m-3: %w", cluster.ErrNotHere)), openapi.ErrLogsNotHere)
	other := errors.New("disk full")
	assert.Equal(t, other, apiError(other))
	assert.NoError(t, apiError(nil))
}

// A node whose API port is taken stops before its drivers make anything:
// it prepared them (the native driver's dirs, a docker network) first.
func TestPortInUseStopsBeforeTheDrivers(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	dir := t.TempDir()
	ws := filepath.Join(dir, "native")
	cfg := config.Default()
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.API.Address = taken.Addr().String()
	cfg.Cluster.Bind = "127.0.0.1:0"
	cfg.Drivers = []config.DriverConfig{{Name: "native", Config: map[string]any{"unprivileged": true,
		"workspace_path": filepath.Join(ws, "ws"), "images_path": filepath.Join(ws, "img"), "home_path": filepath.Join(ws, "home")}}}
	err = serve(context.Background(), cfg, buildinfo.Info{}, nil, io.Discard, io.Discard)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "api listen")
	assert.NoDirExists(t, ws, "the native driver was not prepared")
}

// A host's other HF_ variables (Hugging Face's, a token kept in
// HF_API_TOKEN) do not stop a node; one with a section's prefix that names
// no key of it is ignored with a warning.
func TestForeignVariablesStartANode(t *testing.T) {
	for _, kv := range []string{"HF_HOME=/nonexistent/hf", "HF_TOKEN=hf_x", "HF_HUB_CACHE=/nonexistent/hub", "HF_HUB_OFFLINE=1",
		"HF_DEBUG=1", "HF_API_TOKEN=hf_y", "HF_API_URL=https://api.example"} {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "hf.yml")
	require.NoError(t, os.WriteFile(cfgFile, []byte("drivers: [{name: test}]\n"), 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"--config", cfgFile, "--data-dir", filepath.Join(dir, "data"), "--api", "127.0.0.1:0", "--gossip", "127.0.0.1:0"}, &stdout, &stderr, nil)
	}()
	exited := false
	require.Eventually(t, func() bool {
		select {
		case c := <-code:
			exited = true
			code <- c
			return true
		default:
			return strings.Contains(stdout.String(), "api:")
		}
	}, 30*time.Second, 20*time.Millisecond, "the node starts")
	require.False(t, exited, "the node exited at start: %s", stderr.String())
	cancel()
	select {
	case c := <-code:
		assert.Equal(t, 0, c, stderr.String())
	case <-time.After(60 * time.Second):
		t.Fatal("the node did not stop")
	}
	assert.Contains(t, stderr.String(), "variable=HF_API_URL section=api")
	assert.NotContains(t, stderr.String(), "HF_API_TOKEN")
}

// A node's name is kept in its data dir, configured or generated, and a
// node given another name on that data dir refuses to start: under the new
// name it took every machine its drivers held for the old one as unknown,
// and released them all.
func TestNodeNameIsTheDataDirs(t *testing.T) {
	t.Run("a configured name is kept and must stay", func(t *testing.T) {
		dir := t.TempDir()
		name, err := nodeName(dir, "n3")
		require.NoError(t, err)
		assert.Equal(t, "n3", name)
		name, err = nodeName(dir, "n3")
		require.NoError(t, err)
		assert.Equal(t, "n3", name)
		name, err = nodeName(dir, "")
		require.NoError(t, err)
		assert.Equal(t, "n3", name, "without a name the kept one")
		_, err = nodeName(dir, "n3b")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "name n3b: data dir "+dir+" is node n3's")
	})
	t.Run("a generated name is kept and must stay", func(t *testing.T) {
		dir := t.TempDir()
		gen, err := nodeName(dir, "")
		require.NoError(t, err)
		again, err := nodeName(dir, "")
		require.NoError(t, err)
		assert.Equal(t, gen, again)
		_, err = nodeName(dir, "other")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "is node "+gen+"'s")
	})
}
