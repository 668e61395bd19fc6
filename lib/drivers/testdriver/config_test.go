package testdriver

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

func TestParseConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  string
		want Config
	}{
		{"empty gives defaults", ``, Config{CPUs: 4, RAMGB: 8}},
		{"null gives defaults", `null`, Config{CPUs: 4, RAMGB: 8}},
		{"partial keeps other defaults", `{"cpus": 16}`, Config{CPUs: 16, RAMGB: 8}},
		{"everything", `{"cpus": 2, "ram_gb": 3.5, "disk_gb": 100, "delay": "250ms", "failure_rate": 0.25,
			"cpu_alter": -1, "ram_alter": -0.5, "cpu_overbook": 8, "ram_overbook": 4}`,
			Config{CPUs: 2, RAMGB: 3.5, DiskGB: 100, Delay: types.D(250 * time.Millisecond), FailureRate: 0.25,
				Alter: drivers.Alter{CPUAlter: -1, RAMAlter: -0.5, CPUOverbook: 8, RAMOverbook: 4}}},
		{"delay in seconds", `{"delay": 2}`, Config{CPUs: 4, RAMGB: 8, Delay: types.D(2 * time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tc.cfg))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, cfg, want string
	}{
		{"unknown key", `{"cpu": 4}`, `config: unknown key "cpu"`},
		{"alter not a number", `{"cpu_alter": "x"}`, `config: cpu_alter: want a number, got string`},
		{"cpus not a number", `{"cpus": true}`, `cpus: want a number`},
		{"bad delay", `{"delay": "soon"}`, `delay: duration "soon"`},
		{"negative delay", `{"delay": "-1s"}`, `delay: must not be negative`},
		{"failure rate too big", `{"failure_rate": 1.5}`, `failure_rate: must be between 0 and 1`},
		{"negative cpus", `{"cpus": -1}`, `cpus: must be a non-negative number`},
		{"negative overbook", `{"ram_overbook": -2}`, `ram_overbook: must not be negative`},
		{"not an object", `[1]`, `config: want an object, got array`},
		{"trailing data", `{"cpus": 1} {}`, `unexpected data after the config object`},
		{"broken json", `{"cpus": `, `not valid JSON`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := New(drivers.Env{DataDir: t.TempDir()})
			err := d.Prepare(t.Context(), []byte(tc.cfg))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.ErrorIs(t, err, types.ErrInvalid)
		})
	}
}

func TestValidateTemplate(t *testing.T) {
	for _, tc := range []struct {
		name     string
		instance string
		pc       map[string]string
		want     string // empty: valid
	}{
		{"empty object", "test", map[string]string{"test": `{}`}, ""},
		{"empty entry", "test", map[string]string{"test": ``}, ""},
		{"null entry", "test", map[string]string{"test": `null`}, ""},
		{"all options", "test", map[string]string{"test": `{"fail": true, "delay": "1s"}`}, ""},
		{"instance entry", "test/big", map[string]string{"test/big": `{}`}, ""},
		{"type entry serves an instance", "test/big", map[string]string{"test": `{}`}, ""},
		{"instance entry wins over type", "test/big", map[string]string{"test/big": `{}`, "test": `{"x": 1}`}, ""},
		{"no entry", "test", map[string]string{"docker": `{}`},
			`spec.providerConfiguration: has no entry for "test"`},
		{"no entry for instance", "test/big", map[string]string{"docker": `{}`},
			`spec.providerConfiguration: has no entry for "test/big" or "test"`},
		{"unknown key", "test", map[string]string{"test": `{"fial": true}`},
			`spec.providerConfiguration.test: unknown key "fial"`},
		{"unknown key in instance entry", "test/big", map[string]string{"test/big": `{"fial": true}`},
			`spec.providerConfiguration.test/big: unknown key "fial"`},
		{"bad fail", "test", map[string]string{"test": `{"fail": "yes"}`},
			`spec.providerConfiguration.test.fail: want true or false`},
		{"bad delay", "test", map[string]string{"test": `{"delay": "later"}`},
			`spec.providerConfiguration.test.delay: duration "later"`},
		{"negative delay", "test", map[string]string{"test": `{"delay": "-1s"}`},
			`spec.providerConfiguration.test.delay: must not be negative`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := New(drivers.Env{Instance: tc.instance})
			err := d.ValidateTemplate(template("t", tc.pc))
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, types.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestHostCapacity(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  string
		want types.Capacity
	}{
		{"defaults", `{}`, types.Capacity{
			Total:  types.Resources{CPU: 4, RAMGB: 8},
			Usable: types.Resources{CPU: 4, RAMGB: 8},
		}},
		{"alter keeps some for the host, overbook on top", `{"cpus": 16, "ram_gb": 64, "disk_gb": 500,
			"cpu_alter": -2, "ram_alter": -4, "cpu_overbook": 12, "ram_overbook": 16}`, types.Capacity{
			Total:    types.Resources{CPU: 16, RAMGB: 64, DiskGB: 500},
			Usable:   types.Resources{CPU: 14, RAMGB: 60, DiskGB: 500},
			Overbook: types.Resources{CPU: 12, RAMGB: 16},
		}},
		{"positive alter adds", `{"cpus": 2, "cpu_alter": 2}`, types.Capacity{
			Total:  types.Resources{CPU: 2, RAMGB: 8},
			Usable: types.Resources{CPU: 4, RAMGB: 8},
		}},
		{"alter below zero floors at zero", `{"cpus": 2, "cpu_alter": -5, "ram_alter": -100}`, types.Capacity{
			Total: types.Resources{CPU: 2, RAMGB: 8},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := prepared(t, t.TempDir(), tc.cfg)
			assert.Equal(t, tc.want, d.HostCapacity())
		})
	}
}
