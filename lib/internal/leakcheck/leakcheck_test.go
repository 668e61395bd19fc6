package leakcheck

import (
	"runtime"
	"testing"
	"time"
)

// fakeT records a failure instead of ending the test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper()               {}
func (f *fakeT) Fatalf(string, ...any) { f.failed = true }

func TestGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	stop := make(chan struct{})
	go func() { <-stop }()

	f := &fakeT{TB: t}
	Goroutines(f, base, 50*time.Millisecond)
	if !f.failed {
		t.Fatal("a goroutine still running was not reported")
	}

	close(stop)
	f = &fakeT{TB: t}
	Goroutines(f, base, 5*time.Second)
	if f.failed {
		t.Fatal("reported a leak after the goroutine ended")
	}
}
