package openapi

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/hf-fleet/hf/lib/types"
)

const apiPrefix = "/api/v1"

// routes registers every route. Each kind gets its own concrete routes, so the
// route list (and the test that compares it with openapi.yaml) names them all.
func (s *Server) routes(e *gin.Engine) {
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	// Load balancers and uptime monitors probe with HEAD as often as with
	// GET (HTTP requires HEAD wherever GET is served); net/http drops the
	// body of a HEAD answer.
	e.HEAD("/healthz", s.healthz)
	e.HEAD("/readyz", s.readyz)
	e.GET("/openapi.yaml", s.getSpec)
	e.GET("/metrics", s.metrics.handler)
	e.GET("/", s.dashboardIndex)
	e.GET("/ui/*file", s.dashboardAsset)

	api := e.Group(apiPrefix, s.authenticate, s.limitWrites, s.admitWrites, s.audit)
	api.GET("/whoami", s.whoami)
	api.GET("/audit", s.auditList)
	api.POST(clusterTokensPath, s.createJoinToken)
	api.POST(clusterJoinPath, s.join)
	api.GET(clusterKeysPath, s.listGossipKeys)
	api.POST(clusterKeysPath, s.changeGossipKeys)
	api.GET("/events", s.watchEvents)
	api.POST(streamTicketsPath, s.createStreamTicket)
	for _, kind := range types.Kinds() {
		k := kindRoutes{s: s, kind: kind}
		p := "/" + types.Plural(kind)
		api.GET(p, k.list)
		api.POST(p, k.create)
		api.GET(p+"/:name", k.get)
		api.PUT(p+"/:name", k.update)
		api.DELETE(p+"/:name", k.delete)
	}
	api.GET("/machines/:name/logs", s.machineLogs)
	api.GET("/machines/:name/shell", s.machineShell)
	api.POST("/nodes/:name/drain", s.drain)
	api.POST("/nodes/:name/undrain", s.undrain)
	api.POST("/sessions/:name/keepalive", s.keepalive)
}

// kindRoutes are the handlers of one kind's collection and items.
type kindRoutes struct {
	s    *Server
	kind string
}

func (s *Server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

func (s *Server) readyz(c *gin.Context) {
	if s.cfg.Ready != nil {
		if err := s.cfg.Ready(); err != nil {
			s.writeErr(c, newErr(http.StatusServiceUnavailable, CodeUnavailable, "", "not ready: %v", err))
			return
		}
	}
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

func (s *Server) whoami(c *gin.Context) {
	c.JSON(http.StatusOK, principal(c))
}
