package dockertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
)

// cleanupTimeout bounds each cleanup step against the engine.
const cleanupTimeout = 60 * time.Second

// Host returns the engine address tests use: DOCKER_HOST or the local socket.
func Host() string {
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	return client.DefaultDockerHost
}

// Client connects to the engine at Host with API version negotiation and
// closes the client when the test ends. When no engine answers within 5 s the
// test fails under CI (CI set in the environment) and is skipped elsewhere.
func Client(t testing.TB) *client.Client {
	t.Helper()
	cli, err := client.NewClientWithOpts(client.WithHost(Host()), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatalf("dockertest: docker client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := cli.Ping(ctx); err != nil {
		unavailable(t, fmt.Sprintf("no Docker Engine answers at %s: %v", Host(), err))
	}
	return cli
}

// unavailable fails the test under CI and skips it elsewhere.
func unavailable(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("dockertest: %s (CI is set, so this fails instead of skipping)", why)
	}
	t.Skipf("dockertest: %s; skipping outside CI", why)
}

// Namespace returns a fresh label namespace ("hftest" and 8 hex digits) and
// removes, when the test ends, every container, volume and network labelled
// with it, so a failed test leaves nothing on the engine.
func Namespace(t testing.TB, cli *client.Client) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	ns := "hftest" + hex.EncodeToString(b[:])
	t.Cleanup(func() { RemoveNamespace(t, cli, ns) })
	return ns
}

// NetworkName returns a fresh network name and removes the network (whoever
// created it) when the test ends. Register it before anything that attaches
// containers to it: cleanups run last-in first-out.
func NetworkName(t testing.TB, cli *client.Client) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "hftest-net-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := cli.NetworkRemove(ctx, name); err != nil && !client.IsErrNotFound(err) {
			t.Errorf("dockertest: remove network %s: %v", name, err)
		}
	})
	return name
}

// RemoveNamespace force-removes every container (with its anonymous volumes),
// volume and network that carries a label of namespace ns ("<ns>.node" on
// containers and volumes, "<ns>.network" on networks).
func RemoveNamespace(t testing.TB, cli *client.Client, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", ns+".node"))})
	if err != nil {
		t.Errorf("dockertest: list containers of %s: %v", ns, err)
		return
	}
	for _, c := range list {
		err := cli.ContainerRemove(ctx, c.ID, container.RemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !client.IsErrNotFound(err) && !strings.Contains(err.Error(), "already in progress") {
			t.Errorf("dockertest: remove container %s: %v", c.ID, err)
		}
	}
	vols, err := cli.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("label", ns+".node"))})
	if err != nil {
		t.Errorf("dockertest: list volumes of %s: %v", ns, err)
		return
	}
	for _, v := range vols.Volumes {
		if err := cli.VolumeRemove(ctx, v.Name, true); err != nil && !client.IsErrNotFound(err) {
			t.Errorf("dockertest: remove volume %s: %v", v.Name, err)
		}
	}
	nets, err := cli.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("label", ns+".network"))})
	if err != nil {
		t.Errorf("dockertest: list networks of %s: %v", ns, err)
		return
	}
	for _, n := range nets {
		if err := cli.NetworkRemove(ctx, n.ID); err != nil && !client.IsErrNotFound(err) {
			t.Errorf("dockertest: remove network %s: %v", n.Name, err)
		}
	}
}

// LoadImage builds an image tagged tag (see BuildImage), loads it into the
// engine and removes it (by id, with its tag) when the test ends.
func LoadImage(t testing.TB, cli *client.Client, tag string) Image {
	t.Helper()
	img := BuildImage(t, tag)
	f, err := os.Open(img.Path)
	if err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	RemoveImageLater(t, cli, img.ID)
	resp, err := cli.ImageLoad(ctx, f, client.ImageLoadWithQuiet(true))
	if err != nil {
		t.Fatalf("dockertest: load image: %v", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("dockertest: load image: %v", err)
	}
	if strings.Contains(string(out), `"error"`) {
		t.Fatalf("dockertest: load image: %s", out)
	}
	if _, err := cli.ImageInspect(ctx, img.ID); err != nil {
		t.Fatalf("dockertest: image %s not there after load (%s): %v", img.ID, out, err)
	}
	return img
}

// RemoveImageLater removes image id (forcing its tags off) when the test ends;
// an image that is not there is fine.
func RemoveImageLater(t testing.TB, cli *client.Client, id string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		_, err := cli.ImageRemove(ctx, id, image.RemoveOptions{Force: true, PruneChildren: true})
		if err != nil && !client.IsErrNotFound(err) {
			t.Errorf("dockertest: remove image %s: %v", id, err)
		}
	})
}
