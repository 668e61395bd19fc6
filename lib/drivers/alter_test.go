package drivers

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestAlterValidate(t *testing.T) {
	for _, tc := range []struct {
		name    string
		a       Alter
		wantErr string
	}{
		{"zero", Alter{}, ""},
		{"negative alter keeps some for the host", Alter{CPUAlter: -2, RAMAlter: -4}, ""},
		{"positive everything", Alter{CPUAlter: 2, RAMAlter: 4, CPUOverbook: 12, RAMOverbook: 8}, ""},
		{"negative cpu overbook", Alter{CPUOverbook: -1}, "cpu_overbook: must not be negative"},
		{"negative ram overbook", Alter{RAMOverbook: -0.5}, "ram_overbook: must not be negative"},
		{"nan cpu alter", Alter{CPUAlter: math.NaN()}, "cpu_alter: must be a finite number"},
		{"inf ram alter", Alter{RAMAlter: math.Inf(-1)}, "ram_alter: must be a finite number"},
		{"inf overbook", Alter{CPUOverbook: math.Inf(1)}, "cpu_overbook: must be a finite number"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.a.Validate()
			if tc.wantErr == "" {
				require.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tc.wantErr)
			assert.ErrorIs(t, err, types.ErrInvalid)
		})
	}
}

func TestAlterCapacity(t *testing.T) {
	host := types.Resources{CPU: 16, RAMGB: 64, DiskGB: 500}
	for _, tc := range []struct {
		name         string
		a            Alter
		usable, over types.Resources
	}{
		{"no alter", Alter{}, host, types.Resources{}},
		{"keep some for the host", Alter{CPUAlter: -2, RAMAlter: -8},
			types.Resources{CPU: 14, RAMGB: 56, DiskGB: 500}, types.Resources{}},
		{"add", Alter{CPUAlter: 4, RAMAlter: 0.5},
			types.Resources{CPU: 20, RAMGB: 64.5, DiskGB: 500}, types.Resources{}},
		{"floored at zero", Alter{CPUAlter: -20, RAMAlter: -100},
			types.Resources{DiskGB: 500}, types.Resources{}},
		// The design's worked example: 16 CPUs with cpuOverbook 12.
		{"overbook on top", Alter{CPUOverbook: 12, RAMOverbook: 16},
			host, types.Resources{CPU: 12, RAMGB: 16}},
		{"negative overbook (rejected by Validate) floors at zero", Alter{CPUOverbook: -3},
			host, types.Resources{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.a.Capacity(host)
			assert.Equal(t, host, c.Total)
			assert.Equal(t, tc.usable, c.Usable)
			assert.Equal(t, tc.over, c.Overbook)
			assert.Zero(t, c.Free, "free is the caller's, like used and reserved")
			assert.Zero(t, c.Used)
			assert.Zero(t, c.Reserved)
		})
	}
}
