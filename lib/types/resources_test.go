package types_test

import (
	"encoding/json"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestResourcesArithmetic(t *testing.T) {
	a := types.Resources{CPU: 4, RAMGB: 16, DiskGB: 100}
	b := types.Resources{CPU: 1.5, RAMGB: 4, DiskGB: 20}
	assert.Equal(t, types.Resources{CPU: 5.5, RAMGB: 20, DiskGB: 120}, a.Add(b))
	assert.Equal(t, types.Resources{CPU: 2.5, RAMGB: 12, DiskGB: 80}, a.Sub(b))
	assert.Equal(t, types.Resources{CPU: -2.5, RAMGB: -12, DiskGB: -80}, b.Sub(a), "may go negative")
	assert.Equal(t, a, a.Add(types.Resources{}))
}

func TestResourcesValidate(t *testing.T) {
	tests := []struct {
		name  string
		r     types.Resources
		field string
	}{
		{"zero", types.Resources{}, ""},
		{"fractions", types.Resources{CPU: 0.5, RAMGB: 0.25}, ""},
		{"negative cpu", types.Resources{CPU: -0.1}, "r.cpu"},
		{"negative ram", types.Resources{RAMGB: -1}, "r.ramGB"},
		{"negative disk", types.Resources{DiskGB: -1}, "r.diskGB"},
		{"NaN cpu", types.Resources{CPU: math.NaN()}, "r.cpu"},
		{"-Inf ram", types.Resources{RAMGB: math.Inf(-1)}, "r.ramGB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.Validate("r")
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

func TestResourcesJSON(t *testing.T) {
	b, err := json.Marshal(types.Resources{CPU: 2, RAMGB: 4})
	require.NoError(t, err)
	assert.JSONEq(t, `{"cpu":2,"ramGB":4}`, string(b), "diskGB is omitted when zero")
}

func TestPhaseTimesMark(t *testing.T) {
	berlin := time.FixedZone("CET", 3600)
	t1 := time.Date(2025, 3, 1, 12, 0, 0, 123456789, berlin)
	t2 := t1.Add(time.Second)

	var p types.PhaseTimes // nil: Mark must allocate
	p.Mark("Requested", t1)
	require.NotNil(t, p)
	assert.Equal(t, t1.UTC(), p["Requested"])
	assert.Equal(t, time.UTC, p["Requested"].Location(), "stored in UTC")

	p.Mark("Requested", t2)
	assert.Equal(t, t1.UTC(), p["Requested"], "the first entry wins")

	p.Mark("Bound", t2)
	assert.Len(t, p, 2)
	assert.Equal(t, time.Second, p["Bound"].Sub(p["Requested"]))

	b, err := json.Marshal(p)
	require.NoError(t, err)
	assert.JSONEq(t, `{"Requested":"2025-03-01T11:00:00.123456789Z","Bound":"2025-03-01T11:00:01.123456789Z"}`, string(b))

	var back types.PhaseTimes
	require.NoError(t, json.Unmarshal(b, &back))
	assert.True(t, back["Bound"].Equal(p["Bound"]))

	// Through an object: the status field of a claim.
	c := types.MachineClaim{}
	c.Status.PhaseTimes.Mark(string(types.ClaimRequested), t1)
	assert.Contains(t, c.Status.PhaseTimes, "Requested")
}
