package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

var payload = []byte("an image, or something that stands for one\n")

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// server serves h on 127.0.0.1 and counts requests.
type server struct {
	*httptest.Server
	requests atomic.Int64
}

func serve(t *testing.T, h http.HandlerFunc) *server {
	t.Helper()
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func servePayload(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
	_, _ = w.Write(payload)
}

func newFetcher(t *testing.T, dir string, cfg Config) *Fetcher {
	t.Helper()
	cfg.CacheDir = dir
	f, err := New(cfg, nil)
	require.NoError(t, err)
	return f
}

// entries lists the names in dir.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	require.NoError(t, err)
	names := []string{}
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

func TestParseSum(t *testing.T) {
	good := "sha256:" + hex.EncodeToString(make([]byte, 32))
	for _, tc := range []struct {
		name, sum, want, err string
	}{
		{"lower", good, good[7:], ""},
		{"upper is lowered", "sha256:" + "AB" + good[9:], "ab" + good[9:], ""},
		{"no algorithm", good[7:], "", `want "sha256:<64 hex digits>"`},
		{"md5", "md5:" + good[7:], "", `unsupported checksum algorithm "md5"`},
		{"short", "sha256:abc", "", "needs 64 hex digits, got 3"},
		{"not hex", "sha256:" + "zz" + good[9:], "", "not hexadecimal"},
		{"empty", "", "", "want"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSum(tc.sum)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				assert.ErrorIs(t, err, types.ErrInvalid)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestGetCachesTheFile(t *testing.T) {
	dir := t.TempDir()
	s := serve(t, servePayload)
	f := newFetcher(t, dir, Config{})

	path, err := f.Get(t.Context(), s.URL+"/img.tar", sumOf(payload))
	require.NoError(t, err)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, payload, got)
	assert.Equal(t, filepath.Join(dir, "sha256-"+sumOf(payload)[7:]), path)
	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())

	again, err := f.Get(t.Context(), s.URL+"/other-name.tar", sumOf(payload))
	require.NoError(t, err)
	assert.Equal(t, path, again)
	assert.EqualValues(t, 1, s.requests.Load(), "a cached file is not downloaded again")

	// A new Fetcher on the same directory uses the cache without any network:
	// the server is gone.
	s.Close()
	restarted := newFetcher(t, dir, Config{})
	again, err = restarted.Get(t.Context(), s.URL+"/img.tar", sumOf(payload))
	require.NoError(t, err)
	assert.Equal(t, path, again)
	assert.EqualValues(t, 1, s.requests.Load())
	assert.Equal(t, []string{filepath.Base(path)}, entries(t, dir))
}

func TestConcurrentGetsShareOneDownload(t *testing.T) {
	release := make(chan struct{})
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		servePayload(w, r)
	})
	f := newFetcher(t, t.TempDir(), Config{})
	digits := sumOf(payload)[7:]

	const n = 10
	paths := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { paths[i], errs[i] = f.Get(t.Context(), s.URL+"/img", sumOf(payload)) })
	}
	// Release the server only once every Get has joined the download.
	require.Eventually(t, func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		c := f.calls[digits]
		return c != nil && c.waiters == n
	}, 10*time.Second, 5*time.Millisecond)
	close(release)
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		assert.Equal(t, paths[0], paths[i])
	}
	assert.EqualValues(t, 1, s.requests.Load(), "10 concurrent Gets make one request")
}

func TestFailedDownloads(t *testing.T) {
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		sum     string
		want    []string
		is      error
	}{
		{
			name:    "not found",
			handler: http.NotFound,
			sum:     sumOf(payload),
			want:    []string{"404 Not Found"},
			is:      ErrStatus,
		},
		{
			name:    "server error",
			handler: func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) },
			sum:     sumOf(payload),
			want:    []string{"502 Bad Gateway"},
			is:      ErrStatus,
		},
		{
			name:    "wrong sum",
			handler: servePayload,
			sum:     sumOf([]byte("something else")),
			want:    []string{"sha256 mismatch: want " + sumOf([]byte("something else"))[7:] + ", got " + sumOf(payload)[7:]},
			is:      ErrMismatch,
		},
		{
			name: "truncated body",
			handler: func(w http.ResponseWriter, _ *http.Request) {
				// Promise more than is sent, then drop the connection.
				w.Header().Set("Content-Length", strconv.Itoa(len(payload)+100))
				_, _ = w.Write(payload)
				rc := http.NewResponseController(w)
				_ = rc.Flush()
				conn, _, err := rc.Hijack()
				if err == nil {
					_ = conn.Close()
				}
			},
			sum:  sumOf(payload),
			want: []string{"truncated download", "got 43 of 143 bytes"},
			is:   ErrTruncated,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := serve(t, tc.handler)
			f := newFetcher(t, dir, Config{})
			path, err := f.Get(t.Context(), s.URL+"/img.tar.gz", tc.sum)
			require.Error(t, err)
			assert.Empty(t, path)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Contains(t, err.Error(), "download "+s.URL+"/img.tar.gz: ")
			assert.ErrorIs(t, err, tc.is)
			assert.Empty(t, entries(t, dir), "nothing partial is left in the cache dir")

			// A failure is not cached: the next Get asks the server again.
			_, err = f.Get(t.Context(), s.URL+"/img.tar.gz", tc.sum)
			require.Error(t, err)
			assert.EqualValues(t, 2, s.requests.Load())
		})
	}
}

func TestBasicAuth(t *testing.T) {
	s := serve(t, func(w http.ResponseWriter, r *http.Request) {
		user, pass, ok := r.BasicAuth()
		if !ok || user != "bob" || pass != "s3cret" {
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		servePayload(w, r)
	})
	t.Run("credentials are sent", func(t *testing.T) {
		f := newFetcher(t, t.TempDir(), Config{User: "bob", Password: "s3cret"})
		_, err := f.Get(t.Context(), s.URL+"/img", sumOf(payload))
		require.NoError(t, err)
	})
	t.Run("without credentials the server refuses", func(t *testing.T) {
		f := newFetcher(t, t.TempDir(), Config{})
		_, err := f.Get(t.Context(), s.URL+"/img", sumOf(payload))
		require.ErrorIs(t, err, ErrStatus)
		assert.Contains(t, err.Error(), "401 Unauthorized")
	})
	t.Run("a password in the URL is not shown", func(t *testing.T) {
		f := newFetcher(t, t.TempDir(), Config{})
		u := "http://bob:s3cret@" + s.Listener.Addr().String() + "/img"
		_, err := f.Get(t.Context(), u, sumOf([]byte("x")))
		require.ErrorIs(t, err, ErrMismatch)
		assert.NotContains(t, err.Error(), "s3cret")
	})
}

// hangingServer sends part of the body and then waits for the client to leave.
func hangingServer(t *testing.T, started chan<- struct{}) *server {
	return serve(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(payload)))
		_, _ = w.Write(payload[:10])
		_ = http.NewResponseController(w).Flush()
		if started != nil {
			started <- struct{}{}
		}
		<-r.Context().Done()
	})
}

func TestCancel(t *testing.T) {
	t.Run("cancelled before the call", func(t *testing.T) {
		s := serve(t, servePayload)
		f := newFetcher(t, t.TempDir(), Config{})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := f.Get(ctx, s.URL+"/img", sumOf(payload))
		require.ErrorIs(t, err, context.Canceled)
		assert.EqualValues(t, 0, s.requests.Load())
	})
	t.Run("cancelled during the download", func(t *testing.T) {
		started := make(chan struct{}, 1)
		s := hangingServer(t, started)
		dir := t.TempDir()
		f := newFetcher(t, dir, Config{})
		ctx, cancel := context.WithCancel(t.Context())
		go func() {
			<-started
			cancel()
		}()
		_, err := f.Get(ctx, s.URL+"/img", sumOf(payload))
		require.ErrorIs(t, err, context.Canceled)
		assert.Empty(t, entries(t, dir), "the partial file is removed before Get returns")
	})
	t.Run("one waiter leaving does not stop the others", func(t *testing.T) {
		release := make(chan struct{})
		s := serve(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
				return
			}
			servePayload(w, r)
		})
		f := newFetcher(t, t.TempDir(), Config{})
		digits := sumOf(payload)[7:]
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		var leaverErr, stayerErr error
		wg.Go(func() { _, leaverErr = f.Get(ctx, s.URL+"/img", sumOf(payload)) })
		wg.Go(func() { _, stayerErr = f.Get(t.Context(), s.URL+"/img", sumOf(payload)) })
		waiters := func(n int) func() bool {
			return func() bool {
				f.mu.Lock()
				defer f.mu.Unlock()
				c := f.calls[digits]
				return c != nil && c.waiters == n
			}
		}
		require.Eventually(t, waiters(2), 10*time.Second, 5*time.Millisecond)
		cancel()
		require.Eventually(t, waiters(1), 10*time.Second, 5*time.Millisecond)
		close(release)
		wg.Wait()
		assert.ErrorIs(t, leaverErr, context.Canceled)
		assert.NoError(t, stayerErr)
		assert.EqualValues(t, 1, s.requests.Load())
	})
	t.Run("a stalled download fails", func(t *testing.T) {
		s := hangingServer(t, nil)
		dir := t.TempDir()
		f := newFetcher(t, dir, Config{})
		f.stall = 100 * time.Millisecond
		_, err := f.Get(t.Context(), s.URL+"/img", sumOf(payload))
		require.ErrorIs(t, err, ErrStalled)
		assert.Contains(t, err.Error(), "nothing received for 100ms")
		assert.Empty(t, entries(t, dir))
	})
}

func TestBadInput(t *testing.T) {
	f := newFetcher(t, t.TempDir(), Config{})
	for _, tc := range []struct {
		name, url, sum, want string
	}{
		{"bad sum", "http://127.0.0.1:1/img", "sha256:nope", "sum: sha256 needs 64 hex digits"},
		{"ftp", "ftp://127.0.0.1/img", sumOf(payload), `want an http or https URL, got "ftp://127.0.0.1/img"`},
		{"relative", "/img", sumOf(payload), "want an http or https URL"},
		{"no host", "http:///img", sumOf(payload), "has no host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := f.Get(t.Context(), tc.url, tc.sum)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.ErrorIs(t, err, types.ErrInvalid)
		})
	}
	_, err := New(Config{}, nil)
	assert.ErrorContains(t, err, "empty cache dir")
}

func TestNewRemovesStalePartials(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, partialPrefix+"abc-1")
	fresh := filepath.Join(dir, partialPrefix+"abc-2")
	other := filepath.Join(dir, "sha256-abc")
	for _, p := range []string{stale, fresh, other} {
		require.NoError(t, os.WriteFile(p, []byte("x"), 0o600))
	}
	old := time.Now().Add(-2 * staleAfter)
	require.NoError(t, os.Chtimes(stale, old, old))
	require.NoError(t, os.Chtimes(other, old, old))
	newFetcher(t, dir, Config{})
	assert.ElementsMatch(t, []string{filepath.Base(fresh), filepath.Base(other)}, entries(t, dir))
}

func TestErrorsAreDistinct(t *testing.T) {
	all := []error{ErrStatus, ErrTruncated, ErrMismatch, ErrStalled}
	for i, a := range all {
		for j, b := range all {
			assert.Equal(t, i == j, errors.Is(a, b))
		}
	}
}
