package cluster

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/internal/leakcheck"
)

// Stopping a node ends every goroutine it started, allocations included.
func TestStopLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8, "delay": "1h"}`)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(claim("c1", "small", time.Minute))
	// An allocation stuck in its driver must end with Stop too.
	require.Eventually(t, func() bool {
		ms := tn.machines()
		if len(ms) != 1 {
			return false
		}
		e, ok := tn.node.acc.get(ms[0].Metadata.Name)
		return ok && e.Busy // allocating

	}, 5*time.Second, 5*time.Millisecond)
	tn.stop()
	leakcheck.Goroutines(t, before, 5*time.Second)
}
