package types_test

import (
	"encoding/json"
	"math"
	"slices"
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
	assert.Equal(t, t1.UTC(), p.At("Requested"))
	assert.Equal(t, time.UTC, p.At("Requested").Location(), "stored in UTC")

	p.Mark("Requested", t2)
	assert.Equal(t, t1.UTC(), p.At("Requested"), "the first entry wins")

	p.Mark("Bound", t2)
	assert.Len(t, p, 2)
	assert.Equal(t, time.Second, p.At("Bound").Sub(p.At("Requested")))
	_, ok := p.Get("Failed")
	assert.False(t, ok)
	assert.True(t, p.At("Failed").IsZero())

	b, err := json.Marshal(p)
	require.NoError(t, err)
	assert.Equal(t, `{"Bound":"2025-03-01T11:00:01.123456789Z","Requested":"2025-03-01T11:00:00.123456789Z"}`, string(b),
		"an object with sorted keys, as a map marshalled")

	// Built by hand out of order, with a key that needs escaping and a
	// repeated one: still the bytes of the map.
	odd := types.PhaseTimes{{Phase: "Running", At: t1}, {Phase: "<x>", At: t2}, {Phase: "Bound", At: t1}, {Phase: "Running", At: t2}}
	b2, err := json.Marshal(odd)
	require.NoError(t, err)
	want, err := json.Marshal(map[string]time.Time{"Running": t2, "<x>": t2, "Bound": t1})
	require.NoError(t, err)
	assert.Equal(t, string(want), string(b2))
	_, err = json.Marshal(types.PhaseTimes{{Phase: "Bound", At: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}})
	assert.ErrorContains(t, err, "phaseTimes.Bound")

	var back types.PhaseTimes
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, p, back)
	require.NoError(t, json.Unmarshal([]byte(`null`), &back))
	assert.Nil(t, back)
	assert.Error(t, json.Unmarshal([]byte(`{"Bound":1}`), &back))
	assert.Error(t, json.Unmarshal([]byte(`["Bound"]`), &back))

	// Through an object: the status field of a claim, omitted when empty.
	c := types.MachineClaim{}
	c.Status.PhaseTimes.Mark(string(types.ClaimRequested), t1)
	_, ok = c.Status.PhaseTimes.Get("Requested")
	assert.True(t, ok)
	b, err = json.Marshal(types.MachineStatus{})
	require.NoError(t, err)
	assert.NotContains(t, string(b), "phaseTimes")
}

// TestPhaseTimesShared: copies of an object share their PhaseTimes, so a
// write to one copy must not show in another.
func TestPhaseTimesShared(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	orig := types.MakePhaseTimes(types.PhaseTime{Phase: "Requested", At: t0}, types.PhaseTime{Phase: "Pending", At: t0})
	orig = orig[:1:2] // room to grow in place, which Set must not use
	kept := slices.Clone(orig[:2])

	cp := orig
	cp.Mark("Bound", t0.Add(time.Second))
	cp.Set("Pending", t0.Add(2*time.Second))
	assert.Equal(t, kept, orig[:2], "the original's backing array is untouched")
	assert.Equal(t, []string{"Bound", "Pending"}, phases(cp))

	cp2 := cp
	cp2.Set("Bound", time.Time{})
	assert.Equal(t, []string{"Pending"}, phases(cp2), "a zero time forgets the phase")
	assert.Equal(t, []string{"Bound", "Pending"}, phases(cp))
	cp2.Set("Pending", time.Time{})
	assert.Nil(t, cp2)

	assert.Nil(t, types.MakePhaseTimes(types.PhaseTime{Phase: "Bound"}), "zero times are left out")
	m := types.MakePhaseTimes(types.PhaseTime{Phase: "Bound", At: t0}, types.PhaseTime{Phase: "Bound", At: t0.Add(time.Second)})
	assert.Equal(t, t0.Add(time.Second), m.At("Bound"), "a later entry of a phase wins")
	assert.Len(t, m, 1)
}

func phases(p types.PhaseTimes) []string {
	var out []string
	for _, e := range p {
		out = append(out, e.Phase)
	}
	return out
}

func TestResourceCopy(t *testing.T) {
	r := &types.Resource{ID: "test-1", Driver: "test", Info: map[string]string{"id": "test-1"},
		Endpoints: []types.Endpoint{{Protocol: "ssh", Address: "10.0.0.1:22"}}, Resources: types.Resources{CPU: 1, RAMGB: 2}, Data: json.RawMessage(`{"a":1}`)}
	m := &recordingMover{}
	c := r.Copy(m)
	assert.Equal(t, *r, c)
	assert.ElementsMatch(t, []string{"test-1", "test", "id", "test-1", "ssh", "10.0.0.1:22"}, m.strings, "every string goes through the mover")
	assert.Equal(t, 1, m.bytes, "and the data")
	c.Info["id"], c.Endpoints[0].Address, c.Data[2] = "x", "y", 'b'
	assert.Equal(t, "test-1", r.Info["id"], "the copy shares no map")
	assert.Equal(t, "10.0.0.1:22", r.Endpoints[0].Address, "nor a slice")
	assert.Equal(t, `{"a":1}`, string(r.Data), "nor data")
	assert.Equal(t, types.Resource{ID: "v"}, types.Resource{ID: "v"}.Copy(&recordingMover{}), "nil maps and slices stay nil")
}

// recordingMover shares strings and copies bytes, and counts both.
type recordingMover struct {
	strings []string
	bytes   int
}

func (m *recordingMover) String(s string) string { m.strings = append(m.strings, s); return s }

func (m *recordingMover) Bytes(b []byte) []byte {
	m.bytes++
	if b == nil {
		return nil
	}
	return append([]byte{}, b...)
}
