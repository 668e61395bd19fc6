package cluster

import (
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		buf := make([]byte, 1<<20)
		t.Fatalf("%d goroutines before, %d after stop:\n%s", before, n, buf[:runtime.Stack(buf, true)])
	}
}
