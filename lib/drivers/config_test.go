package drivers

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

type nested struct {
	Image string `json:"image"`
	Size  int    `json:"size"`
}

type sampleConfig struct {
	Alter
	Name    string          `json:"name"`
	Count   int             `json:"count"`
	Enabled bool            `json:"enabled"`
	Tags    []string        `json:"tags"`
	Wait    types.Duration  `json:"wait"`
	Inner   nested          `json:"inner"`
	Extra   map[string]bool `json:"extra"`
}

func TestDecodeConfig(t *testing.T) {
	defaults := sampleConfig{Name: "default", Count: 3}
	for _, tc := range []struct {
		name    string
		cfg     string
		want    sampleConfig
		wantErr string
	}{
		{name: "empty keeps defaults", cfg: ``, want: defaults},
		{name: "blank keeps defaults", cfg: " \n\t", want: defaults},
		{name: "null keeps defaults", cfg: `null`, want: defaults},
		{name: "empty object keeps defaults", cfg: `{}`, want: defaults},
		{name: "overrides some keys", cfg: `{"count": 5, "cpu_alter": -1.5, "wait": "2s", "inner": {"image": "x"}}`,
			want: sampleConfig{Name: "default", Count: 5, Alter: Alter{CPUAlter: -1.5}, Wait: types.D(2 * time.Second),
				Inner: nested{Image: "x"}}},
		{name: "unknown key", cfg: `{"cpu": 4}`, wantErr: `unknown key "cpu"`},
		{name: "unknown nested key", cfg: `{"inner": {"imgae": "x"}}`, wantErr: `unknown key "imgae"`},
		{name: "number wanted", cfg: `{"cpu_alter": "x"}`, wantErr: `cpu_alter: want a number, got string`},
		{name: "whole number wanted", cfg: `{"count": 1.5}`, wantErr: `count: want a whole number`},
		{name: "bool wanted", cfg: `{"enabled": "yes"}`, wantErr: `enabled: want true or false`},
		{name: "string wanted", cfg: `{"name": 3}`, wantErr: `name: want a string, got number`},
		{name: "list wanted", cfg: `{"tags": "a"}`, wantErr: `tags: want a list`},
		{name: "nested field", cfg: `{"inner": {"size": "big"}}`, wantErr: `inner.size: want a whole number`},
		{name: "object wanted", cfg: `{"extra": 1}`, wantErr: `extra: want an object`},
		{name: "custom unmarshaler names its key", cfg: `{"count": 1, "wait": "soon"}`, wantErr: `wait: duration "soon"`},
		{name: "top level not an object", cfg: `"hello"`, wantErr: `want an object, got string`},
		{name: "syntax error", cfg: `{"count": }`, wantErr: `not valid JSON at offset 11: invalid character`},
		{name: "truncated", cfg: `{"count": 1`, wantErr: `not valid JSON`},
		{name: "trailing data", cfg: `{"count": 1} {"count": 2}`, wantErr: `unexpected data after the config object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := defaults
			err := DecodeConfig([]byte(tc.cfg), &got)
			if tc.wantErr == "" {
				require.NoError(t, err)
				assert.Equal(t, tc.want, got)
				return
			}
			require.Error(t, err)
			// A prefix match: the message must start with the key, so an
			// embedded struct's Go name ("Alter.") must not leak into it.
			assert.Truef(t, strings.HasPrefix(err.Error(), tc.wantErr), "error %q does not start with %q", err, tc.wantErr)
			assert.ErrorIs(t, err, types.ErrInvalid)
		})
	}
}

func TestDecodeConfigNeedsPointer(t *testing.T) {
	var c sampleConfig
	err := DecodeConfig([]byte(`{}`), c)
	require.Error(t, err)
	assert.False(t, errors.Is(err, types.ErrInvalid), "a programming error is not bad input")
	var nilPtr *sampleConfig
	require.Error(t, DecodeConfig([]byte(`{}`), nilPtr))
}

func TestTemplateEntry(t *testing.T) {
	tmpl := types.MachineTemplate{Spec: types.MachineTemplateSpec{ProviderConfiguration: map[string]json.RawMessage{
		"docker":     json.RawMessage(`{"image": "a"}`),
		"docker/gpu": json.RawMessage(`{"image": "b"}`),
		"test":       nil,
	}}}
	type cfg struct {
		Image string `json:"image"`
	}
	parse := func(b []byte) (cfg, error) {
		var c cfg
		return c, DecodeConfig(b, &c)
	}
	for _, tc := range []struct {
		name, instance, typ, want, field, err string
	}{
		{"instance first", "docker/gpu", "docker", "b", "spec.providerConfiguration.docker/gpu", ""},
		{"falls back to type", "docker/cpu", "docker", "a", "spec.providerConfiguration.docker", ""},
		{"empty entry is present", "test", "test", "", "spec.providerConfiguration.test", ""},
		{"empty instance", "", "docker", "a", "spec.providerConfiguration.docker", ""},
		{"missing, one name", "native", "native", "", "", `spec.providerConfiguration: has no entry for "native"`},
		{"missing, two names", "native/x", "native", "", "", `has no entry for "native/x" or "native"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, field, err := TemplateEntry(tmpl, tc.instance, tc.typ, parse)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				assert.ErrorIs(t, err, types.ErrInvalid)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got.Image)
			assert.Equal(t, tc.field, field)
		})
	}
	bad := types.MachineTemplate{Spec: types.MachineTemplateSpec{ProviderConfiguration: map[string]json.RawMessage{
		"docker": json.RawMessage(`{"imag": "a"}`)}}}
	_, _, err := TemplateEntry(bad, "docker", "docker", parse)
	var fe *types.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Contains(t, fe.Field, "spec.providerConfiguration.docker", "the bad key is named under the entry")
}

func TestPrefixField(t *testing.T) {
	plain := errors.New("plain")
	for _, tc := range []struct {
		name   string
		prefix string
		err    error
		want   string
	}{
		{"field", "spec.x", types.Invalid("image", "is required"), "spec.x.image: is required"},
		{"no field", "spec.x", types.Invalid("", `unknown key "a"`), `spec.x: unknown key "a"`},
		{"no prefix", "", types.Invalid("image", "bad"), "image: bad"},
		{"not a field error", "spec.x", plain, "plain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := PrefixField(tc.prefix, tc.err)
			assert.EqualError(t, err, tc.want)
		})
	}
	assert.ErrorIs(t, PrefixField("a", types.Invalid("b", "c")), types.ErrInvalid)
}
