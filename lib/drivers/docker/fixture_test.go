package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/docker/dockertest"
	"github.com/hf-fleet/hf/lib/types"
)

// fixture is one test's share of the real engine: the package's client,
// image and network (see shared) and a label namespace of its own, whose
// containers, volumes and networks are removed when the test ends.
type fixture struct {
	cli     *client.Client
	ns      string
	network string
	image   dockertest.Image
}

// newFixture gives the test its share of the engine, failing under CI and
// skipping elsewhere when there is none. Engine tests run in parallel (the
// engine, not the test, is what takes the time), which is safe because each
// test sees only its own namespace.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	if shared.err != nil {
		dockertest.Unavailable(t, shared.err)
	}
	return &fixture{cli: shared.cli, ns: dockertest.Namespace(t, shared.cli), network: shared.network, image: shared.image}
}

// newNetworkFixture is newFixture with a network name of its own that no
// network has yet; the network is removed when the test ends, after the
// namespace's containers.
func newNetworkFixture(t testing.TB) *fixture {
	t.Helper()
	if shared.err != nil {
		dockertest.Unavailable(t, shared.err)
	}
	network := dockertest.NetworkName(t, shared.cli)
	return &fixture{cli: shared.cli, ns: dockertest.Namespace(t, shared.cli), network: network, image: shared.image}
}

// config is the driver config for this fixture, with extra keys on top.
func (f *fixture) config(t testing.TB, extra map[string]any) []byte {
	t.Helper()
	cfg := map[string]any{
		"network":         f.network,
		"label_namespace": f.ns,
		"images_path":     t.TempDir(),
		"stop_timeout":    "1s",
	}
	for k, v := range extra {
		cfg[k] = v
	}
	b, err := json.Marshal(cfg)
	require.NoError(t, err)
	return b
}

// driver returns a prepared driver for node and instance, closed at the end.
func (f *fixture) driver(t testing.TB, node, instance string, extra map[string]any) *Driver {
	t.Helper()
	d := newDriver(drivers.Env{Instance: instance, NodeName: node, DataDir: t.TempDir(), Log: testLog(t)})
	require.NoError(t, d.Prepare(t.Context(), f.config(t, extra)))
	t.Cleanup(func() { assert.NoError(t, d.Close()) })
	return d
}

// template returns a template for the fixture's image with extra entry keys.
func (f *fixture) template(name string, res types.Resources, entry map[string]any) types.MachineTemplate {
	e := map[string]any{"image": map[string]string{"tag": f.image.Tag}}
	for k, v := range entry {
		e[k] = v
	}
	b, _ := json.Marshal(e)
	return template(name, res, map[string]string{Type: string(b)})
}

// containers lists every container of the fixture's namespace, any owner.
func (f *fixture) containers(t testing.TB) []container.Summary {
	t.Helper()
	list, err := f.cli.ContainerList(context.Background(), container.ListOptions{All: true,
		Filters: filters.NewArgs(filters.Arg("label", f.ns+".node"))})
	require.NoError(t, err)
	return list
}

// leakedVolumes lists the namespace's volumes no container uses any more.
func (f *fixture) leakedVolumes(t testing.TB) []string {
	t.Helper()
	vols, err := f.cli.VolumeList(context.Background(), volume.ListOptions{Filters: filters.NewArgs(
		filters.Arg("label", f.ns+".node"), filters.Arg("dangling", "true"))})
	require.NoError(t, err)
	var names []string
	for _, v := range vols.Volumes {
		names = append(names, v.Name)
	}
	return names
}

// assertNothingLeft checks that no container or volume of the namespace is
// left on the engine.
func (f *fixture) assertNothingLeft(t testing.TB) {
	t.Helper()
	var names []string
	for _, c := range f.containers(t) {
		names = append(names, fmt.Sprintf("%s (%s)", c.Names, c.State))
	}
	assert.Empty(t, names, "containers left behind")
	assert.Empty(t, f.leakedVolumes(t), "volumes left behind")
}

// inspect inspects a container by id.
func (f *fixture) inspect(t testing.TB, id string) container.InspectResponse {
	t.Helper()
	c, err := f.cli.ContainerInspect(context.Background(), id)
	require.NoError(t, err)
	return c
}

// deallocateLater releases r when the test ends.
func deallocateLater(t testing.TB, d *Driver, r *types.Resource) {
	t.Helper()
	if r == nil {
		return
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		assert.NoError(t, d.Deallocate(ctx, r))
	})
}

// testLog logs through t at debug level, so a failure shows what the driver
// did; benchmarks log nothing.
func testLog(t testing.TB) *slog.Logger {
	if _, bench := t.(*testing.B); bench {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}
