package types

import (
	"fmt"
	"strconv"
	"strings"
)

// Version orders writes of one object across the cluster: a hybrid logical clock
// value and the id of the node that made the write. Higher HLC wins; equal HLCs
// are ordered by node id so every node picks the same winner.
type Version struct {
	HLC  uint64
	Node string
}

// IsZero reports whether v was never set.
func (v Version) IsZero() bool { return v.HLC == 0 && v.Node == "" }

// Compare returns -1, 0 or +1 as v is older than, equal to or newer than o.
func (v Version) Compare(o Version) int {
	switch {
	case v.HLC < o.HLC:
		return -1
	case v.HLC > o.HLC:
		return 1
	}
	return strings.Compare(v.Node, o.Node)
}

// String renders "hlc@node", the form used in JSON and in If-Match headers.
func (v Version) String() string {
	if v.IsZero() {
		return ""
	}
	return string(v.AppendText(nil))
}

// AppendText appends String's form of v to b (nothing for the zero
// Version): for writers that build bytes and should not allocate a string
// per version.
func (v Version) AppendText(b []byte) []byte {
	if v.IsZero() {
		return b
	}
	b = strconv.AppendUint(b, v.HLC, 10)
	b = append(b, '@')
	return append(b, v.Node...)
}

// ParseVersion is the inverse of String. The empty string is the zero Version.
func ParseVersion(s string) (Version, error) {
	if s == "" {
		return Version{}, nil
	}
	h, n, ok := strings.Cut(s, "@")
	if !ok || n == "" {
		return Version{}, fmt.Errorf("version %q: want hlc@node", s)
	}
	hlc, err := strconv.ParseUint(h, 10, 64)
	if err != nil {
		return Version{}, fmt.Errorf("version %q: %w", s, err)
	}
	return Version{HLC: hlc, Node: n}, nil
}

// MarshalText implements encoding.TextMarshaler.
func (v Version) MarshalText() ([]byte, error) { return v.AppendText(nil), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (v *Version) UnmarshalText(b []byte) error {
	p, err := ParseVersion(string(b))
	if err != nil {
		return err
	}
	*v = p
	return nil
}
