package openapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// keepalive extends a session: its owner (or an admin) says it is still in
// use. A session without keepalives for its timeout ends and its claim is
// released per its persistenceStrategy, or pauses (PauseOnEnd); a keepalive
// on a paused session resumes it. An ended session refuses keepalives.
func (s *Server) keepalive(c *gin.Context) {
	p := principal(c)
	name := c.Param("name")
	k := kindRoutes{s: s, kind: types.KindSession}
	if _, obj, err := k.load(p, name); err != nil {
		s.writeErr(c, err)
		return
	} else if !s.sight(p).sees(obj) {
		s.writeErr(c, notFound(types.KindSession, name))
		return
	}
	now := s.cfg.Now().UTC().Format(time.RFC3339Nano)
	sess, err := store.UpdateFacet(s.st, types.KindSession, name, types.FacetSpec, func(o *types.Session) error {
		if o.Status.Phase == types.SessionPhaseEnded {
			return errSessionEnded
		}
		if o.Metadata.Annotations == nil {
			o.Metadata.Annotations = map[string]string{}
		}
		o.Metadata.Annotations[types.AnnotationKeepalive] = now
		return nil
	})
	switch {
	case errors.Is(err, errSessionEnded):
		s.writeErr(c, newErr(http.StatusConflict, CodeConflict, "status.phase", "session %q has ended", name))
		return
	case errors.Is(err, store.ErrNotFound):
		s.writeErr(c, notFound(types.KindSession, name))
		return
	case err != nil:
		s.writeErr(c, err)
		return
	}
	// As every answer: a user does not get the session's access code back.
	data, err := present(p, store.Record{Kind: types.KindSession}, sess)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	c.Data(http.StatusOK, contentJSON, data)
}

var errSessionEnded = errors.New("session ended")
