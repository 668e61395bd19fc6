package sim

import (
	"fmt"
	"time"
)

// Config describes one simulated run. Zero fields take the defaults below.
type Config struct {
	// Nodes is the fleet size (default 50).
	Nodes int
	// Fanout is the tree's k; negative sends every write straight from its
	// writer to every peer (direct). Zero means 3.
	Fanout int
	// Writes are made one every WriteInterval by Writer (default 200 writes,
	// 20 ms apart, by member 0). RandomWriters spreads them over every
	// live member instead.
	Writes        int
	WriteInterval time.Duration
	RandomWriters bool
	// RecordBytes is a record's encoded size (default 600 B).
	RecordBytes int

	// LatencyMin and LatencyMax bound a message's one-way latency, drawn
	// uniformly (default 0.2-2 ms).
	LatencyMin, LatencyMax time.Duration
	// SendCost is a member's CPU per message sent (default 50 us) and
	// Bandwidth its bytes per second (default 125 MB/s, 1 Gbit/s);
	// ApplyCost its CPU per message received (default 20 us).
	SendCost  time.Duration
	Bandwidth float64
	ApplyCost time.Duration
	// Loss is the share of messages that lose a segment and arrive RTO
	// later (default 0; RTO default 200 ms).
	Loss float64
	RTO  time.Duration
	// CoalesceWindow is how long the writer's pusher waits for more
	// writes before it sends (default 1 ms, member's coalesceWindow).
	CoalesceWindow time.Duration

	// Kill makes member Victim (default the writer's first child in its
	// tree, as scaletest's DeadMember does) die at KillAt (default just
	// before the first write). Each live member learns of it DetectAfter
	// plus up to DetectSpread later (default 35 s + 11 s, scaletest's
	// relaxed fleets: the victim stays in every view during the writes).
	Kill                      bool
	Victim                    int
	KillAt                    time.Duration
	DetectAfter, DetectSpread time.Duration
	// DeadDial is how long a send to a dead member takes to fail (default
	// one round trip: the connection is refused; across hosts a dial may
	// time out instead).
	DeadDial time.Duration

	// AEInterval is each member's anti-entropy period (default 2 s, as in
	// scaletest; the node's default is 30 s) and AEGrace how old a write
	// must be before a periodic round moves it (default 1 s).
	AEInterval, AEGrace time.Duration

	// Seed seeds the random source: the same config gives the same run.
	Seed uint64
	// Horizon bounds the virtual time simulated (default 10 min).
	Horizon time.Duration
}

func (c Config) withDefaults() Config {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	if c.Nodes == 0 {
		c.Nodes = 50
	}
	if c.Fanout == 0 {
		c.Fanout = 3
	}
	if c.Writes == 0 {
		c.Writes = 200
	}
	def(&c.WriteInterval, 20*time.Millisecond)
	if c.RecordBytes == 0 {
		c.RecordBytes = 600
	}
	def(&c.LatencyMin, 200*time.Microsecond)
	def(&c.LatencyMax, 2*time.Millisecond)
	def(&c.SendCost, 50*time.Microsecond)
	if c.Bandwidth == 0 {
		c.Bandwidth = 125e6
	}
	def(&c.ApplyCost, 20*time.Microsecond)
	def(&c.RTO, 200*time.Millisecond)
	def(&c.CoalesceWindow, time.Millisecond)
	if c.Victim == 0 {
		c.Victim = 1 // member 0 writes: member 1 is its first child
	}
	def(&c.DetectAfter, 35*time.Second)
	def(&c.DetectSpread, 11*time.Second)
	def(&c.AEInterval, 2*time.Second)
	def(&c.AEGrace, time.Second)
	def(&c.Horizon, 10*time.Minute)
	return c
}

func (c Config) validate() error {
	switch {
	case c.Nodes < 2:
		return fmt.Errorf("nodes %d: need at least 2", c.Nodes)
	case c.LatencyMax < c.LatencyMin:
		return fmt.Errorf("latency %v-%v: max below min", c.LatencyMin, c.LatencyMax)
	case c.Kill && (c.Victim < 0 || c.Victim >= c.Nodes):
		return fmt.Errorf("victim %d: not a member", c.Victim)
	case c.Loss < 0 || c.Loss >= 1:
		return fmt.Errorf("loss %v: want [0, 1)", c.Loss)
	}
	return nil
}
