// Package leakcheck lets tests wait for the goroutines they started to end.
package leakcheck

import (
	"runtime"
	"testing"
	"time"
)

// Goroutines waits up to within until no more than want goroutines run, and
// fails the test with every goroutine's stack if they do not. It polls from the
// test's own goroutine: require.Eventually runs its condition in a goroutine
// of its own, which the count would include.
func Goroutines(t testing.TB, want int, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for runtime.NumGoroutine() > want {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			n := runtime.NumGoroutine()
			t.Fatalf("%d goroutines, want at most %d:\n%s", n, want, buf[:runtime.Stack(buf, true)])
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
