package openapi

import (
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
)

// CORS: pages of the configured origins may call the API with a bearer
// token (no cookies: the API never reads one, so no credentials mode).

const (
	corsAllowHeaders  = "Authorization, Content-Type, If-Match, Last-Event-ID"
	corsExposeHeaders = "X-Hf-Node, Retry-After"
	corsMaxAge        = "600"
)

// cors is the middleware of every route. It answers OPTIONS on every known
// path (gin has set Allow by then, the path's methods): 204 with the
// preflight headers for an allowed origin, 403 naming Origin for another.
func (s *Server) cors(c *gin.Context) {
	origin := c.GetHeader("Origin")
	allowed := origin != "" && s.originAllowed(origin)
	h := c.Writer.Header()
	if allowed {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
	}
	if c.Request.Method != http.MethodOptions || h.Get("Allow") == "" {
		c.Next()
		return
	}
	methods := h.Get("Allow") + ", " + http.MethodOptions
	h.Set("Allow", methods)
	if c.GetHeader("Access-Control-Request-Method") != "" {
		if !allowed {
			s.writeErr(c, forbidden("Origin", "origin %q may not call this API (allowed: %s; see api.cors_origins)",
				origin, s.originList()))
			return
		}
		h.Set("Access-Control-Allow-Methods", methods)
		h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
		h.Set("Access-Control-Max-Age", corsMaxAge)
	}
	c.AbortWithStatus(http.StatusNoContent)
}

func (s *Server) originAllowed(origin string) bool {
	return slices.Contains(s.cfg.CORSOrigins, "*") || slices.Contains(s.cfg.CORSOrigins, origin)
}

func (s *Server) originList() string {
	if len(s.cfg.CORSOrigins) == 0 {
		return "none"
	}
	return strings.Join(s.cfg.CORSOrigins, ", ")
}
