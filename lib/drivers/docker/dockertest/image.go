// Package dockertest helps tests that need a real Docker Engine: it builds
// images from scratch (no registry: a static busybox in one layer, written as a
// `docker load` tarball), serves files over HTTP on 127.0.0.1, connects to the
// engine (failing in CI, skipping elsewhere when none answers) and removes what
// a test left on the engine.
//
// The images need Debian's busybox-static package (/bin/busybox).
package dockertest

import (
	"archive/tar"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// BusyboxPath is where Debian's busybox-static package installs the binary.
const BusyboxPath = "/bin/busybox"

// NonceLabel is the image label that makes every built image distinct.
const NonceLabel = "hf.test.nonce"

// Applets returns the busybox applets the image links into /bin.
func Applets() []string {
	return []string{"sh", "sleep", "env", "cat", "echo", "false", "true", "ls", "id", "ps", "kill", "nc"}
}

// DefaultCmd returns the image's command: print the environment (so it shows
// in the container's log), then wait for SIGTERM and exit 0 at once when it
// comes (PID 1 gets no default signal handlers, so a bare sleep would ignore
// it).
func DefaultCmd() []string {
	return []string{"/bin/sh", "-c", "trap 'exit 0' TERM; env; sleep 2147483647 & wait"}
}

// Image is a docker-loadable tarball built by BuildImage.
type Image struct {
	// Path is the tarball's path (in a t.TempDir()).
	Path string
	// Sum is "sha256:<hex>" of the tarball.
	Sum string
	// ID is the image id ("sha256:<hex>") the engine gives it when loaded.
	ID string
	// Tag is the repository tag written into the tarball, if any.
	Tag string
}

// BuildImageTar builds an untagged busybox image tarball and returns its path
// and "sha256:<hex>" sum.
func BuildImageTar(t testing.TB) (path, sum string) {
	t.Helper()
	img := BuildImage(t, "")
	return img.Path, img.Sum
}

// BuildImage writes a one-layer image in `docker save` format into a
// t.TempDir() (see WriteImage), failing (in CI) or skipping the test when
// busybox is not installed.
func BuildImage(t testing.TB, tag string) Image {
	t.Helper()
	img, err := WriteImage(t.TempDir(), tag)
	if errors.Is(err, ErrNoBusybox) {
		Unavailable(t, err)
	}
	if err != nil {
		t.Fatalf("dockertest: %v", err)
	}
	return img
}

// ErrNoBusybox is wrapped by WriteImage's error when /bin/busybox is missing.
var ErrNoBusybox = errors.New("no static busybox (apt-get install busybox-static)")

// WriteImage writes a one-layer image in `docker save` format into dir:
// /bin/busybox, links for Applets, /tmp, PATH=/bin and DefaultCmd. A random
// label makes its id unique, so tests that remove their images never remove
// another test's. A non-empty tag ("hf-test/busybox:x") is recorded in the
// tarball, so `docker load` tags the image.
func WriteImage(dir, tag string) (Image, error) {
	bb, err := busybox()
	if err != nil {
		return Image{}, err
	}
	layer, err := buildLayer(bb)
	if err != nil {
		return Image{}, fmt.Errorf("build layer: %w", err)
	}
	layerSum := sha256.Sum256(layer)
	diffID := "sha256:" + hex.EncodeToString(layerSum[:])

	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	cfg, err := json.Marshal(imageConfig{
		Architecture: "amd64",
		OS:           "linux",
		Created:      epoch,
		Config: containerConfig{
			Env:    []string{"PATH=/bin"},
			Cmd:    DefaultCmd(),
			Labels: map[string]string{NonceLabel: hex.EncodeToString(nonce[:])},
		},
		RootFS:  rootFS{Type: "layers", DiffIDs: []string{diffID}},
		History: []history{{Created: epoch, CreatedBy: "dockertest: busybox-static"}},
	})
	if err != nil {
		return Image{}, fmt.Errorf("image config: %w", err)
	}
	cfgSum := sha256.Sum256(cfg)
	cfgHex := hex.EncodeToString(cfgSum[:])
	layerPath := hex.EncodeToString(layerSum[:]) + "/layer.tar"

	var tags []string
	if tag != "" {
		tags = []string{tag}
	}
	manifest, err := json.Marshal([]manifestEntry{{Config: cfgHex + ".json", RepoTags: tags, Layers: []string{layerPath}}})
	if err != nil {
		return Image{}, fmt.Errorf("manifest: %w", err)
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		data []byte
	}{
		{cfgHex + ".json", cfg},
		{layerPath, layer},
		{"manifest.json", manifest},
	} {
		if err := writeFile(tw, f.name, f.data, 0o644); err != nil {
			return Image{}, fmt.Errorf("write %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return Image{}, fmt.Errorf("close tarball: %w", err)
	}
	path := filepath.Join(dir, "image-"+cfgHex[:12]+".tar")
	if err := os.WriteFile(path, out.Bytes(), 0o644); err != nil {
		return Image{}, err
	}
	sum := sha256.Sum256(out.Bytes())
	return Image{Path: path, Sum: "sha256:" + hex.EncodeToString(sum[:]), ID: "sha256:" + cfgHex, Tag: tag}, nil
}

// busybox returns the static busybox binary.
func busybox() ([]byte, error) {
	path := BusyboxPath
	if _, err := os.Stat(path); err != nil {
		if p, lerr := exec.LookPath("busybox"); lerr == nil {
			path = p
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoBusybox, err)
	}
	return b, nil
}

// epoch is the fixed time stamped on every file and the image, so the layer is
// the same bytes on every build (and the engine stores it once).
var epoch = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// buildLayer returns the layer tar: /bin/busybox, a link per applet, /tmp.
func buildLayer(bb []byte) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, d := range []struct {
		name string
		mode int64
	}{{"bin/", 0o755}, {"tmp/", 0o1777}, {"etc/", 0o755}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.name, Mode: d.mode, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	if err := writeFile(tw, "bin/busybox", bb, 0o755); err != nil {
		return nil, err
	}
	if err := writeFile(tw, "etc/passwd", []byte("root:x:0:0:root:/:/bin/sh\n"), 0o644); err != nil {
		return nil, err
	}
	for _, a := range Applets() {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "bin/" + a, Linkname: "busybox", Mode: 0o777, ModTime: epoch}); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeFile(tw *tar.Writer, name string, data []byte, mode int64) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: epoch}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// The `docker save` format, as much of it as `docker load` needs.
type manifestEntry struct {
	Config   string   `json:"Config"`
	RepoTags []string `json:"RepoTags"`
	Layers   []string `json:"Layers"`
}

type imageConfig struct {
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Created      time.Time       `json:"created"`
	Config       containerConfig `json:"config"`
	RootFS       rootFS          `json:"rootfs"`
	History      []history       `json:"history"`
}

type containerConfig struct {
	Env    []string          `json:"Env"`
	Cmd    []string          `json:"Cmd"`
	Labels map[string]string `json:"Labels"`
}

type rootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type history struct {
	Created   time.Time `json:"created"`
	CreatedBy string    `json:"created_by"`
}
