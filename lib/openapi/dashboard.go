package openapi

import (
	"embed"
	"io/fs"
	"mime"
	"net/http"
	pathpkg "path"
	"strings"

	"github.com/gin-gonic/gin"
)

// The web dashboard: static files embedded in the binary, a page of plain
// JavaScript that signs in with a token and calls this API (same origin,
// so it needs no CORS). Everything it shows, the API decides: a user's
// page holds the user's claims and machines because the API sends no other.

//go:embed dashboard
var dashboardFiles embed.FS

// dashboardHeaders keep the page to its own scripts and this origin, and
// keep stream tickets in URLs out of Referer headers.
func dashboardHeaders(c *gin.Context) {
	h := c.Writer.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-cache")
}

func (s *Server) dashboardIndex(c *gin.Context) {
	s.serveDashboardFile(c, "index.html")
}

func (s *Server) dashboardAsset(c *gin.Context) {
	s.serveDashboardFile(c, strings.TrimPrefix(c.Param("file"), "/"))
}

func (s *Server) serveDashboardFile(c *gin.Context, name string) {
	data, err := fs.ReadFile(dashboardFiles, pathpkg.Join("dashboard", pathpkg.Clean("/"+name)))
	if err != nil || name == "" {
		s.writeErr(c, newErr(http.StatusNotFound, CodeNotFound, "", "no dashboard file %q", name))
		return
	}
	dashboardHeaders(c)
	ct := mime.TypeByExtension(pathpkg.Ext(name))
	if ct == "" {
		ct = "application/octet-stream"
	}
	c.Data(http.StatusOK, ct, data)
}
