package cloud

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/hf-fleet/hf/lib/types"
)

// loadProvider reads examples/providers/<kind>.yaml as the API would take
// it: YAML to JSON, decoded strictly, validated.
func loadProvider(t *testing.T, kind string) *types.Provider {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "..", "examples", "providers", kind+".yaml"))
	require.NoError(t, err)
	var doc any
	require.NoError(t, yaml.Unmarshal(raw, &doc))
	js, err := json.Marshal(doc)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var p types.Provider
	require.NoError(t, dec.Decode(&p))
	require.NoError(t, p.Validate())
	return &p
}

// jsonKeys are the JSON keys of a template entry struct.
func jsonKeys(v any) []string {
	var out []string
	rt := reflect.TypeOf(v)
	for i := range rt.NumField() {
		if name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ","); name != "" && name != "-" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// TestProviderManifests: the Provider objects shipped for aws and gce are
// valid, list exactly the keys the driver's template entry takes, and
// describe the machine information the driver reports (every key listed,
// every required one there, values of their form).
func TestProviderManifests(t *testing.T) {
	for kind, entry := range map[string]any{TypeAWS: AWSTemplate{}, TypeGCE: GCETemplate{}} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			p := loadProvider(t, kind)
			assert.Equal(t, types.KindProvider, p.Kind)
			assert.Equal(t, kind, p.DriverType())
			names := slices.Sorted(slices.Values(p.Spec.ConfigurationItems.Names()))
			assert.Equal(t, jsonKeys(entry), names, "configurationItems are the template entry's keys")

			var f *fixture
			extra := map[string]any{}
			if kind == TypeAWS {
				f, extra["generate_key_pair"] = newAWSFixture(t), true
			} else {
				f = newGCEFixture(t)
			}
			d := f.driver(t, nil)
			r, err := d.Allocate(t.Context(), f.template("small", extra), testMeta)
			require.NoError(t, err)
			require.NoError(t, p.Spec.MachineInformation.CheckConfiguration("machineInformation", r.Info, true))
			listed, err := d.List(t.Context())
			require.NoError(t, err)
			require.Len(t, listed, 1)
			require.NoError(t, p.Spec.MachineInformation.CheckConfiguration("machineInformation", listed[0].Info, true))
			require.NoError(t, d.Deallocate(t.Context(), r))
		})
	}
}
