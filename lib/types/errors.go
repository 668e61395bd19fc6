package types

import (
	"errors"
	"fmt"
	"reflect"
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

// DescribeType names what a Go type accepts, the way a person writing JSON or
// YAML thinks of it ("a whole number", "a list of strings"), for errors.
func DescribeType(t reflect.Type) string {
	if t == nil {
		return "another type"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.String {
			return "a list of strings"
		}
		return "a list"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return t.String()
}
