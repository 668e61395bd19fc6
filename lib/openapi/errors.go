package openapi

import (
	"errors"
	"fmt"
	"net/http"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gin-gonic/gin"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Error codes of the {"error": {"code"}} body.
const (
	CodeBadRequest       = "bad_request"
	CodeInvalid          = "invalid"
	CodeUnauthorized     = "unauthorized"
	CodeForbidden        = "forbidden"
	CodeNotFound         = "not_found"
	CodeMethodNotAllowed = "method_not_allowed"
	CodeConflict         = "conflict"
	CodeTooLarge         = "too_large"
	CodeTimeout          = "timeout"
	CodeTooMany          = "too_many"
	CodeUnavailable      = "unavailable"
	CodeInternal         = "internal"
)

// Error is the body of every error response, under the "error" key.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
}

// ErrorBody is the JSON shape of an error response.
type ErrorBody struct {
	Error Error `json:"error"`
}

// apiError is an error that already knows its HTTP status; handlers return it and
// writeErr renders it.
type apiError struct {
	status int
	body   Error
	// retry, when positive, is the Retry-After of a 429 or 503, in seconds.
	retry int
}

// retryAfter sets the seconds the answer's Retry-After says.
func (e *apiError) retryAfter(secs int) *apiError {
	e.retry = secs
	return e
}

func (e *apiError) Error() string {
	if e.body.Field != "" {
		return e.body.Field + ": " + e.body.Message
	}
	return e.body.Message
}

func newErr(status int, code, field, format string, args ...any) *apiError {
	return &apiError{status: status, body: Error{Code: code, Field: field, Message: fmt.Sprintf(format, args...)}}
}

func badRequest(field, format string, args ...any) *apiError {
	return newErr(http.StatusBadRequest, CodeBadRequest, field, format, args...)
}

func forbidden(field, format string, args ...any) *apiError {
	return newErr(http.StatusForbidden, CodeForbidden, field, format, args...)
}

func notFound(kind, name string) *apiError {
	if len(name) > 100 {
		name = name[:100] + "..."
	}
	return newErr(http.StatusNotFound, CodeNotFound, "", "%s %q not found", kind, name)
}

// toAPIError maps any error to a status and body. This is the only place where
// errors of other packages become HTTP codes.
func toAPIError(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	var fe *types.FieldError
	if errors.As(err, &fe) {
		return newErr(http.StatusBadRequest, CodeInvalid, fe.Field, "%s", fe.Message)
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return newErr(http.StatusRequestEntityTooLarge, CodeTooLarge, "", "request body is larger than %d bytes", mbe.Limit)
	}
	switch {
	case errors.Is(err, store.ErrNotFound):
		return newErr(http.StatusNotFound, CodeNotFound, "", "%s", err.Error())
	case errors.Is(err, store.ErrExists):
		return newErr(http.StatusConflict, CodeConflict, "metadata.name", "%s", err.Error())
	case errors.Is(err, store.ErrConflict):
		return newErr(http.StatusConflict, CodeConflict, "metadata.version", "%s", err.Error())
	case errors.Is(err, store.ErrNotOwner):
		return newErr(http.StatusForbidden, CodeForbidden, "", "%s: that part of the object is written by the cluster, not through the API", err.Error())
	case errors.Is(err, store.ErrNoSpace):
		// The path and the figures are in the node's log, for its operator.
		return newErr(http.StatusInsufficientStorage, CodeUnavailable, "", "this node's disk is (nearly) full: it takes no new work until its operator frees space (its log says how much); another node of the cluster can take the request")
	case errors.Is(err, store.ErrClosed):
		return newErr(http.StatusServiceUnavailable, CodeUnavailable, "", "the store is closed: the node is shutting down")
	case errors.Is(err, types.ErrInvalid):
		return newErr(http.StatusBadRequest, CodeInvalid, "", "%s", err.Error())
	}
	return newErr(http.StatusInternalServerError, CodeInternal, "", "internal error")
}

// writeErr renders err; internal errors are logged with the request, never
// shown. A 503 is logged as a warning: it is a state (a node that cannot be
// reached, one not ready yet) any caller may ask about as often as it likes,
// not a fault of this node's. So is a 507 (the disk full): the store said so
// once, as an error, and every refused write would say it again.
func (s *Server) writeErr(c *gin.Context, err error) {
	ae := toAPIError(err)
	switch {
	case ae.status == http.StatusServiceUnavailable, ae.status == http.StatusInsufficientStorage:
		s.log.Warn("request failed", "method", c.Request.Method, "path", c.Request.URL.Path, "err", err)
	case ae.status >= http.StatusInternalServerError:
		s.log.Error("request failed", "method", c.Request.Method, "path", c.Request.URL.Path, "err", err)
	}
	if ae.status == http.StatusUnauthorized {
		c.Header("WWW-Authenticate", `Bearer realm="hf"`)
	}
	if ae.retry > 0 {
		c.Header("Retry-After", strconv.Itoa(ae.retry))
	}
	body := ae.body
	body.Message, body.Field = clipMessage(body.Message), clipMessage(body.Field)
	c.AbortWithStatusJSON(ae.status, ErrorBody{Error: body})
}

// maxMessage bounds the bytes of an error's message (and field) as sent: a
// message that quotes the request (a 1 MB spec.node) must not send it back
// whole.
const maxMessage = 1 << 10

// clipMessage is m cut to maxMessage bytes (at a character's start), saying
// how much was cut.
func clipMessage(m string) string {
	if len(m) <= maxMessage {
		return m
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(m[cut]) {
		cut--
	}
	return fmt.Sprintf("%s... (%d bytes more)", m[:cut], len(m)-cut)
}

// recovered turns a panic into a logged 500 with code internal.
func (s *Server) recovered(c *gin.Context, rec any) {
	s.log.Error("handler panic", "method", c.Request.Method, "path", c.Request.URL.Path,
		"panic", fmt.Sprint(rec), "stack", string(debug.Stack()))
	c.AbortWithStatusJSON(http.StatusInternalServerError,
		ErrorBody{Error: Error{Code: CodeInternal, Message: "internal error"}})
}

// noRoute answers paths that name no route, listing the kinds for /api paths.
func (s *Server) noRoute(c *gin.Context) {
	p := c.Request.URL.Path
	if strings.HasPrefix(p, apiPrefix+"/") {
		plural, _, _ := strings.Cut(strings.TrimPrefix(p, apiPrefix+"/"), "/")
		if slices.Contains(pluralList(), plural) {
			// A known kind with a path no route has: most often a name
			// with a '/' in it (a selector typed as a name, escaped or not).
			s.writeErr(c, newErr(http.StatusNotFound, CodeNotFound, "", "no route for %s: a name is one path segment of lower-case letters, digits and '-'", p))
			return
		}
		s.writeErr(c, newErr(http.StatusNotFound, CodeNotFound, "", "unknown resource %q; kinds are %s",
			plural, strings.Join(pluralList(), ", ")))
		return
	}
	s.writeErr(c, newErr(http.StatusNotFound, CodeNotFound, "", "no route for %s", p))
}

// noMethod answers a known path with a method it does not serve (gin sets Allow).
func (s *Server) noMethod(c *gin.Context) {
	s.writeErr(c, newErr(http.StatusMethodNotAllowed, CodeMethodNotAllowed, "",
		"method %s not allowed; allowed: %s", c.Request.Method, c.Writer.Header().Get("Allow")))
}

func pluralList() []string {
	out := make([]string, 0, len(types.Kinds()))
	for _, k := range types.Kinds() {
		out = append(out, types.Plural(k))
	}
	return out
}
