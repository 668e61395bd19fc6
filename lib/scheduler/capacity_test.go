package scheduler

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hf-fleet/hf/lib/types"
)

func res(cpu, ram, disk float64) types.Resources {
	return types.Resources{CPU: cpu, RAMGB: ram, DiskGB: disk}
}

func TestHostCapacity(t *testing.T) {
	tests := []struct {
		name  string
		total types.Resources
		alter Alter
		want  types.Capacity
	}{
		{
			name:  "no alter",
			total: res(16, 64, 500),
			want:  types.Capacity{Total: res(16, 64, 500), Usable: res(16, 64, 500)},
		},
		{
			name:  "negative alter keeps some for the host",
			total: res(16, 64, 500),
			alter: Alter{CPUAlter: -2, RAMAlter: -8},
			want:  types.Capacity{Total: res(16, 64, 500), Usable: res(14, 56, 500)},
		},
		{
			name:  "positive alter and overbook",
			total: res(16, 64, 0),
			alter: Alter{CPUAlter: 4, RAMAlter: 16, CPUOverbook: 12, RAMOverbook: 32},
			want:  types.Capacity{Total: res(16, 64, 0), Usable: res(20, 80, 0), Overbook: res(12, 32, 0)},
		},
		{
			name:  "alter below zero clamps to zero",
			total: res(4, 8, 0),
			alter: Alter{CPUAlter: -10, RAMAlter: -9, CPUOverbook: -1, RAMOverbook: -1},
			want:  types.Capacity{Total: res(4, 8, 0), Usable: res(0, 0, 0)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, HostCapacity(tt.total, tt.alter))
		})
	}
}

func TestWithUsage(t *testing.T) {
	c := HostCapacity(res(16, 64, 100), Alter{CPUAlter: -2})
	got := WithUsage(c, res(4, 16, 10), res(2, 8, 0))
	assert.Equal(t, res(4, 16, 10), got.Used)
	assert.Equal(t, res(2, 8, 0), got.Reserved)
	assert.Equal(t, res(8, 40, 90), got.Free)
	assert.Equal(t, c.Usable, got.Usable, "usable is untouched")

	over := WithUsage(c, res(20, 0, 0), res(0, 0, 0))
	assert.Equal(t, -6.0, over.Free.CPU, "free goes negative when overbooked")
}

func TestFit(t *testing.T) {
	host16 := HostCapacity(res(16, 64, 0), Alter{CPUOverbook: 12})
	tests := []struct {
		name     string
		c        types.Capacity
		req      types.Resources
		overbook bool
		want     int64
	}{
		// The worked example from DESIGN.md: 16 CPUs, templates of 14, cpuOverbook 12.
		{"worked example with overbook: two fit", host16, res(14, 1, 0), true, 2},
		{"worked example without overbook: one fits", host16, res(14, 1, 0), false, 1},
		{"worked example, one placed, overbook: one more", WithUsage(host16, res(14, 1, 0), res(0, 0, 0)), res(14, 1, 0), true, 1},
		{"worked example, two placed, overbook: third does not fit (42 > 28)", WithUsage(host16, res(28, 2, 0), res(0, 0, 0)), res(14, 1, 0), true, 0},
		{"worked example, one placed, no overbook: none", WithUsage(host16, res(14, 1, 0), res(0, 0, 0)), res(14, 1, 0), false, 0},
		{"reservation counts like use", WithUsage(host16, res(0, 0, 0), res(14, 1, 0)), res(14, 1, 0), false, 0},
		{"used plus reserved", WithUsage(host16, res(4, 8, 0), res(4, 8, 0)), res(2, 4, 0), false, 4},
		{"ram bound", HostCapacity(res(32, 16, 0), Alter{}), res(1, 4, 0), false, 4},
		{"ram bound with ram overbook", HostCapacity(res(32, 16, 0), Alter{RAMOverbook: 8}), res(1, 4, 0), true, 6},
		{"ram overbook ignored when not allowed", HostCapacity(res(32, 16, 0), Alter{RAMOverbook: 8}), res(1, 4, 0), false, 4},
		{"negative alter", HostCapacity(res(8, 64, 0), Alter{CPUAlter: -2}), res(2, 1, 0), false, 3},
		{"alter eats everything", HostCapacity(res(8, 64, 0), Alter{CPUAlter: -8}), res(1, 1, 0), false, 0},
		{"disk checked when host reports disk", HostCapacity(res(64, 256, 100), Alter{}), res(1, 1, 30), false, 3},
		{"disk ignored when host reports none", HostCapacity(res(64, 256, 0), Alter{}), res(1, 1, 30), false, 64},
		{"zero dimension ignored", HostCapacity(res(4, 0, 0), Alter{}), res(1, 0, 0), false, 4},
		{"all-zero request is unlimited", HostCapacity(res(4, 8, 0), Alter{}), res(0, 0, 0), false, Unlimited},
		{"all-zero request on a full host is unlimited", WithUsage(HostCapacity(res(4, 8, 0), Alter{}), res(9, 9, 0), res(0, 0, 0)), res(0, 0, 0), false, Unlimited},
		{"over-committed host is never negative", WithUsage(host16, res(40, 0, 0), res(0, 0, 0)), res(1, 0, 0), true, 0},
		{"float rounding still fits", WithUsage(HostCapacity(res(0.3, 1, 0), Alter{}), res(0.1, 0, 0), res(0.1, 0, 0)), res(0.1, 0, 0), false, 1},
		{"tiny request capped at unlimited", HostCapacity(res(1e12, 0, 0), Alter{}), res(1e-6, 0, 0), false, Unlimited},
		{"remote quota", types.Capacity{Usable: res(100, 400, 0), Used: res(96, 10, 0)}, res(2, 8, 0), false, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, Fit(tt.c, tt.req, tt.overbook))
		})
	}
}

func TestReserve(t *testing.T) {
	host16 := HostCapacity(res(16, 64, 0), Alter{CPUOverbook: 12})
	tests := []struct {
		name     string
		c        types.Capacity
		req      types.Resources
		overbook bool
		ok       bool
		reason   string
	}{
		{"fits", host16, res(14, 1, 0), false, true, ""},
		{"cpu short", WithUsage(host16, res(14, 0, 0), res(0, 0, 0)), res(4, 1, 0), false, false, "cpu 2.0 free of 4.0 needed"},
		{"cpu short with overbook", WithUsage(host16, res(14, 0, 0), res(14, 0, 0)), res(4, 1, 0), true, false, "cpu 0.0 free of 4.0 needed (overbook included)"},
		{"ram short", WithUsage(HostCapacity(res(8, 16, 0), Alter{}), res(0, 12, 0), res(0, 2, 0)), res(1, 4, 0), false, false, "ram 2.0 free of 4.0 needed"},
		{"disk short", WithUsage(HostCapacity(res(8, 16, 50), Alter{}), res(0, 0, 40), res(0, 0, 0)), res(1, 1, 20), false, false, "disk 10.0 free of 20.0 needed"},
		{"over-committed shows zero free", WithUsage(host16, res(20, 0, 0), res(0, 0, 0)), res(1, 0, 0), false, false, "cpu 0.0 free of 1.0 needed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ok, reason := Reserve(tt.c, tt.req, tt.overbook)
			assert.Equal(t, tt.ok, ok)
			assert.Equal(t, tt.reason, reason)
			assert.Equal(t, tt.ok, Fit(tt.c, tt.req, tt.overbook) >= 1, "Reserve agrees with Fit")
		})
	}
}

// TestReserveNeverOvercommits reserves until Reserve says no and checks the
// total stays within the limit, for a few awkward sizes.
func TestReserveNeverOvercommits(t *testing.T) {
	for _, req := range []types.Resources{res(0.1, 0.3, 0), res(14, 1, 0), res(3, 7, 0), res(0.7, 0.1, 0)} {
		for _, overbook := range []bool{false, true} {
			c := HostCapacity(res(16, 64, 0), Alter{CPUAlter: -1, CPUOverbook: 12, RAMOverbook: 4})
			want := Fit(c, req, overbook)
			var n int64
			for {
				ok, _ := Reserve(c, req, overbook)
				if !ok {
					break
				}
				c = WithUsage(c, c.Used, c.Reserved.Add(req))
				n++
				if n > 10000 {
					t.Fatal("reserve never stops")
				}
			}
			limit := c.Usable
			if overbook {
				limit = limit.Add(c.Overbook)
			}
			assert.Equal(t, want, n, "Fit predicted the count for %+v", req)
			assert.LessOrEqual(t, c.Reserved.CPU, limit.CPU+1e-6)
			assert.LessOrEqual(t, c.Reserved.RAMGB, limit.RAMGB+1e-6)
		}
	}
}
