package types_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestDurationMarshal(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want string
	}{
		{0, `"0s"`},
		{90 * time.Second, `"1m30s"`},
		{90 * time.Minute, `"1h30m0s"`},
		{1500 * time.Millisecond, `"1.5s"`},
		{-time.Second, `"-1s"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			b, err := json.Marshal(types.D(tt.d))
			require.NoError(t, err)
			assert.Equal(t, tt.want, string(b))

			var back types.Duration
			require.NoError(t, json.Unmarshal(b, &back))
			assert.Equal(t, tt.d, back.Duration, "round trip")
		})
	}
}

func TestDurationUnmarshal(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr string
	}{
		{`"90s"`, 90 * time.Second, ""},
		{`"1h30m"`, 90 * time.Minute, ""},
		{`"250ms"`, 250 * time.Millisecond, ""},
		{`""`, 0, ""},
		{`90`, 90 * time.Second, ""},
		{`1.5`, 1500 * time.Millisecond, ""},
		{`0`, 0, ""},
		{`"90"`, 0, "duration \"90\""},
		{`"soon"`, 0, "duration \"soon\""},
		{`true`, 0, "want a string like"},
		{`{}`, 0, "want a string like"},
		{`-5`, -5 * time.Second, ""}, // refused by the objects' checks, which say so
		{`9e9`, 9e9 * time.Second, ""},
		{`1e10`, 0, "too long"}, // came out negative
		{`-1e10`, 0, "too long"},
		{`1e308`, 0, "too long"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			d := types.D(time.Hour) // must be overwritten or left alone on error
			err := json.Unmarshal([]byte(tt.in), &d)
			if tt.wantErr != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, d.Duration)
		})
	}
}

func TestDurationInObject(t *testing.T) {
	var spec types.MachineClaimSpec
	require.NoError(t, json.Unmarshal([]byte(`{"machineTemplate":"t","bindTimeout":"2m"}`), &spec))
	assert.Equal(t, 2*time.Minute, spec.BindTimeout.Duration)

	b, err := json.Marshal(types.MachineClaimSpec{MachineTemplate: "t"})
	require.NoError(t, err)
	assert.NotContains(t, string(b), "bindTimeout", "a zero duration is omitted")

	b, err = json.Marshal(types.MachineClaimSpec{MachineTemplate: "t", BindTimeout: types.D(time.Minute)})
	require.NoError(t, err)
	assert.Contains(t, string(b), `"bindTimeout":"1m0s"`)
}
