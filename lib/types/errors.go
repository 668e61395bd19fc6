package types

import (
	"errors"
	"fmt"
)

// ErrInvalid is wrapped by every validation error, so callers can branch on it.
var ErrInvalid = errors.New("invalid")

// FieldError says which field of an object is wrong and why. Field is a JSON path
// such as "spec.resources.cpu".
type FieldError struct {
	Field   string
	Message string
}

// Error implements error.
func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Message
	}
	return e.Field + ": " + e.Message
}

// Unwrap makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Unwrap() error { return ErrInvalid }

// Invalid builds a FieldError with a formatted message.
func Invalid(field, format string, args ...any) error {
	return &FieldError{Field: field, Message: fmt.Sprintf(format, args...)}
}
