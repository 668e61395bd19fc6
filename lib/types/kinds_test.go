package types_test

import (
	"encoding/json"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

var allKinds = []string{
	types.KindNode, types.KindProvider, types.KindEnvironment, types.KindMachineTemplate, types.KindMachineSet,
	types.KindMachine, types.KindMachineClaim, types.KindScheduledEvent, types.KindAccessCode, types.KindSession,
	types.KindUser, types.KindToken,
}

func TestKinds(t *testing.T) {
	got := types.Kinds()
	assert.True(t, sort.StringsAreSorted(got))
	assert.ElementsMatch(t, allKinds, got)
}

func TestPlural(t *testing.T) {
	tests := map[string]string{
		types.KindNode:            "nodes",
		types.KindProvider:        "providers",
		types.KindEnvironment:     "environments",
		types.KindMachineTemplate: "machinetemplates",
		types.KindMachineSet:      "machinesets",
		types.KindMachine:         "machines",
		types.KindMachineClaim:    "machineclaims",
		types.KindScheduledEvent:  "scheduledevents",
		types.KindAccessCode:      "accesscodes",
		types.KindSession:         "sessions",
		types.KindUser:            "users",
		types.KindToken:           "tokens",
	}
	require.Len(t, tests, len(allKinds))
	for kind, plural := range tests {
		t.Run(kind, func(t *testing.T) {
			assert.Equal(t, plural, types.Plural(kind))
			for _, in := range []string{plural, strings.ToLower(kind), kind, strings.ToUpper(plural)} {
				got, ok := types.KindForPlural(in)
				assert.True(t, ok, in)
				assert.Equal(t, kind, got, in)
			}
		})
	}
}

func TestKindForPluralUnknown(t *testing.T) {
	for _, in := range []string{"", "s", "claims", "machineclaimss", "machine-claims", "nodess"} {
		_, ok := types.KindForPlural(in)
		assert.False(t, ok, in)
	}
}

func TestNew(t *testing.T) {
	for _, kind := range allKinds {
		t.Run(kind, func(t *testing.T) {
			o, err := types.New(kind)
			require.NoError(t, err)
			assert.Equal(t, kind, o.GetKind())

			// Meta is the object's own metadata, not a copy.
			o.Meta().Name = "x1"
			assert.Equal(t, "x1", o.Meta().Name)

			// The JSON shape every object has.
			b, err := json.Marshal(o)
			require.NoError(t, err)
			var shape map[string]json.RawMessage
			require.NoError(t, json.Unmarshal(b, &shape))
			assert.JSONEq(t, `"`+kind+`"`, string(shape["kind"]))
			assert.Contains(t, shape, "metadata")
			assert.Contains(t, shape, "spec")
			assert.JSONEq(t, `"x1"`, string(mustField(t, shape["metadata"], "name")))

			// A fresh object round-trips through JSON as the same kind.
			o2, err := types.New(kind)
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, o2))
			assert.Equal(t, o, o2)

			// New objects pass the kind check: Validate never blames "kind".
			if err := o.Validate(); err != nil {
				var fe *types.FieldError
				require.ErrorAs(t, err, &fe)
				assert.NotEqual(t, "kind", fe.Field)
			}
		})
	}
	_, err := types.New("Bogus")
	assert.ErrorContains(t, err, `unknown kind "Bogus"`)
	_, err = types.New("machineclaim")
	assert.Error(t, err, "New takes the kind name, not the plural or lower case")
}

func mustField(t *testing.T, raw json.RawMessage, field string) json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	require.NoError(t, json.Unmarshal(raw, &m))
	return m[field]
}
