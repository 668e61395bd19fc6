package native

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
	"github.com/ulikunitz/xz"

	"github.com/hf-fleet/hf/lib/types"
)

// tarEntry is one entry of a test archive.
type tarEntry struct {
	Name     string
	Body     string
	Mode     int64
	Type     byte // tar.TypeReg when 0
	Linkname string
}

// makeTar builds a tar archive from entries.
func makeTar(t testing.TB, entries ...tarEntry) []byte {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, e := range entries {
		h := &tar.Header{Name: e.Name, Mode: e.Mode, Typeflag: e.Type, Linkname: e.Linkname,
			ModTime: time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
			if h.Typeflag == tar.TypeDir {
				h.Mode = 0o755
			}
		}
		if h.Typeflag == tar.TypeReg {
			h.Size = int64(len(e.Body))
		}
		require.NoError(t, tw.WriteHeader(h))
		if h.Typeflag == tar.TypeReg {
			_, err := tw.Write([]byte(e.Body))
			require.NoError(t, err)
		}
	}
	require.NoError(t, tw.Close())
	return b.Bytes()
}

// compress compresses data with format ("tar" leaves it as is).
func compress(t testing.TB, format string, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	switch format {
	case "tar":
		return data
	case "gzip":
		w := gzip.NewWriter(&b)
		_, err := w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	case "xz":
		w, err := xz.NewWriter(&b)
		require.NoError(t, err)
		_, err = w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	case "zstd":
		w, err := zstd.NewWriter(&b)
		require.NoError(t, err)
		_, err = w.Write(data)
		require.NoError(t, err)
		require.NoError(t, w.Close())
	default:
		t.Fatalf("unknown format %q", format)
	}
	return b.Bytes()
}

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// imageServer serves files by path on 127.0.0.1 and counts requests per path.
type imageServer struct {
	*httptest.Server
	mu       sync.Mutex
	files    map[string][]byte
	requests map[string]int
	total    atomic.Int64
}

func newImageServer(t *testing.T) *imageServer {
	t.Helper()
	s := &imageServer{files: map[string][]byte{}, requests: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.total.Add(1)
		s.mu.Lock()
		s.requests[r.URL.Path]++
		body, ok := s.files[r.URL.Path]
		s.mu.Unlock()
		switch {
		case strings.HasPrefix(r.URL.Path, "/truncated/"):
			w.Header().Set("Content-Length", "100000")
			_, _ = w.Write(body)
			rc := http.NewResponseController(w)
			_ = rc.Flush()
			if conn, _, err := rc.Hijack(); err == nil {
				_ = conn.Close()
			}
		case !ok:
			http.NotFound(w, r)
		default:
			_, _ = w.Write(body)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// add serves data at path and returns its URL and sum.
func (s *imageServer) add(path string, data []byte) (string, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.files[path] = data
	return s.URL + path, sumOf(data)
}

func (s *imageServer) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[path]
}

// machineTemplate builds a machine template with the given native options.
func machineTemplate(name string, tc TemplateConfig) types.MachineTemplate {
	raw, err := json.Marshal(tc)
	if err != nil {
		panic(err)
	}
	return types.MachineTemplate{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate},
		Metadata: types.ObjectMeta{Name: name},
		Spec: types.MachineTemplateSpec{
			Resources:             types.Resources{CPU: 1, RAMGB: 1, DiskGB: 1},
			ProviderConfiguration: map[string]json.RawMessage{Type: raw},
			ClaimMetadata:         []types.MetadataKey{{Name: "claim"}, {Name: "shout", Pattern: "[a-z ;#>/]*"}},
		},
	}
}

// needRoot skips a test that makes users when not root, except in CI
// (CI=true), where such a test must run and so fails instead.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("this test makes users and needs root; CI=true, so it must not be skipped: run the native driver tests as root")
	}
	t.Skip("needs root (makes users and runs processes as them); run as root, or with CI=true to turn this skip into a failure")
}
