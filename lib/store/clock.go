package store

import (
	"sync"
	"time"
)

// hlcLogicalBits is how many low bits of an HLC value count events within one
// millisecond.
const hlcLogicalBits = 16

// HLC is a hybrid logical clock. A value is physical milliseconds since the Unix
// epoch shifted left by 16 bits, plus a logical counter in the low 16 bits. It
// never goes backwards: not when the wall clock does, and not across a restart
// when seeded with the highest value issued before.
type HLC struct {
	mu   sync.Mutex
	now  func() time.Time
	last uint64
}

// NewHLC builds a clock reading wall time from now (time.Now when nil) that
// issues only values above last.
func NewHLC(now func() time.Time, last uint64) *HLC {
	if now == nil {
		now = time.Now
	}
	return &HLC{now: now, last: last}
}

// Now ticks the clock: max(wall<<16, last+1).
func (c *HLC) Now() uint64 {
	wall := HLCFromTime(c.now())
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last = max(wall, c.last+1)
	return c.last
}

// Update moves the clock past a value seen from another node, so the next Now
// orders after it.
func (c *HLC) Update(remote uint64) {
	c.mu.Lock()
	c.last = max(c.last, remote)
	c.mu.Unlock()
}

// Last is the highest value issued or seen.
func (c *HLC) Last() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last
}

// HLCFromTime is the HLC value of t with a zero logical counter; times before
// the epoch are 0.
func HLCFromTime(t time.Time) uint64 {
	ms := t.UnixMilli()
	if ms < 0 {
		return 0
	}
	return uint64(ms) << hlcLogicalBits
}

// HLCTime is the wall time of an HLC value (its physical part), for logs and
// age checks.
func HLCTime(v uint64) time.Time {
	return time.UnixMilli(int64(v >> hlcLogicalBits)).UTC()
}
