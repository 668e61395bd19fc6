package cluster

import "time"

// every runs fn every interval and whenever kick fires (nil: ticks only),
// until the node stops. It is the shape of the node's level-triggered loops.
func (n *Node) every(interval time.Duration, kick <-chan struct{}, fn func()) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
		case <-kick:
		}
		fn()
	}
}
