package types

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/validate/content"
)

// ObjectMeta is the metadata every object carries.
type ObjectMeta struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	// CreatedAt is set by the node that accepts the create.
	CreatedAt time.Time `json:"createdAt,omitzero"`
	// UpdatedAt is the wall time of the last write.
	UpdatedAt time.Time `json:"updatedAt,omitzero"`
	// Version is assigned by the store on every write; a client may send the
	// version it read to make an update conditional. It is the newest of the
	// object's facet versions.
	Version Version `json:"version,omitzero"`
	// Facets are the versions of the object's facets (see Facet), set by
	// the store; read-only.
	Facets FacetVersions `json:"facets,omitempty"`
}

// Object is implemented by every kind of the model.
type Object interface {
	// GetKind returns the kind name, e.g. "MachineClaim".
	GetKind() string
	// Meta returns the object's metadata for reading and writing.
	Meta() *ObjectMeta
	// Validate checks the object and returns a *FieldError naming the bad field.
	Validate() error
	// Facets returns the object's facets, the creating facet first.
	Facets() []Facet
}

// Cast returns the objects of objs that are a T, as T (lists of one kind
// from the cache, the store or the API, as their kind's type).
func Cast[T Object](objs []Object) []T {
	out := make([]T, 0, len(objs))
	for _, o := range objs {
		if t, ok := o.(T); ok {
			out = append(out, t)
		}
	}
	return out
}

var nameRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// ReservedPrefix starts the labels and annotations the system writes (a
// claim's set, session or access code, a session's keepalive); a user may
// not set them.
const ReservedPrefix = "hf/"

// Limits of object metadata. Every write of an object copies and stores it
// whole, so what one request may make a node hold is bounded here. Annotation
// keys and their total size follow Kubernetes (TotalAnnotationSizeLimitB);
// the counts are hf's.
const (
	MaxLabels          = 64
	MaxAnnotations     = 64
	MaxAnnotationBytes = 256 << 10
)

// MaxNameLen is the longest object name (a DNS label).
const MaxNameLen = 63

// ValidateName checks a DNS-label name: lower-case letters, digits and '-', not
// starting or ending with '-', at most 63 characters.
func ValidateName(field, name string) error {
	switch {
	case name == "":
		return Invalid(field, "is required")
	case len(name) > MaxNameLen:
		return Invalid(field, "must be at most %d characters", MaxNameLen)
	case !nameRe.MatchString(name):
		return Invalid(field, "must be lower-case letters, digits and '-', starting and ending with a letter or digit")
	}
	return nil
}

// validateRef checks an optional reference to another object by name.
func validateRef(field, name string) error {
	if name == "" {
		return nil
	}
	return ValidateName(field, name)
}

// ValidateLabels checks label keys and values as Kubernetes does (so that a
// label selector, parsed with its semantics, can name every label): a key is
// a qualified name with an optional DNS-subdomain prefix, a value at most 63
// letters, digits, '-', '_' and '.'. The error says what is wrong.
func ValidateLabels(field string, labels map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if why := content.IsLabelKey(k); len(why) > 0 {
			return Invalid(field+"."+k, "bad label key: %s", strings.Join(why, "; "))
		}
		if why := content.IsLabelValue(labels[k]); len(why) > 0 {
			return Invalid(field+"."+k, "bad label value %q: %s", labels[k], strings.Join(why, "; "))
		}
	}
	return nil
}

// ValidateAnnotations checks annotations as Kubernetes does: keys are
// qualified names (an optional DNS-subdomain prefix and '/', then at most 63
// letters, digits, '-', '_' and '.'), values are UTF-8, and keys and values
// together take at most MaxAnnotationBytes; and there are at most
// MaxAnnotations of them.
func ValidateAnnotations(field string, ann map[string]string) error {
	if n := countOwn(ann); n > MaxAnnotations {
		return Invalid(field, "at most %d annotations (besides the system's hf/ ones), got %d", MaxAnnotations, n)
	}
	size := 0
	for _, k := range slices.Sorted(maps.Keys(ann)) {
		if why := content.IsQualifiedName(k); len(why) > 0 {
			return Invalid(field+"."+k, "bad annotation key: %s", strings.Join(why, "; "))
		}
		if !utf8.ValidString(ann[k]) {
			return Invalid(field+"."+k, "value must be UTF-8 text")
		}
		size += len(k) + len(ann[k])
	}
	if size > MaxAnnotationBytes {
		return Invalid(field, "keys and values take at most %d bytes in all, got %d", MaxAnnotationBytes, size)
	}
	return nil
}

// countOwn counts the keys of m outside the system's hf/ prefix: the API
// adds some of those after the checks (a claim's access code, a session's
// keepalive), and they must not push an object a client wrote at the limit
// past it.
func countOwn(m map[string]string) int {
	n := 0
	for k := range m {
		if !strings.HasPrefix(k, ReservedPrefix) {
			n++
		}
	}
	return n
}

// Validate checks the metadata.
func (m *ObjectMeta) Validate() error {
	if err := ValidateName("metadata.name", m.Name); err != nil {
		return err
	}
	if n := countOwn(m.Labels); n > MaxLabels {
		return Invalid("metadata.labels", "at most %d labels (besides the system's hf/ ones), got %d", MaxLabels, n)
	}
	if err := ValidateLabels("metadata.labels", m.Labels); err != nil {
		return err
	}
	return ValidateAnnotations("metadata.annotations", m.Annotations)
}

// MatchLabels reports whether labels carry every key=value of sel.
func MatchLabels(sel, labels map[string]string) bool {
	for k, v := range sel {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// UserOf returns spec.user of a claim or session, the kinds a user owns,
// and false for other kinds.
func UserOf(o Object) (string, bool) {
	switch v := o.(type) {
	case *MachineClaim:
		return v.Spec.User, true
	case *Session:
		return v.Spec.User, true
	}
	return "", false
}
