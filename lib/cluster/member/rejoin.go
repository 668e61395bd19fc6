package member

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// membershipLoop calls OnMembership after membership changes. Changes that
// come in a burst are folded into one call.
func (m *Member) membershipLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.changed:
			if m.cfg.OnMembership != nil {
				m.cfg.OnMembership()
			}
		}
	}
}

// rejoinLoop joins the configured and known addresses that are not live
// members, and the members known to be dead or to have left, every
// RejoinInterval (and at once when it knows addresses besides Join, which
// Start joins itself). memberlist stops talking to a member it declared dead
// or that left, so without this two halves of a healed partition would stay
// apart, and a member restarted with nobody left in its Join list (or none,
// as hf-node's service runs it) would stay alone.
func (m *Member) rejoinLoop(ctx context.Context) {
	if len(m.cfg.Known) > 0 {
		m.rejoin(ctx)
	}
	tick := time.NewTicker(m.cfg.RejoinInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			m.rejoin(ctx)
		}
	}
}

// maxRejoins bounds the joins one rejoin runs at once: each may wait up to
// memberlist's TCPTimeout for an address that swallows packets.
const maxRejoins = 8

// rejoin joins every address once, in parallel; failures are normal (dead
// members are mostly dead).
func (m *Member) rejoin(ctx context.Context) {
	live, gone := m.table.addrs()
	addrs := rejoinAddrs(slices.Concat(m.cfg.Join, m.cfg.Known), gone, append(live, m.Addr()))
	if len(addrs) == 0 {
		return
	}
	var (
		wg        sync.WaitGroup
		sem       = make(chan struct{}, maxRejoins)
		contacted atomic.Int64
	)
	for _, a := range addrs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if n, err := m.Join(ctx, []string{a}); err == nil {
				contacted.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	m.log.Debug("rejoin", "addrs", len(addrs), "contacted", contacted.Load())
}

// rejoinAddrs is join plus gone, without duplicates and without the
// addresses of live members (self included): a push/pull with a live member
// adds nothing to memberlist's own periodic one.
func rejoinAddrs(join, gone, live []string) []string {
	out := slices.Concat(join, gone)
	slices.Sort(out)
	out = slices.Compact(out)
	return slices.DeleteFunc(out, func(a string) bool { return a == "" || slices.Contains(live, a) })
}
