package docker

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/docker/docker/client"

	"github.com/hf-fleet/hf/lib/drivers/docker/dockertest"
)

// shared is what the engine tests of this package share, set up once by
// TestMain so that no test pays for loading an image and creating a network:
// a client, a tagged image and a network. Each test still gets a label
// namespace of its own (newFixture), so tests never see each other's
// containers. When err is set there is no engine (or no busybox): engine tests
// then fail under CI and skip elsewhere.
var shared struct {
	cli     *client.Client
	image   dockertest.Image
	network string
	err     error
}

func TestMain(m *testing.M) {
	os.Exit(runTests(m))
}

// runTests sets up shared, runs the tests and removes what it set up.
func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "hf-docker-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	teardown, err := setupShared(ctx, dir)
	shared.err = err
	code := m.Run()
	if err := teardown(); err != nil {
		fmt.Fprintln(os.Stderr, "teardown:", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// setupShared connects to the engine, loads a tagged image and creates a
// network; teardown removes them (and is safe to call after a failed setup).
func setupShared(ctx context.Context, dir string) (teardown func() error, err error) {
	teardown = func() error { return nil }
	cli, err := dockertest.Connect(ctx)
	if err != nil {
		return teardown, err
	}
	img, err := dockertest.WriteImage(dir, fmt.Sprintf("hf-test/box:%d", time.Now().UnixNano()))
	if err != nil {
		_ = cli.Close()
		return teardown, err
	}
	if err := dockertest.Load(ctx, cli, img); err != nil {
		_ = dockertest.RemoveImage(ctx, cli, img.ID)
		_ = cli.Close()
		return teardown, err
	}
	network, err := dockertest.NewNetwork(ctx, cli)
	if err != nil {
		_ = dockertest.RemoveImage(ctx, cli, img.ID)
		_ = cli.Close()
		return teardown, err
	}
	shared.cli, shared.image, shared.network = cli, img, network
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		defer cli.Close()
		nerr := dockertest.RemoveNetwork(ctx, cli, network)
		ierr := dockertest.RemoveImage(ctx, cli, img.ID)
		if nerr != nil {
			return nerr
		}
		return ierr
	}, nil
}
