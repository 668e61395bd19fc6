//go:build !linux

package upgrade

import "time"

// Gone reports whether the peer of s is gone, where the kernel tells
// (Linux): elsewhere it cannot tell, and returns nil.
func Gone(s Stream, stall time.Duration) error { return nil }
