package types

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FacetVersions reads and writes the object form ({"spec": "1@n1", ...}),
// the same bytes as the map it replaced, and keeps its entries by name.
func TestFacetVersionsJSON(t *testing.T) {
	var fs FacetVersions
	fs.Set("spec", Version{HLC: 2, Node: "n1"})
	fs.Set("election", Version{HLC: 3, Node: "n2"})
	fs.Set("spec", Version{HLC: 4, Node: "n1"})
	assert.Equal(t, Version{HLC: 4, Node: "n1"}, fs.Get("spec"))
	assert.Zero(t, fs.Get("binding"))
	b, err := json.Marshal(fs)
	require.NoError(t, err)
	want, err := json.Marshal(map[string]Version{"spec": {HLC: 4, Node: "n1"}, "election": {HLC: 3, Node: "n2"}})
	require.NoError(t, err)
	assert.Equal(t, string(want), string(b), "the same bytes as the map")
	// Names that need escaping, and a slice out of order, still come out as
	// the map does.
	for _, odd := range []FacetVersions{
		{{Name: "spec", Version: Version{HLC: 1, Node: "n<1>"}}},
		{{Name: "sp\"ec", Version: Version{HLC: 1, Node: "n1"}}},
		{{Name: "spec", Version: Version{HLC: 1, Node: "nö"}}},
		{{Name: "spec", Version: Version{HLC: 1, Node: "n1"}}, {Name: "election", Version: Version{HLC: 2, Node: "n1"}}},
	} {
		b, err := json.Marshal(odd)
		require.NoError(t, err)
		m := map[string]Version{}
		for _, f := range odd {
			m[f.Name] = f.Version
		}
		want, err := json.Marshal(m)
		require.NoError(t, err)
		assert.Equal(t, string(want), string(b))
	}
	var back FacetVersions
	require.NoError(t, json.Unmarshal(b, &back))
	assert.True(t, back.Equal(fs), "%v != %v", back, fs)
	assert.Equal(t, "election", back[0].Name)
	m := ObjectMeta{Name: "x"}
	b, err = json.Marshal(m)
	require.NoError(t, err)
	assert.NotContains(t, string(b), "facets", "an object without facets leaves the field out")
	require.Error(t, json.Unmarshal([]byte(`{"spec": 3}`), &back))
}
