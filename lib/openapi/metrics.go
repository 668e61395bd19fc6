package openapi

import (
	"errors"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// httpMetrics are the API's Prometheus metrics. Route is gin's route template
// ("/api/v1/machineclaims/:name"), so its cardinality is bounded.
type httpMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	streams  prometheus.Gauge
	handler  gin.HandlerFunc
}

func newHTTPMetrics(reg *prometheus.Registry) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "http_requests_total",
			Help: "HTTP requests served by the API, by method, route and status code.",
		}, []string{"method", "route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "http_request_duration_seconds",
			Help:    "Time to serve an API request (event streams: their whole life), by method and route.",
			Buckets: prometheus.DefBuckets,
		}, []string{"method", "route"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "http_event_streams",
			Help: "Server-sent event streams being served.",
		}),
	}
	var err error
	if m.requests, err = register(reg, m.requests); err != nil {
		return nil, err
	}
	if m.duration, err = register(reg, m.duration); err != nil {
		return nil, err
	}
	if m.streams, err = register(reg, m.streams); err != nil {
		return nil, err
	}
	m.handler = gin.WrapH(promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	return m, nil
}

// register registers c, or returns the collector already registered under its
// name (two servers sharing one registry share the metrics).
func register[C prometheus.Collector](reg *prometheus.Registry, c C) (C, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing, nil
			}
		}
		return c, err
	}
	return c, nil
}

// observe is the outermost middleware: it counts and times every request.
func (s *Server) observe(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	m := c.Request.Method
	switch m {
	case "GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS":
	default:
		m = "other"
	}
	s.metrics.requests.WithLabelValues(m, route, strconv.Itoa(c.Writer.Status())).Inc()
	s.metrics.duration.WithLabelValues(m, route).Observe(time.Since(start).Seconds())
}
