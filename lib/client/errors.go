package client

import (
	"errors"
	"net/http"
	"strings"
)

// Error codes the API puts in {"error":{"code":...}}.
const (
	CodeBadRequest   = "bad_request"
	CodeInvalid      = "invalid"
	CodeUnauthorized = "unauthorized"
	CodeForbidden    = "forbidden"
	CodeNotFound     = "not_found"
	CodeConflict     = "conflict"
	CodeTooLarge     = "too_large"
	CodeInternal     = "internal"
)

// Sentinel errors an *APIError matches with errors.Is, by its code.
var (
	ErrNotFound     = errors.New(CodeNotFound)
	ErrConflict     = errors.New(CodeConflict)
	ErrUnauthorized = errors.New(CodeUnauthorized)
	ErrForbidden    = errors.New(CodeForbidden)
	ErrInvalid      = errors.New(CodeInvalid)
)

// ErrUnknownKind is returned for a kind name lib/types does not know.
var ErrUnknownKind = errors.New("unknown kind")

// APIError is an error response of the API: its HTTP status and the body's
// {"error":{"code","message","field"}}.
type APIError struct {
	Status  int
	Code    string
	Message string
	Field   string
}

// Error renders "code: message", e.g. `not_found: machineclaim "x" not found`.
// Input errors name the field when the message does not already.
func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = strings.ToLower(http.StatusText(e.Status))
	}
	input := e.Code == CodeInvalid || e.Code == CodeBadRequest
	if input && e.Field != "" && !strings.Contains(msg, e.Field) {
		msg = e.Field + ": " + msg
	}
	return e.Code + ": " + msg
}

// Is matches the sentinel errors by code, falling back to the status when the
// body carried no code.
func (e *APIError) Is(target error) bool {
	switch target {
	case ErrNotFound:
		return e.Code == CodeNotFound || (e.Code == "" && e.Status == http.StatusNotFound)
	case ErrConflict:
		return e.Code == CodeConflict || (e.Code == "" && e.Status == http.StatusConflict)
	case ErrUnauthorized:
		return e.Code == CodeUnauthorized || (e.Code == "" && e.Status == http.StatusUnauthorized)
	case ErrForbidden:
		return e.Code == CodeForbidden || (e.Code == "" && e.Status == http.StatusForbidden)
	case ErrInvalid:
		return e.Code == CodeInvalid || e.Code == CodeBadRequest
	}
	return false
}

// IsNotFound reports whether err is (or wraps) a not_found API error.
func IsNotFound(err error) bool { return errors.Is(err, ErrNotFound) }

// IsConflict reports whether err is (or wraps) a conflict API error: the object
// exists already, or an If-Match version did not match.
func IsConflict(err error) bool { return errors.Is(err, ErrConflict) }

// IsUnauthorized reports whether err is (or wraps) an unauthorized API error: no
// token or a token the server does not know.
func IsUnauthorized(err error) bool { return errors.Is(err, ErrUnauthorized) }

// IsForbidden reports whether err is (or wraps) a forbidden API error: the token
// is valid but its role may not do this.
func IsForbidden(err error) bool { return errors.Is(err, ErrForbidden) }

// codeForStatus names the code of an error response whose body had none (a proxy
// page, an empty body).
func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return CodeBadRequest
	case http.StatusUnprocessableEntity:
		return CodeInvalid
	case http.StatusUnauthorized:
		return CodeUnauthorized
	case http.StatusForbidden:
		return CodeForbidden
	case http.StatusNotFound:
		return CodeNotFound
	case http.StatusConflict, http.StatusPreconditionFailed:
		return CodeConflict
	case http.StatusRequestEntityTooLarge:
		return CodeTooLarge
	}
	return CodeInternal
}
