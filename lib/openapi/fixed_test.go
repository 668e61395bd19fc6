package openapi

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/hf-fleet/hf/lib/types"
)

// changedField names the innermost field a request gives another value,
// by its JSON path; what the request leaves empty is no change.
func TestChangedField(t *testing.T) {
	have := types.MachineSetSpec{
		AvailabilityConfiguration: types.AvailabilityConfiguration{Availability: types.AvailabilityPool},
		MinAvailable:              2, MachineTemplate: "small",
		ProviderConfiguration: map[string]string{"a": "1"}, MaxAge: types.D(time.Hour),
	}
	for _, tc := range []struct {
		name  string
		got   types.MachineSetSpec
		field string
	}{
		{"nothing given", types.MachineSetSpec{}, ""},
		{"the same", have, ""},
		{"a number", types.MachineSetSpec{MinAvailable: 3}, "spec.minAvailable"},
		{"inside a struct", types.MachineSetSpec{AvailabilityConfiguration: types.AvailabilityConfiguration{Value: "ev"}}, "spec.availabilityConfiguration.value"},
		{"a map", types.MachineSetSpec{ProviderConfiguration: map[string]string{"a": "2"}}, "spec.providerConfiguration"},
		{"an empty map is left out", types.MachineSetSpec{ProviderConfiguration: map[string]string{}}, ""},
		{"a duration", types.MachineSetSpec{MaxAge: types.D(time.Minute)}, "spec.maxAge"},
		{"a field the stored one leaves empty", types.MachineSetSpec{Environment: "lab"}, "spec.environment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			field, _, _ := changedField("spec", have, tc.got)
			assert.Equal(t, tc.field, field)
		})
	}
}
