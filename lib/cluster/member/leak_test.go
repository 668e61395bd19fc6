package member_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/hf-fleet/hf/lib/cluster/member/membertest"
	"github.com/hf-fleet/hf/lib/internal/leakcheck"
)

func TestNoGoroutineLeak(t *testing.T) {
	before := runtime.NumGoroutine()
	t.Run("cluster", func(t *testing.T) {
		c := membertest.Start(t, 4, membertest.Options{})
		for i := range 50 {
			put(t, c.Nodes[i%4].Store, fmt.Sprintf("leak-%d", i), "alice")
		}
		c.WaitConverged(5 * time.Second)
		c.Net.Partition([]string{"n0"}, []string{"n1", "n2", "n3"})
		put(t, c.Nodes[0].Store, "cut-off", "alice")
		c.Kill(3)
		c.Stop(2)
		// The cleanup stops the rest and closes the stores.
	})
	leakcheck.Goroutines(t, before, 10*time.Second)
}
