package openapi

import (
	_ "embed"
	"net/http"

	"github.com/gin-gonic/gin"
)

// specYAML is the OpenAPI 3.0.3 document of this API; tests check the handlers and
// the routes against it.
//
//go:embed openapi.yaml
var specYAML []byte

// Spec returns the OpenAPI document (YAML) the server serves at /openapi.yaml.
func Spec() []byte { return append([]byte(nil), specYAML...) }

func (s *Server) getSpec(c *gin.Context) {
	c.Data(http.StatusOK, "application/yaml", specYAML)
}
