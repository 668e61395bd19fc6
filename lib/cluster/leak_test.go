package cluster

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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

// Spawned goroutines are reused: functions spawned one after the other run
// on one goroutine (a few, should the next come before the goroutine is
// back waiting), and Stop still ends it.
func TestSpawnReusesGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	tn := newTestNode(t, "n1", `{"cpus": 4, "ram_gb": 8}`)
	id := func() string {
		buf := make([]byte, 64)
		f := strings.Fields(string(buf[:runtime.Stack(buf, false)]))
		return f[1] // "goroutine N [running]:"
	}
	ids := map[string]bool{}
	for range 20 {
		done := make(chan string)
		tn.node.spawn(func() { done <- id() })
		ids[<-done] = true
		time.Sleep(5 * time.Millisecond) // the goroutine is back waiting (mostly)
	}
	assert.Less(t, len(ids), 5, "20 functions one after the other ran on %d goroutines", len(ids))
	tn.stop()
	leakcheck.Goroutines(t, before, 5*time.Second)
}
