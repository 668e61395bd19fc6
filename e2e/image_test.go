package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/buildinfo"
	"github.com/hf-fleet/hf/lib/drivers/docker/dockertest"
	"github.com/hf-fleet/hf/lib/types"
)

// TestImageCluster is issue 14's image acceptance: the hf-node image built
// by `make image` from the repository's Dockerfile (FROM scratch, binaries
// built here, nothing pulled) runs as three containers on a private network
// the test makes; the second and third join the first with the join command
// `hf-cli cluster join-token` prints inside it, all three become ready, and
// a claim made through the third binds. Containers, their volumes, the
// network and the image are removed afterwards.
func TestImageCluster(t *testing.T) {
	if os.Geteuid() != 0 {
		dockertest.Unavailable(t, errors.New("building and running the image needs root"))
	}
	cli := dockertest.Client(t)
	// Cleanups run last-in first-out: containers, then the image, then the
	// network.
	netName := dockertest.NetworkName(t, cli)
	version := "e2e-" + randHex(4)
	tag := "hf-e2e/node:" + version
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := dockertest.RemoveImage(ctx, cli, tag); err != nil {
			t.Errorf("remove image: %v", err)
		}
	})
	ns := dockertest.Namespace(t, cli)

	start := time.Now()
	build := exec.Command("make", "-C", "..", "image", "IMAGE="+tag, "VERSION="+version,
		"IMAGE_CONTEXT="+filepath.Join(t.TempDir(), "context"))
	out, err := build.CombinedOutput()
	require.NoError(t, err, "make image:\n%s", out)
	img, err := cli.ImageInspect(t.Context(), tag)
	require.NoError(t, err)
	assert.Len(t, img.RootFS.Layers, 1, "FROM scratch: one layer, the context's files")
	assert.Equal(t, []string{"/usr/local/bin/hf-node"}, []string(img.Config.Entrypoint))
	t.Logf("image %s built in %s", tag, time.Since(start).Round(time.Millisecond))

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	_, err = cli.NetworkCreate(ctx, netName, network.CreateOptions{Driver: "bridge", Internal: true})
	require.NoError(t, err)

	run := func(name string, args ...string) {
		t.Helper()
		c, err := cli.ContainerCreate(ctx,
			&container.Config{Image: tag, Cmd: args, Hostname: name, Labels: map[string]string{ns + ".node": name}},
			&container.HostConfig{}, &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{netName: {}}},
			nil, ns+"-"+name)
		require.NoError(t, err)
		require.NoError(t, cli.ContainerStart(ctx, c.ID, container.StartOptions{}))
	}
	run("hf1")
	token := adminToken(t, cli, ns+"-hf1")

	var jt struct{ Command string }
	require.NoError(t, json.Unmarshal([]byte(inContainer(t, ns+"-hf1", nil, "hf-cli", "cluster", "join-token", "-o", "json")), &jt))
	args := strings.Fields(jt.Command)
	require.True(t, len(args) > 1 && args[0] == "hf-node", "a join command: %q", jt.Command)
	run("hf2", args[1:]...)
	run("hf3", args[1:]...)

	for _, name := range []string{"hf1", "hf2", "hf3"} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			_, _, code := execIn(ns+"-"+name, nil, "hf-cli", "cluster", "health")
			assert.Equal(c, 0, code, "%s ready", name)
		}, 60*time.Second, 200*time.Millisecond)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var nodes struct{ Items []types.Node }
		stdout, _, code := execIn(ns+"-hf1", nil, "hf-cli", "node", "list", "-o", "json")
		if !assert.Equal(c, 0, code) || !assert.NoError(c, json.Unmarshal([]byte(stdout), &nodes)) {
			return
		}
		up := 0
		for _, n := range nodes.Items {
			if n.Status.Phase == types.NodeUp && !strings.HasPrefix(n.Spec.APIAddress, "[::]") {
				up++
			}
		}
		assert.Equal(c, 3, up, "three nodes Up, each publishing an address it is reached at: %s", stdout)
	}, 60*time.Second, 200*time.Millisecond)

	tpl := "kind: MachineTemplate\nmetadata: {name: small}\nspec:\n  resources: {cpu: 1, ramGB: 1}\n  providerConfiguration: {test: {}}\n"
	inContainer(t, ns+"-hf1", strings.NewReader(tpl), "hf-cli", "template", "create", "-f", "-")
	// The cluster's token reaches the joined nodes by replication, a moment
	// after they are Up.
	for _, name := range []string{"hf2", "hf3"} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			_, errOut, code := execIn(ns+"-"+name, nil, "hf-cli", "--token", token, "whoami")
			assert.Equal(c, 0, code, "%s: %s", name, errOut)
		}, 30*time.Second, 200*time.Millisecond)
	}
	inContainer(t, ns+"-hf3", nil, "hf-cli", "--token", token, "claim", "create", "c1", "--template", "small", "--wait", "--wait-timeout", "30s")
	var claim types.MachineClaim
	require.NoError(t, json.Unmarshal([]byte(inContainer(t, ns+"-hf2", nil, "hf-cli", "--token", token, "claim", "get", "c1", "-o", "json")), &claim))
	assert.Equal(t, types.ClaimBound, claim.Status.Phase)
	assert.NotEmpty(t, claim.Status.Machine)

	var info buildinfo.Info
	require.NoError(t, json.Unmarshal([]byte(inContainer(t, ns+"-hf2", nil, "hf-node", "version", "-o", "json")), &info))
	assert.Equal(t, version, info.Version, "make stamps the version")
	assert.NotEmpty(t, info.Revision, "and the commit")
	// The cloud drivers' plugin is beside hf-node, where the node looks.
	_, errOut, code := execIn(ns+"-hf2", nil, "/usr/local/bin/hf-driver-cloud")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "runs the aws and gce drivers for hf-node")
	t.Logf("three containers up and a claim bound %s after the build", time.Since(start).Round(time.Millisecond))
}

var adminTokenLine = regexp.MustCompile(`admin token \(shown once[^)]*\): (\S+)`)

// adminToken waits for the first start of container name to print the
// cluster's admin token and returns it.
func adminToken(t *testing.T, cli *client.Client, name string) string {
	t.Helper()
	var token string
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		rc, err := cli.ContainerLogs(t.Context(), name, container.LogsOptions{ShowStdout: true})
		if !assert.NoError(c, err) {
			return
		}
		defer rc.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(rc)
		m := adminTokenLine.FindStringSubmatch(b.String())
		if assert.NotNil(c, m, "admin token in the logs") {
			token = m[1]
		}
	}, 30*time.Second, 100*time.Millisecond)
	return token
}

// execIn runs a command in container name (docker exec) and returns its
// stdout, stderr and exit code.
func execIn(name string, stdin *strings.Reader, args ...string) (string, string, int) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", append([]string{"exec", "-i", name}, args...)...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if err != nil {
		code = -1
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		}
	}
	return out.String(), errb.String(), code
}

// inContainer is execIn that fails the test on a non-zero exit.
func inContainer(t *testing.T, name string, stdin *strings.Reader, args ...string) string {
	t.Helper()
	out, errOut, code := execIn(name, stdin, args...)
	require.Equal(t, 0, code, "docker exec %s %v: %s%s", name, args, out, errOut)
	return out
}
