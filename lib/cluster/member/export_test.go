package member

import "context"

// RunRound runs one full (push) or pull-only anti-entropy round with peer
// now, as the loop would, and returns once it has sent its last message.
func (m *Member) RunRound(ctx context.Context, peer string, push bool) {
	m.ae.run(ctx, target{peer: peer, push: push})
}

// TreeDigest is the digest of the hash tree the member keeps (zero before
// its first build).
func (m *Member) TreeDigest() Digest {
	k := m.ae.keeper
	k.mu.Lock()
	t := k.tree
	k.mu.Unlock()
	if t == nil {
		return Digest{}
	}
	root, n := t.root()
	return Digest{Records: n, Root: root}
}

// RunPeriodicRound runs one round with peer as the periodic loop does:
// full, leaving writes younger than inFlightGrace alone.
func (m *Member) RunPeriodicRound(ctx context.Context, peer string) {
	m.ae.run(ctx, target{peer: peer, push: true, periodic: true})
}

// CollectNow runs the tombstone collection on the keeper's goroutine now
// and returns how many tombstones it collected; false when the tree is
// being built.
func (m *Member) CollectNow(ctx context.Context) (int, bool, error) {
	c, ok := m.ae.keeper.checkNow(ctx)
	return c.n, ok, c.err
}

// RelayedKept is how many pushed versions the member remembers having
// relayed.
func (m *Member) RelayedKept() int {
	m.relayed.mu.Lock()
	defer m.relayed.mu.Unlock()
	return len(m.relayed.seen)
}
