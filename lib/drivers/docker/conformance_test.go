package docker

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/docker/dockertest"
	"github.com/hf-fleet/hf/lib/drivers/drivertest"
	"github.com/hf-fleet/hf/lib/types"
)

// TestConformance runs the shared driver checks against the real engine, with
// a template that has limits, its own entrypoint, command and env, a published
// port and a volume. CheckRunning proves the limits with `docker inspect` and
// the environment with `env` run in the container; CheckGone proves that
// neither the container nor its volume is left.
func TestConformance(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tmpl := f.template("small", types.Resources{CPU: 0.5, RAMGB: 0.25}, map[string]any{
		"entrypoint": []string{"/bin/sh", "-c"},
		"command":    []string{`trap 'exit 0' TERM; echo "$GREETING $LAB_USER" > /tmp/greeting; sleep 2147483647 & wait`},
		"env":        map[string]string{"GREETING": "hello"},
		"ports":      []string{"8080/tcp"},
		"volumes":    []string{"/data"},
	})
	tmpl.Spec.ConnectProtocols = []string{"http"}
	tmpl.Spec.ClaimMetadata = []types.MetadataKey{{Name: "LAB_USER"}}
	passed := map[string]string{"HF_CLAIM": "claim-1", "HF_MACHINE": "machine-1", "LAB_USER": "alice"}
	meta := maps.Clone(passed)
	meta["LD_PRELOAD"], meta["undeclared"] = "/evil.so", "x" // never reach the container
	var mu sync.Mutex
	volumes := map[string]string{} // resource id -> its volume, from CheckRunning
	drivertest.Conformance(t, drivertest.Harness{
		New: func(t *testing.T, dataDir string) drivers.Driver {
			d := newDriver(drivers.Env{Instance: "docker", NodeName: "node-a", DataDir: dataDir, Log: testLog(t)})
			require.NoError(t, d.Prepare(t.Context(), f.config(t, nil)))
			t.Cleanup(func() { assert.NoError(t, d.Close()) })
			return d
		},
		Template: tmpl,
		Meta:     meta,
		Timeout:  30 * time.Second,
		CheckRunning: func(t *testing.T, r types.Resource) {
			c := f.inspect(t, r.ID)
			assert.Equal(t, int64(500_000_000), c.HostConfig.NanoCPUs, "cpu limit from the template")
			assert.Equal(t, int64(256<<20), c.HostConfig.Memory, "memory limit from the template")
			assert.Equal(t, int64(256<<20), c.HostConfig.MemorySwap, "and no swap on top")
			assert.False(t, c.HostConfig.Privileged)
			env := strings.Split(dockertest.Exec(t, f.cli, r.ID, "env"), "\n")
			for k, v := range passed {
				assert.Contains(t, env, k+"="+v, "metadata visible inside the container")
			}
			for _, e := range env {
				assert.False(t, strings.HasPrefix(e, "LD_PRELOAD=") || strings.HasPrefix(e, "undeclared="), "%s reached the container", e)
			}
			assert.Contains(t, env, "GREETING=hello", "the template's env")
			require.EventuallyWithT(t, func(ct *assert.CollectT) {
				out := dockertest.Exec(t, f.cli, r.ID, "sh", "-c", "cat /tmp/greeting 2>/dev/null || true")
				assert.Equal(ct, "hello alice\n", out, "the template's entrypoint and command ran with the declared metadata")
			}, 10*time.Second, 50*time.Millisecond)

			assert.Equal(t, "node-a", c.Config.Labels[f.ns+".node"])
			assert.Equal(t, "docker", c.Config.Labels[f.ns+".instance"])
			assert.Equal(t, "machine-1", c.Config.Labels[f.ns+".machine"])
			assert.Equal(t, "claim-1", c.Config.Labels[f.ns+".claim"])
			require.Len(t, c.Mounts, 1)
			assert.Equal(t, "/data", c.Mounts[0].Destination)
			vol, err := f.cli.VolumeInspect(t.Context(), c.Mounts[0].Name)
			require.NoError(t, err)
			assert.Equal(t, "node-a", vol.Labels[f.ns+".node"], "the anonymous volume carries the owner's labels")
			mu.Lock()
			volumes[r.ID] = vol.Name
			mu.Unlock()

			assert.Equal(t, r.ID, r.Info["container_id"])
			assert.Equal(t, strings.TrimPrefix(c.Name, "/"), r.Info["name"])
			assert.Equal(t, c.NetworkSettings.Networks[f.network].IPAddress, r.Info["ip"])
			assert.NotEmpty(t, r.Info["ip"])
			assert.Equal(t, f.image.Tag, r.Info["image"])
			assert.Equal(t, f.image.ID, r.Info["image_id"])
			require.Len(t, r.Endpoints, 1)
			hostPort := c.NetworkSettings.Ports["8080/tcp"][0].HostPort
			assert.Equal(t, types.Endpoint{Protocol: "http", Address: "127.0.0.1:" + hostPort}, r.Endpoints[0])
			assert.Equal(t, "8080/tcp=127.0.0.1:"+hostPort, r.Info["ports"])
			assert.Equal(t, tmpl.Spec.Resources, r.Resources)
		},
		CheckGone: func(t *testing.T, r types.Resource) {
			_, err := f.cli.ContainerInspect(context.Background(), r.ID)
			assert.True(t, cerrdefs.IsNotFound(err), "container %s is gone: %v", r.ID, err)
			mu.Lock()
			vol := volumes[r.ID]
			mu.Unlock()
			if vol != "" {
				_, err := f.cli.VolumeInspect(context.Background(), vol)
				assert.True(t, cerrdefs.IsNotFound(err), "volume %s is gone: %v", vol, err)
			}
			assert.Empty(t, f.leakedVolumes(t), "no anonymous volume is left")
		},
	})
	f.assertNothingLeft(t)
}
