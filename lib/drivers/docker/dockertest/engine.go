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

// Connect returns a client for the engine at Host with API version
// negotiation, once the engine answered a ping within ctx.
func Connect(ctx context.Context) (*client.Client, error) {
	cli, err := client.NewClientWithOpts(client.WithHost(Host()), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, fmt.Errorf("docker client: %w", err)
	}
	if _, err := cli.Ping(ctx); err != nil {
		_ = cli.Close()
		return nil, fmt.Errorf("no Docker Engine answers at %s: %w", Host(), err)
	}
	return cli, nil
}

// Client connects to the engine (see Connect) and closes the client when the
// test ends. When no engine answers within 5 s the test fails under CI (CI set
// in the environment) and is skipped elsewhere.
func Client(t testing.TB) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cli, err := Connect(ctx)
	if err != nil {
		Unavailable(t, err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// Unavailable ends a test that cannot have what it needs (an engine,
// busybox): it fails under CI (CI set in the environment), where everything
// must be there, and is skipped elsewhere.
func Unavailable(t testing.TB, why error) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf("dockertest: %v (CI is set, so this fails instead of skipping)", why)
	}
	t.Skipf("dockertest: %v; skipping outside CI", why)
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
// containers to it (Namespace): cleanups run last-in first-out.
func NetworkName(t testing.TB, cli *client.Client) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "hftest-net-" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := RemoveNetwork(ctx, cli, name); err != nil {
			t.Errorf("dockertest: %v", err)
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
	RemoveImageLater(t, cli, img.ID)
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	if err := Load(ctx, cli, img); err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	return img
}

// Load loads img's tarball into the engine and checks that img.ID is there.
func Load(ctx context.Context, cli *client.Client, img Image) error {
	f, err := os.Open(img.Path)
	if err != nil {
		return err
	}
	defer f.Close()
	resp, err := cli.ImageLoad(ctx, f, client.ImageLoadWithQuiet(true))
	if err != nil {
		return fmt.Errorf("load image: %w", err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("load image: %w", err)
	}
	if strings.Contains(string(out), `"error"`) {
		return fmt.Errorf("load image: %s", out)
	}
	if _, err := cli.ImageInspect(ctx, img.ID); err != nil {
		return fmt.Errorf("image %s not there after load (%s): %w", img.ID, out, err)
	}
	return nil
}

// RemoveImage removes image id, forcing its tags off; an image that is not
// there is fine.
func RemoveImage(ctx context.Context, cli *client.Client, id string) error {
	_, err := cli.ImageRemove(ctx, id, image.RemoveOptions{Force: true, PruneChildren: true})
	if err != nil && !client.IsErrNotFound(err) {
		return fmt.Errorf("remove image %s: %w", id, err)
	}
	return nil
}

// RemoveImageLater removes image id (see RemoveImage) when the test ends.
func RemoveImageLater(t testing.TB, cli *client.Client, id string) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
		defer cancel()
		if err := RemoveImage(ctx, cli, id); err != nil {
			t.Errorf("dockertest: %v", err)
		}
	})
}

// NewNetwork creates a bridge network with a fresh name for tests that share
// one network, and returns its name; RemoveNetwork removes it.
func NewNetwork(ctx context.Context, cli *client.Client) (string, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "hftest-net-" + hex.EncodeToString(b[:])
	if _, err := cli.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge"}); err != nil {
		return "", fmt.Errorf("create network %s: %w", name, err)
	}
	return name, nil
}

// RemoveNetwork removes the network called name; one that is gone is fine.
func RemoveNetwork(ctx context.Context, cli *client.Client, name string) error {
	if err := cli.NetworkRemove(ctx, name); err != nil && !client.IsErrNotFound(err) {
		return fmt.Errorf("remove network %s: %w", name, err)
	}
	return nil
}
