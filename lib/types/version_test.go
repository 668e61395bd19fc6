package types_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestVersionCompare(t *testing.T) {
	v := func(h uint64, n string) types.Version { return types.Version{HLC: h, Node: n} }
	tests := []struct {
		name string
		a, b types.Version
		want int
	}{
		{"equal", v(5, "n1"), v(5, "n1"), 0},
		{"older hlc", v(4, "z"), v(5, "a"), -1},
		{"newer hlc", v(6, "a"), v(5, "z"), 1},
		{"same hlc, node breaks the tie", v(5, "n1"), v(5, "n2"), -1},
		{"same hlc, node breaks the tie the other way", v(5, "n2"), v(5, "n1"), 1},
		{"zero is oldest", v(0, ""), v(1, "a"), -1},
		{"zero equals zero", types.Version{}, types.Version{}, 0},
		{"max hlc", v(^uint64(0), "a"), v(^uint64(0)-1, "z"), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.a.Compare(tt.b))
			assert.Equal(t, -tt.want, tt.b.Compare(tt.a), "antisymmetric")
		})
	}
}

func TestVersionStringParseRoundTrip(t *testing.T) {
	tests := []struct {
		v types.Version
		s string
	}{
		{types.Version{}, ""},
		{types.Version{HLC: 5, Node: "n1"}, "5@n1"},
		{types.Version{HLC: 0, Node: "n1"}, "0@n1"},
		{types.Version{HLC: ^uint64(0), Node: "node-with-dashes"}, "18446744073709551615@node-with-dashes"},
		{types.Version{HLC: 7, Node: "a@b"}, "7@a@b"},
	}
	for _, tt := range tests {
		t.Run(tt.s, func(t *testing.T) {
			assert.Equal(t, tt.s, tt.v.String())
			got, err := types.ParseVersion(tt.s)
			require.NoError(t, err)
			assert.Equal(t, tt.v, got)
			assert.Equal(t, tt.v.IsZero(), tt.s == "")
		})
	}
}

func TestParseVersionErrors(t *testing.T) {
	for _, s := range []string{"5", "5@", "@n1", "x@n1", "-1@n1", "18446744073709551616@n1", " 5@n1", "5.0@n1"} {
		t.Run(s, func(t *testing.T) {
			_, err := types.ParseVersion(s)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "version")
		})
	}
}

func TestVersionJSON(t *testing.T) {
	m := types.ObjectMeta{Name: "a", Version: types.Version{HLC: 42, Node: "n3"}}
	b, err := json.Marshal(m)
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"a","version":"42@n3"}`, string(b))

	var back types.ObjectMeta
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, m, back)

	b, err = json.Marshal(types.ObjectMeta{Name: "a"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"a"}`, string(b), "zero version is omitted")

	assert.Error(t, json.Unmarshal([]byte(`{"name":"a","version":"nope"}`), &back))
	require.NoError(t, json.Unmarshal([]byte(`{"name":"a","version":""}`), &back))
	assert.True(t, back.Version.IsZero())
}
