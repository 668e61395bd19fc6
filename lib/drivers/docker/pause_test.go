package docker

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// racingEngine is a proxy to the test engine that answers the first fail
// pause requests with message, as the engine answers when the runtime's
// freeze races the container's processes; pauses counts the requests.
type racingEngine struct {
	fail   atomic.Int32
	pauses atomic.Int32
	host   string // the driver's "host" for the proxy
}

func newRacingEngine(t *testing.T, fail int, message string) *racingEngine {
	t.Helper()
	e := &racingEngine{}
	e.fail.Store(int32(fail))
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker"
		},
		Transport: shared.cli.HTTPClient().Transport, // dials the engine's own address
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/pause") {
			e.pauses.Add(1)
			if e.fail.Add(-1) >= 0 {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				fmt.Fprintf(w, `{"message":%q}`, message)
				return
			}
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	e.host = "tcp://" + srv.Listener.Addr().String()
	return e
}

// TestPauseRetriesARacedFreeze: a pause the runtime could not freeze (it
// happens under load: CI saw "OCI runtime pause failed: unable to freeze")
// is tried again until it takes, a few times at most; any other error is
// returned at once.
func TestPauseRetriesARacedFreeze(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := f.driver(t, "node-a", "docker", nil)
	r := f.allocateShell(t, d, "busy", "trap 'exit 0' TERM; while :; do :; done")
	raced := "Cannot pause container " + r.ID + ": OCI runtime pause failed: unable to freeze: unknown"
	paused := func() bool { return f.inspect(t, r.ID).State.Paused }
	// The engine's view follows containerd's events, which can come after
	// the call that caused them returned (under load, a late "paused" event
	// showed a resumed container paused for a moment): wait for it.
	settles := func(t *testing.T, want bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); paused() != want; time.Sleep(50 * time.Millisecond) {
			require.True(t, time.Now().Before(deadline), "the engine still shows paused=%v", !want)
		}
	}

	t.Run("raced twice", func(t *testing.T) {
		e := newRacingEngine(t, 2, raced)
		via := f.driver(t, "node-a", "docker", map[string]any{"host": e.host})
		require.NoError(t, via.Pause(t.Context(), r))
		assert.EqualValues(t, 3, e.pauses.Load(), "two raced attempts, then the one that took")
		settles(t, true)
		require.NoError(t, via.Resume(t.Context(), r))
		settles(t, false)
	})
	t.Run("raced every time", func(t *testing.T) {
		e := newRacingEngine(t, 1000, raced)
		via := f.driver(t, "node-a", "docker", map[string]any{"host": e.host})
		start := time.Now()
		err := via.Pause(t.Context(), r)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "unable to freeze")
		assert.EqualValues(t, freezeAttempts, e.pauses.Load())
		assert.Less(t, time.Since(start), 5*time.Second, "gives up in a bounded time")
		assert.False(t, paused())
	})
	t.Run("another error", func(t *testing.T) {
		e := newRacingEngine(t, 1000, "Cannot pause container "+r.ID+": OCI runtime pause failed: permission denied")
		via := f.driver(t, "node-a", "docker", map[string]any{"host": e.host})
		err := via.Pause(t.Context(), r)
		require.Error(t, err)
		assert.Contains(t, err.Error(), "permission denied")
		assert.EqualValues(t, 1, e.pauses.Load(), "not tried again")
	})
	require.NoError(t, d.Deallocate(t.Context(), r))
	f.assertNothingLeft(t)
}
