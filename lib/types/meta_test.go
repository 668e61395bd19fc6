package types_test

import (
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
		{"253-character key", map[string]string{strings.Repeat("k", 253): "v"}, ""},
		{"254-character key", map[string]string{strings.Repeat("k", 254): "v"}, "labels." + strings.Repeat("k", 254)},
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
