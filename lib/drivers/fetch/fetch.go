// Package fetch is the download cache the local drivers share for images: a file
// is fetched over HTTP(S) once, checked against its sha256 and kept in a cache
// directory under its digest, so every later Get is a lookup without network.
//
// A download goes to a temporary file in the cache directory and is renamed to
// its final name only after the digest matched: a failed, cancelled, truncated
// or corrupt download is never used, and nothing of it is left behind.
package fetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// ErrStatus is wrapped by the error of a download the server answered with
// anything but 200 OK.
var ErrStatus = errors.New("unexpected http status")

// ErrTruncated is wrapped by the error of a download that ended before the
// server's Content-Length (or that the connection cut short).
var ErrTruncated = errors.New("truncated download")

// ErrMismatch is wrapped by the error of a download whose sha256 is not the one
// asked for.
var ErrMismatch = errors.New("sha256 mismatch")

// ErrStalled is wrapped by the error of a download that received nothing for
// too long.
var ErrStalled = errors.New("download stalled")

const (
	// filePrefix names a verified file: "sha256-<hex>".
	filePrefix = "sha256-"
	// partialPrefix names a download in progress; New removes stale ones.
	partialPrefix = ".partial-"
	// staleAfter is how old (since its last write) a partial file must be before
	// New removes it: an active download writes far more often, so a second
	// Fetcher on the same directory never removes a live one.
	staleAfter = time.Hour
	// defaultStall is how long a download may receive nothing before it fails.
	defaultStall = 2 * time.Minute
)

// Config configures a Fetcher.
type Config struct {
	// CacheDir is where verified downloads live, one file per sha256. It is
	// created (0700) when missing. Required.
	CacheDir string
	// User and Password, when User is set, are sent as HTTP basic auth.
	User, Password string
	// Client makes the requests; nil means a client with sane timeouts (connect
	// 30s, TLS handshake 10s, response headers 60s, no limit on the body).
	Client *http.Client
}

// Fetcher downloads files into its cache. It is safe for concurrent use; it
// starts no goroutine that outlives a Get, so it needs no Close.
type Fetcher struct {
	cfg    Config
	client *http.Client
	log    *slog.Logger
	// stall is how long a body read may make no progress; tests shorten it.
	stall time.Duration

	mu    sync.Mutex
	calls map[string]*call // by hex digest: the download in flight
}

// call is one download shared by every Get of the same digest.
type call struct {
	done    chan struct{} // closed when the download ended; path/err are set then
	path    string
	err     error
	waiters int                // Gets waiting for it; guarded by Fetcher.mu
	cancel  context.CancelFunc // stops the download when the last waiter leaves
}

// New returns a Fetcher on cfg.CacheDir, creating the directory and removing
// partial downloads a crashed process left there.
func New(cfg Config, log *slog.Logger) (*Fetcher, error) {
	if cfg.CacheDir == "" {
		return nil, errors.New("new fetcher: empty cache dir")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("new fetcher: cache dir: %w", err)
	}
	client := cfg.Client
	if client == nil {
		client = defaultClient()
	}
	f := &Fetcher{cfg: cfg, client: client, log: log, stall: defaultStall, calls: map[string]*call{}}
	f.removeStale(time.Now())
	return f, nil
}

func defaultClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = 10 * time.Second
	tr.ResponseHeaderTimeout = 60 * time.Second
	// No overall timeout: images are large; a stalled body is caught by the
	// stall timer and the caller's context.
	return &http.Client{Transport: tr}
}

// removeStale deletes partial downloads not written to for staleAfter.
func (f *Fetcher) removeStale(now time.Time) {
	entries, err := os.ReadDir(f.cfg.CacheDir)
	if err != nil {
		f.log.Warn("read cache dir", "dir", f.cfg.CacheDir, "err", err)
		return
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), partialPrefix) {
			continue
		}
		info, err := e.Info()
		if err != nil || now.Sub(info.ModTime()) < staleAfter {
			continue
		}
		path := filepath.Join(f.cfg.CacheDir, e.Name())
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			f.log.Warn("remove stale partial download", "path", path, "err", err)
		}
	}
}

// ParseSum checks a checksum written "sha256:<64 hex digits>" and returns the
// digits in lower case. Errors wrap types.ErrInvalid.
func ParseSum(sum string) (string, error) {
	algo, digits, ok := strings.Cut(sum, ":")
	if !ok {
		return "", types.Invalid("", "want \"sha256:<64 hex digits>\", got %q", sum)
	}
	if algo != "sha256" {
		return "", types.Invalid("", "unsupported checksum algorithm %q (want sha256)", algo)
	}
	if len(digits) != sha256.Size*2 {
		return "", types.Invalid("", "sha256 needs 64 hex digits, got %d", len(digits))
	}
	if _, err := hex.DecodeString(digits); err != nil {
		return "", types.Invalid("", "sha256 is not hexadecimal: %q", digits)
	}
	return strings.ToLower(digits), nil
}

// checkURL accepts absolute http and https URLs only.
func checkURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, types.Invalid("", "not a valid URL: %v", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, types.Invalid("", "want an http or https URL, got %q", u.Redacted())
	}
	if u.Host == "" {
		return nil, types.Invalid("", "URL %q has no host", u.Redacted())
	}
	return u, nil
}

// path returns where the verified file for hex digest digits lives (or will).
func (f *Fetcher) path(digits string) string {
	return filepath.Join(f.cfg.CacheDir, filePrefix+digits)
}

// Get returns the path of the cached file whose sha256 is sum ("sha256:<hex>"),
// downloading it from rawURL first when it is not cached yet. Concurrent Gets
// of the same sum share one download; a Get whose ctx ends returns at once with
// ctx's error, and the shared download stops when no Get waits for it any more.
func (f *Fetcher) Get(ctx context.Context, rawURL, sum string) (string, error) {
	digits, err := ParseSum(sum)
	if err != nil {
		return "", fmt.Errorf("download %s: sum: %w", redact(rawURL), err)
	}
	u, err := checkURL(rawURL)
	if err != nil {
		return "", fmt.Errorf("download: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("download %s: %w", u.Redacted(), err)
	}
	path := f.path(digits)
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		return path, nil
	}

	f.mu.Lock()
	c, ok := f.calls[digits]
	if !ok {
		// The download must not die with the first caller's ctx while others
		// wait, so it gets a context of its own that the last leaver cancels.
		dctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c = &call{done: make(chan struct{}), cancel: cancel}
		f.calls[digits] = c
		go f.run(dctx, c, u, digits)
	}
	c.waiters++
	f.mu.Unlock()

	select {
	case <-c.done:
		f.mu.Lock()
		c.waiters--
		f.mu.Unlock()
		return c.path, c.err
	case <-ctx.Done():
		f.mu.Lock()
		c.waiters--
		last := c.waiters == 0
		if last {
			c.cancel()
			// A Get arriving from now on starts afresh instead of joining a
			// download that is being torn down.
			if f.calls[digits] == c {
				delete(f.calls, digits)
			}
		}
		f.mu.Unlock()
		if last {
			<-c.done // the temp file is gone once done is closed
		}
		return "", fmt.Errorf("download %s: %w", u.Redacted(), ctx.Err())
	}
}

// run performs the download of c and publishes its result.
func (f *Fetcher) run(ctx context.Context, c *call, u *url.URL, digits string) {
	defer close(c.done)
	defer c.cancel()
	c.path, c.err = f.download(ctx, u, digits)
	f.mu.Lock()
	if f.calls[digits] == c {
		delete(f.calls, digits)
	}
	f.mu.Unlock()
}

// download fetches u into a temp file, verifies it and renames it into place.
func (f *Fetcher) download(ctx context.Context, u *url.URL, digits string) (_ string, err error) {
	path := f.path(digits)
	// Another Fetcher (or an earlier call) may have finished in the meantime.
	if st, err := os.Stat(path); err == nil && st.Mode().IsRegular() {
		return path, nil
	}
	where := u.Redacted()
	start := time.Now()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("download %s: %w", where, err)
	}
	if f.cfg.User != "" {
		req.SetBasicAuth(f.cfg.User, f.cfg.Password)
	}
	resp, err := f.client.Do(req)
	if err != nil {
		return "", fmt.Errorf("download %s: %w", where, cause(ctx, err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("download %s: %s: %w", where, resp.Status, ErrStatus)
	}

	tmp, err := os.CreateTemp(f.cfg.CacheDir, partialPrefix+digits+"-*")
	if err != nil {
		return "", fmt.Errorf("download %s: %w", where, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	h := sha256.New()
	body := &stallReader{r: resp.Body, timer: time.AfterFunc(f.stall, func() {
		cancel(fmt.Errorf("%w: nothing received for %s", ErrStalled, f.stall))
	}), stall: f.stall}
	n, err := io.Copy(io.MultiWriter(tmp, h), body)
	body.timer.Stop()
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return "", fmt.Errorf("download %s: %w: got %d of %d bytes: %w", where, ErrTruncated, n, resp.ContentLength, err)
		}
		return "", fmt.Errorf("download %s: after %d bytes: %w", where, n, cause(ctx, err))
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return "", fmt.Errorf("download %s: %w: got %d of %d bytes", where, ErrTruncated, n, resp.ContentLength)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != digits {
		return "", fmt.Errorf("download %s: %w: want %s, got %s", where, ErrMismatch, digits, got)
	}
	// The file is trusted without a second check from now on, so it must be
	// on disk before its name says it is complete.
	if err = tmp.Sync(); err != nil {
		return "", fmt.Errorf("download %s: sync: %w", where, err)
	}
	if err = tmp.Chmod(0o600); err != nil {
		return "", fmt.Errorf("download %s: %w", where, err)
	}
	if err = tmp.Close(); err != nil {
		return "", fmt.Errorf("download %s: %w", where, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("download %s: %w", where, err)
	}
	f.log.Info("image downloaded", "url", where, "sha256", digits, "bytes", n,
		"took", time.Since(start).Round(time.Millisecond))
	return path, nil
}

// cause returns the reason the download context was cancelled (the stall
// timer's error) when it was, else err.
func cause(ctx context.Context, err error) error {
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		return c
	}
	return err
}

// redact hides the password of a URL for messages, whatever the URL is.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	return u.Redacted()
}

// stallReader restarts its timer on every read that returns data.
type stallReader struct {
	r     io.Reader
	timer *time.Timer
	stall time.Duration
}

func (s *stallReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.timer.Reset(s.stall)
	}
	return n, err
}
