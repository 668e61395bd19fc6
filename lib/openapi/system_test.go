package openapi

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestSystemEndpoints(t *testing.T) {
	var notReady atomic.Bool
	reg := prometheus.NewRegistry()
	e := newTestEnv(t, func(c *Config) {
		c.Metrics = reg
		c.Ready = func() error {
			if notReady.Load() {
				return errors.New("joining the cluster")
			}
			return nil
		}
	})

	t.Run("healthz needs no token", func(t *testing.T) {
		r := e.do("GET", "/healthz", "", nil)
		require.Equal(t, 200, r.code)
		assert.Equal(t, map[string]any{"status": "ok"}, r.obj(t))
		assert.Equal(t, "n1", r.header.Get("X-Hf-Node"))
	})
	t.Run("readyz follows Config.Ready", func(t *testing.T) {
		assert.Equal(t, 200, e.do("GET", "/readyz", "", nil).code)
		notReady.Store(true)
		r := e.do("GET", "/readyz", "", nil)
		require.Equal(t, http.StatusServiceUnavailable, r.code)
		eb := r.errBody(t)
		assert.Equal(t, CodeUnavailable, eb.Code)
		assert.Contains(t, eb.Message, "joining the cluster")
		assert.Contains(t, e.logs.String(), `level=WARN msg="request failed"`)
		assert.NotContains(t, e.logs.String(), "level=ERROR", "an unready node is no error of its own, however often it is asked")
		notReady.Store(false)
		assert.Equal(t, 200, e.do("GET", "/readyz", "", nil).code)
	})
	t.Run("healthz and readyz answer HEAD as GET, without the body", func(t *testing.T) {
		// Load balancers and monitors probe with HEAD; it was a 405.
		r := e.do("HEAD", "/healthz", "", nil)
		assert.Equal(t, 200, r.code)
		assert.Empty(t, r.body)
		assert.Equal(t, 200, e.do("HEAD", "/readyz", "", nil).code)
		notReady.Store(true)
		r = e.do("HEAD", "/readyz", "", nil)
		assert.Equal(t, http.StatusServiceUnavailable, r.code)
		assert.Empty(t, r.body)
		notReady.Store(false)
	})
	t.Run("openapi.yaml is the embedded document", func(t *testing.T) {
		r := e.do("GET", "/openapi.yaml", "", nil)
		require.Equal(t, 200, r.code)
		assert.Equal(t, specYAML, r.body)
		assert.Equal(t, Spec(), r.body)
		assert.Contains(t, r.header.Get("Content-Type"), "yaml")
	})
	t.Run("metrics count requests by route and code", func(t *testing.T) {
		e.do("GET", path(types.KindNode), adminTok, nil)
		e.do("GET", path(types.KindNode, "missing"), adminTok, nil)
		e.do("GET", "/api/v1/gizmos", adminTok, nil)
		r := e.do("GET", "/metrics", "", nil)
		require.Equal(t, 200, r.code)
		body := string(r.body)
		assert.Contains(t, body, `http_requests_total{code="200",method="GET",route="/api/v1/nodes"} 1`)
		assert.Contains(t, body, `http_requests_total{code="404",method="GET",route="/api/v1/nodes/:name"} 1`)
		assert.Contains(t, body, `http_requests_total{code="404",method="GET",route="unmatched"}`)
		assert.Contains(t, body, `http_request_duration_seconds_bucket{method="GET",route="/api/v1/nodes"`)
		assert.Contains(t, body, "http_event_streams 0")
		n, err := reg.Gather()
		require.NoError(t, err)
		assert.NotEmpty(t, n, "the given registry holds the metrics")
	})
	t.Run("a second server may share the registry", func(t *testing.T) {
		_, err := New(Config{AdminToken: "x", Metrics: reg}, nil, e.st)
		require.NoError(t, err)
	})
	t.Run("default registry has go metrics", func(t *testing.T) {
		e2 := newTestEnv(t)
		r := e2.do("GET", "/metrics", "", nil)
		assert.True(t, strings.Contains(string(r.body), "go_goroutines"))
	})
}
