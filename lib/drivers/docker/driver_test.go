package docker

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/docker/dockertest"
	"github.com/hf-fleet/hf/lib/drivers/drivertest"
	"github.com/hf-fleet/hf/lib/types"
)

// noEngine is an address where no engine answers.
func noEngine(t *testing.T) string {
	return "unix://" + filepath.Join(t.TempDir(), "no-docker.sock")
}

func TestAvailable(t *testing.T) {
	dockertest.Client(t) // fails under CI, skips elsewhere, when no engine answers
	require.NoError(t, Available(t.Context(), dockertest.Host()))

	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	start := time.Now()
	err := Available(ctx, noEngine(t))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no-docker.sock")
	assert.Less(t, time.Since(start), 10*time.Second, "Available gives up when its context ends")

	assert.Error(t, Available(t.Context(), "ssh://somewhere"), "a host the client cannot dial")
}

func TestStatusText(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := f.driver(t, "node-a", "docker", nil)
	assert.Regexp(t, regexp.MustCompile(`^ok: engine \S+, api 1\.\d+$`), d.StatusText())
	require.NoError(t, d.Close())
	assert.Equal(t, drivers.ErrNotPrepared.Error(), d.StatusText())
	require.NoError(t, d.Close(), "closing twice is fine")
}

func TestPrepareFailsWithoutEngine(t *testing.T) {
	d := New(drivers.Env{Instance: "docker", NodeName: "n", DataDir: t.TempDir()})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	err := d.Prepare(ctx, []byte(`{"host": "`+noEngine(t)+`"}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "docker engine at unix://")
	_, err = d.List(t.Context())
	assert.ErrorIs(t, err, drivers.ErrNotPrepared, "a failed Prepare leaves the driver unusable")
}

func TestHostCapacity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	host, err := drivers.HostResources(t.Context())
	require.NoError(t, err)
	d := f.driver(t, "node-a", "docker", map[string]any{"cpu_alter": -1, "ram_alter": -2, "cpu_overbook": 4, "ram_overbook": 8})
	c := d.HostCapacity()
	assert.Equal(t, host.CPU, c.Total.CPU)
	assert.Equal(t, host.RAMGB, c.Total.RAMGB)
	assert.Positive(t, c.Total.DiskGB, "the disk of images_path")
	assert.Equal(t, max(0, host.CPU-1), c.Usable.CPU)
	assert.Equal(t, max(0, host.RAMGB-2), c.Usable.RAMGB)
	assert.Equal(t, types.Resources{CPU: 4, RAMGB: 8}, c.Overbook)
}

// TestPrivileged: a privileged template is refused unless the node allows
// it; where it is allowed the container is created privileged. (Engines that
// run inside a restricted sandbox, like this project's CI, cannot start
// privileged containers; the allocation then fails at start and cleans up.)
func TestPrivileged(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tmpl := f.template("priv", types.Resources{CPU: 0.1, RAMGB: 0.1}, map[string]any{"privileged": true})

	strict := f.driver(t, "node-a", "docker", nil)
	_, err := strict.Allocate(t.Context(), tmpl, nil)
	require.ErrorIs(t, err, types.ErrInvalid)
	assert.Contains(t, err.Error(), "privileged: not allowed on this node")
	f.assertNothingLeft(t)

	lax := f.driver(t, "node-b", "docker", map[string]any{"allow_privileged": true})
	r, err := lax.Allocate(t.Context(), tmpl, nil)
	deallocateLater(t, lax, r)
	if err != nil {
		assert.Contains(t, err.Error(), "start: ", "the engine refused to start it, not the driver to create it")
		t.Logf("this engine cannot start privileged containers: %v", err)
		f.assertNothingLeft(t)
		return
	}
	assert.True(t, f.inspect(t, r.ID).HostConfig.Privileged)
}

// TestRestartAdoptsContainers: a new driver instance (a restarted hf-node)
// lists what the old one made, with the same information (endpoints and
// their protocols come back from labels), reports it Running and removes it.
func TestRestartAdoptsContainers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tmpl := f.template("web", types.Resources{CPU: 0.25, RAMGB: 0.125}, map[string]any{"ports": []string{"80", "443/tcp"}})
	tmpl.Spec.ConnectProtocols = []string{"http", "https"}
	old := f.driver(t, "node-a", "docker", nil)
	r, err := old.Allocate(t.Context(), tmpl, map[string]string{"HF_MACHINE": "m"})
	require.NoError(t, err) // the namespace cleanup removes it if the test fails
	require.NoError(t, old.Close())

	fresh := f.driver(t, "node-a", "docker", nil)
	list, err := fresh.List(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, *r, list[0], "List rebuilds the resource Allocate returned")
	require.Len(t, list[0].Endpoints, 2)
	assert.Equal(t, "http", list[0].Endpoints[0].Protocol)
	assert.Equal(t, "https", list[0].Endpoints[1].Protocol)
	phase, err := fresh.Status(t.Context(), &list[0])
	require.NoError(t, err)
	assert.Equal(t, types.MachineRunning, phase)
	require.NoError(t, fresh.Deallocate(t.Context(), &list[0]))
	f.assertNothingLeft(t)
}

// TestActivity: the CPU time the engine reports grows for a busy container
// and stands still for an idle one; a removed container is ErrNotFound.
func TestActivity(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := f.driver(t, "node-a", "docker", nil)
	idle := f.allocateShell(t, d, "idle", "trap 'exit 0' TERM; sleep 2147483647 & wait")
	busy := f.allocateShell(t, d, "busy", "trap 'exit 0' TERM; while :; do :; done")
	drivertest.CheckActivity(t, d, d, idle, busy)
}

// TestPauseResume: the engine shows the container paused and running again,
// its CPU time stands still while paused, and a paused container is still
// removed at once and completely.
func TestPauseResume(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := f.driver(t, "node-a", "docker", nil)
	r := f.allocateShell(t, d, "nap", "trap 'exit 0' TERM; while :; do :; done")
	drivertest.CheckPauseResume(t, d, r, func(want bool) {
		assert.Equal(t, want, f.inspect(t, r.ID).State.Paused, "the engine's view")
	})
	f.assertNothingLeft(t)
}

// allocateShell allocates a container of half a CPU that runs script with
// /bin/sh -c, removed when the test ends.
func (f *fixture) allocateShell(t *testing.T, d *Driver, name, script string) *types.Resource {
	t.Helper()
	r, err := d.Allocate(t.Context(), f.template(name, types.Resources{CPU: 0.5, RAMGB: 0.125},
		map[string]any{"entrypoint": []string{"/bin/sh", "-c"}, "command": []string{script}}), nil)
	require.NoError(t, err)
	deallocateLater(t, d, r)
	return r
}

// A shell in a container runs the commands it is given, inside the
// container, and ends with them, with its exit status; with a terminal
// too. A shell killed by a signal exits 128 plus the signal's number.
func TestShell(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := f.driver(t, "node-a", "docker", nil)
	r := f.allocateShell(t, d, "box", "sleep 300")
	for _, tty := range []bool{false, true} {
		for _, tc := range []struct {
			script string
			want   drivers.ShellExit
		}{
			{"echo inside $(hostname); exit 3", drivers.ShellExit{Code: 3}},
			{"echo inside $(hostname); true; exit", drivers.ShellExit{}},
			{"echo inside $(hostname); kill -KILL $$", drivers.ShellExit{Code: 137}},
		} {
			s := &drivertest.ShellStream{In: strings.NewReader(tc.script + "\n")}
			exit, err := d.Shell(t.Context(), r, drivers.ShellOptions{TTY: tty, Rows: 24, Cols: 80}, s)
			require.NoError(t, err)
			assert.Equal(t, tc.want, exit, "tty %v: %s", tty, tc.script)
			assert.Contains(t, s.Out.String(), "inside "+f.inspect(t, r.ID).Config.Hostname, "tty %v", tty)
		}
	}
	require.NoError(t, d.Deallocate(t.Context(), r))
	f.assertNothingLeft(t)
}
