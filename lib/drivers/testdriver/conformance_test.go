package testdriver

import (
	"encoding/json"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/drivertest"
	"github.com/hf-fleet/hf/lib/types"
)

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name     string
		instance string
		cfg      string
		tmplKey  string
	}{
		{"instant", "test", `{}`, "test"},
		{"delayed instance", "test/slow", `{"delay": "5ms", "cpus": 2}`, "test/slow"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var dirs []string
			meta := map[string]string{"claim": "c1", "lab_user": "alice"}
			drivertest.Conformance(t, drivertest.Harness{
				New: func(t *testing.T, dataDir string) drivers.Driver {
					mu.Lock()
					dirs = append(dirs, dataDir)
					mu.Unlock()
					// Checked while its subtest runs only: loading the
					// state of a data dir made it again once the subtest
					// had removed it, and left it in /tmp.
					t.Cleanup(func() {
						mu.Lock()
						defer mu.Unlock()
						dirs = slices.DeleteFunc(dirs, func(d string) bool { return d == dataDir })
					})
					d := New(drivers.Env{Instance: tc.instance, DataDir: dataDir, NodeName: "node-a"})
					require.NoError(t, d.Prepare(t.Context(), []byte(tc.cfg)))
					return d
				},
				Template: template("small", map[string]string{tc.tmplKey: `{}`}),
				Meta:     meta,
				CheckRunning: func(t *testing.T, r types.Resource) {
					var data resourceData
					require.NoError(t, json.Unmarshal(r.Data, &data))
					assert.Equal(t, meta, data.Meta)
					assert.Equal(t, "node-a", r.Info["host"])
					assert.Equal(t, tc.instance, r.Driver)
				},
				CheckGone: func(t *testing.T, r types.Resource) {
					mu.Lock()
					defer mu.Unlock()
					for _, dir := range dirs {
						held, err := loadState(dir)
						require.NoError(t, err)
						assert.NotContains(t, held, r.ID, "state in %s", dir)
					}
				},
			})
		})
	}
}
