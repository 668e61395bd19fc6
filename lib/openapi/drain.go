package openapi

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// drain and undrain set a node's maintenance flag: a draining node takes no new
// placements, and its machines stay until their claims are released. Admin only.
func (s *Server) drain(c *gin.Context)   { s.setMaintenance(c, true) }
func (s *Server) undrain(c *gin.Context) { s.setMaintenance(c, false) }

func (s *Server) setMaintenance(c *gin.Context, on bool) {
	p := principal(c)
	if !p.Staff() {
		s.writeErr(c, forbidden("", "role %s may not drain nodes", p.Role))
		return
	}
	name := c.Param("name")
	if types.ValidateName("name", name) != nil {
		s.writeErr(c, notFound(types.KindNode, name))
		return
	}
	node, err := store.UpdateFacet(s.st, types.KindNode, name, types.FacetMaintenance, func(n *types.Node) error {
		if n.Spec.Maintenance == on {
			return store.ErrNoChange
		}
		n.Spec.Maintenance = on
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		s.writeErr(c, notFound(types.KindNode, name))
		return
	}
	if err != nil {
		s.writeErr(c, err)
		return
	}
	c.JSON(http.StatusOK, node)
}
