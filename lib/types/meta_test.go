package types_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestValidateName(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		wantMsg string // "" = valid
	}{
		{"one letter", "a", ""},
		{"one digit", "7", ""},
		{"leading digit", "0abc", ""},
		{"dashes inside", "a-b--c", ""},
		{"63 characters", strings.Repeat("a", 63), ""},
		{"63 with dashes", "a" + strings.Repeat("-", 61) + "z", ""},
		{"64 characters", strings.Repeat("a", 64), "must be at most 63 characters"},
		{"empty", "", "is required"},
		{"leading dash", "-a", "must be lower-case letters"},
		{"trailing dash", "a-", "must be lower-case letters"},
		{"upper case", "Abc", "must be lower-case letters"},
		{"underscore", "a_b", "must be lower-case letters"},
		{"dot", "a.b", "must be lower-case letters"},
		{"space", "a b", "must be lower-case letters"},
		{"slash", "a/b", "must be lower-case letters"},
		{"non-ascii", "café", "must be lower-case letters"},
		{"trailing newline", "abc\n", "must be lower-case letters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := types.ValidateName("metadata.name", tt.in)
			if tt.wantMsg == "" {
				assert.NoError(t, err)
				return
			}
			var fe *types.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, "metadata.name", fe.Field)
			assert.Contains(t, fe.Message, tt.wantMsg)
			assert.ErrorIs(t, err, types.ErrInvalid)
		})
	}
	assert.Equal(t, 63, types.MaxNameLen)
}

func TestValidateLabels(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		field  string // "" = valid
	}{
		{"none", nil, ""},
		{"plain", map[string]string{"zone": "eu-1", "gpu": ""}, ""},
		{"prefixed key", map[string]string{"hf.io/role": "build_host.A"}, ""},
		// Kubernetes' rules, which the label selector parser applies too: a
		// name of at most 63 characters after a DNS-subdomain prefix of at
		// most 253.
		{"63-character name", map[string]string{strings.Repeat("k", 63): "v"}, ""},
		{"64-character name", map[string]string{strings.Repeat("k", 64): "v"}, "labels." + strings.Repeat("k", 64)},
		{"253-character prefix", map[string]string{strings.Repeat("p", 253) + "/" + strings.Repeat("k", 63): "v"}, ""},
		{"254-character prefix", map[string]string{strings.Repeat("p", 254) + "/k": "v"}, "labels." + strings.Repeat("p", 254) + "/k"},
		{"two slashes", map[string]string{"a/b/c": "v"}, "labels.a/b/c"},
		{"value with a slash", map[string]string{"k": "a/b"}, "labels.k"},
		{"63-character value", map[string]string{"k": strings.Repeat("v", 63)}, ""},
		{"64-character value", map[string]string{"k": strings.Repeat("v", 64)}, "labels.k"},
		{"empty key", map[string]string{"": "v"}, "labels."},
		{"key with space", map[string]string{"a b": "v"}, "labels.a b"},
		{"value ends with dash", map[string]string{"k": "v-"}, "labels.k"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := types.ValidateLabels("labels", tt.labels)
			if tt.field == "" {
				assert.NoError(t, err)
				return
			}
			var fe *types.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tt.field, fe.Field)
		})
	}
	// The error says what is wrong.
	err := types.ValidateLabels("labels", map[string]string{"k": strings.Repeat("v", 64)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "must be no more than 63")
	err = types.ValidateLabels("labels", map[string]string{"k": "a b"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "alphanumeric")
}

// Annotations follow Kubernetes' rules (qualified-name keys, at most 256 KiB
// of keys and values) and are at most 64, as labels are; the field named is
// the key's, or the map's for the count and the size.
func TestObjectMetaLimits(t *testing.T) {
	many := func(n int) map[string]string {
		m := make(map[string]string, n)
		for i := range n {
			m[fmt.Sprintf("k%d", i)] = "v"
		}
		return m
	}
	// sized holds annotations whose keys and values take n bytes in all.
	sized := func(n int) map[string]string {
		return map[string]string{"a": strings.Repeat("x", n/2-1), "b": strings.Repeat("y", n-n/2-1)}
	}
	tests := []struct {
		name        string
		labels, ann map[string]string
		field       string // "" = valid
	}{
		{"64 labels", many(types.MaxLabels), nil, ""},
		{"65 labels", many(types.MaxLabels + 1), nil, "metadata.labels"},
		{"64 annotations", nil, many(types.MaxAnnotations), ""},
		{"65 annotations", nil, many(types.MaxAnnotations + 1), "metadata.annotations"},
		{"64 labels and the system's", func() map[string]string {
			m := many(types.MaxLabels)
			m["hf/access-code"] = "c"
			return m
		}(), func() map[string]string {
			m := many(types.MaxAnnotations)
			m[types.AnnotationKeepalive] = "2026-01-01T00:00:00Z"
			return m
		}(), ""},
		{"256 KiB of annotations", nil, sized(types.MaxAnnotationBytes), ""},
		{"a byte more", nil, sized(types.MaxAnnotationBytes + 1), "metadata.annotations"},
		{"keys count in the size", nil, map[string]string{strings.Repeat("k", 63): strings.Repeat("v", types.MaxAnnotationBytes-62)}, "metadata.annotations"},
		{"prefixed key", nil, map[string]string{"example.com/note": "any text, even <this> & $(that)"}, ""},
		{"system key", nil, map[string]string{types.AnnotationKeepalive: "2026-01-01T00:00:00Z"}, ""},
		{"dots, dashes, underscores", nil, map[string]string{"a.b-c_D": ""}, ""},
		{"63-character name", nil, map[string]string{"x.io/" + strings.Repeat("n", 63): ""}, ""},
		{"64-character name", nil, map[string]string{strings.Repeat("n", 64): ""}, "metadata.annotations." + strings.Repeat("n", 64)},
		{"253-character prefix", nil, map[string]string{strings.Repeat("p", 253) + "/n": ""}, ""},
		{"254-character prefix", nil, map[string]string{strings.Repeat("p", 254) + "/n": ""}, "metadata.annotations." + strings.Repeat("p", 254) + "/n"},
		{"shell and path", nil, map[string]string{"$(id) ../..": "x"}, "metadata.annotations.$(id) ../.."},
		{"two slashes", nil, map[string]string{"a/b/c": "x"}, "metadata.annotations.a/b/c"},
		{"upper-case prefix", nil, map[string]string{"Example.com/x": "x"}, "metadata.annotations.Example.com/x"},
		{"empty prefix", nil, map[string]string{"/x": "x"}, "metadata.annotations./x"},
		{"empty name", nil, map[string]string{"x.io/": "x"}, "metadata.annotations.x.io/"},
		{"empty key", nil, map[string]string{"": "x"}, "metadata.annotations."},
		{"value not UTF-8", nil, map[string]string{"note": "a\xffb"}, "metadata.annotations.note"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := types.ObjectMeta{Name: "o", Labels: tt.labels, Annotations: tt.ann}
			err := m.Validate()
			if tt.field == "" {
				assert.NoError(t, err)
				return
			}
			var fe *types.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tt.field, fe.Field, "error: %v", err)
		})
	}
}

func TestMatchLabels(t *testing.T) {
	labels := map[string]string{"zone": "a", "gpu": "yes"}
	tests := []struct {
		name string
		sel  map[string]string
		want bool
	}{
		{"nil selector matches all", nil, true},
		{"subset", map[string]string{"zone": "a"}, true},
		{"all", map[string]string{"zone": "a", "gpu": "yes"}, true},
		{"other value", map[string]string{"zone": "b"}, false},
		{"missing key", map[string]string{"arch": "arm"}, false},
		{"empty value is not absent", map[string]string{"arch": ""}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, types.MatchLabels(tt.sel, labels))
		})
	}
	assert.False(t, types.MatchLabels(map[string]string{"zone": "a"}, nil))
}

func TestCast(t *testing.T) {
	a, b := &types.MachineClaim{Metadata: types.ObjectMeta{Name: "a"}}, &types.MachineClaim{Metadata: types.ObjectMeta{Name: "b"}}
	assert.Equal(t, []*types.MachineClaim{a, b}, types.Cast[*types.MachineClaim]([]types.Object{a, b}))
	assert.Empty(t, types.Cast[*types.MachineClaim](nil))
	assert.Equal(t, []*types.MachineClaim{a}, types.Cast[*types.MachineClaim]([]types.Object{&types.Machine{}, a}), "an object of another kind is left out")
}
