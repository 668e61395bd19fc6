// Package fanout is the pure part of hf's dissemination: given a member's
// view of the live membership, whom it sends a write to (as its writer, as a
// relay, around a peer it could not reach), and the per-peer queue that
// coalesces what waits for one peer. It does no I/O and reads no clock:
// package member carries the sends out over memberlist, and package
// member/sim drives the same functions on a simulated network.
package fanout

import "slices"

// View is one member's view of the membership the trees are built over:
// names, sorted and unique, some of them down (known to have died, not yet
// forgotten). It need not hold the member itself, nor a write's root. A
// View is read-only once built, so one view may serve many calls.
//
// A member that died stays in the trees, down: sends go around it to its
// children (as Bypass does for a send that failed) instead of the tree
// closing up over it. Members learn of a death seconds apart; were the dead
// one dropped from the name list, every member after it would move up one
// position, and while some members had dropped it and others not, they
// would disagree about who is whose child over most of the tree, and a
// write made then would miss whole subtrees until anti-entropy (package
// member/sim measures it). Kept down, the tree is the same in both views:
// one member bypasses the dead one at once, the other after its send
// fails. A member that comes back under its name takes its old place.
type View struct {
	names []string
	down  map[string]bool
}

// NewView builds a view of up members from names in any order (copied).
func NewView(names []string) View {
	v := slices.Clone(names)
	if !slices.IsSorted(v) {
		slices.Sort(v)
	}
	return View{names: slices.Compact(v)}
}

// WithDown returns v with down added (where missing) and marked down.
func (v View) WithDown(down ...string) View {
	if len(down) == 0 {
		return v
	}
	out := View{names: slices.Clone(v.names), down: map[string]bool{}}
	for n := range v.down {
		out.down[n] = true
	}
	for _, n := range down {
		if i, ok := slices.BinarySearch(out.names, n); !ok {
			out.names = slices.Insert(out.names, i, n)
		}
		out.down[n] = true
	}
	return out
}

// Names returns the view's names, up and down, sorted: read-only.
func (v View) Names() []string { return v.names }

// Up reports whether name is in the view and not down.
func (v View) Up(name string) bool {
	_, ok := slices.BinarySearch(v.names, name)
	return ok && !v.down[name]
}

// targets appends where a send meant for c in root's tree goes: c when it
// is up, else c's children in the tree, each the same way.
func (v View) targets(out []string, root, c string, k int) []string {
	if !v.down[c] {
		return append(out, c)
	}
	for _, cc := range v.Children(root, c, k) {
		out = v.targets(out, root, cc, k)
	}
	return out
}

// Children returns the members self sends a write of root's to: its
// children in the k-ary tree over the view, rooted at root. The tree is the
// members in name order (root and self added when the view lacks them),
// rotated so that root is at position 0, and the member at position p has
// the children at k*p+1 .. k*p+k. Every member computes the same tree from
// the same membership, so a write reaches each live member exactly once and
// no member sends it more than k times; where views differ for a moment (a
// join, a death) a member may be skipped or reached twice: anti-entropy
// repairs the first, the version check drops the second.
func (v View) Children(root, self string, k int) []string {
	members := v.names
	r, okr := slices.BinarySearch(members, root)
	s, oks := slices.BinarySearch(members, self)
	if !okr || !oks {
		members = slices.Clone(members)
		for _, n := range []string{root, self} {
			if i, ok := slices.BinarySearch(members, n); !ok {
				members = slices.Insert(members, i, n)
			}
		}
		r, _ = slices.BinarySearch(members, root)
		s, _ = slices.BinarySearch(members, self)
	}
	n := len(members)
	pos := (s - r + n) % n
	var out []string
	for c := k*pos + 1; c <= k*pos+k && c < n; c++ {
		if c <= pos { // k < 1 would loop back up the tree
			break
		}
		out = append(out, members[(c+r)%n])
	}
	return out
}

// Broadcast returns the peers self sends its own writes to: its children
// in its own tree (a child that is down replaced by its own children), or
// every up peer in the view when k <= 0 (direct).
func (v View) Broadcast(self string, k int) []string {
	if k > 0 {
		var out []string
		for _, c := range v.Children(self, self, k) {
			out = v.targets(out, self, c, k)
		}
		return out
	}
	return slices.DeleteFunc(slices.Clone(v.names), func(n string) bool { return n == self || v.down[n] })
}

// Send is records for one peer.
type Send[R any] struct {
	Peer string
	Recs []R
}

// Relay returns where self passes on recs, records that came to it by push
// from peer from and were new to it: to its children in each record's
// writer's tree (around those down), never to from or to the writer. A record that was not new
// is not relayed (the caller leaves it out): self had it already, from
// another path or an older round, and relayed it then. writer names a
// record's writer, the root of its tree. Nothing is relayed when k <= 0.
func Relay[R any](v View, self, from string, k int, recs []R, writer func(*R) string) []Send[R] {
	return forward(v, self, from, k, recs, writer)
}

// Bypass returns where self sends recs that it could not send to peer:
// peer's children in each record's writer's tree (around those down), so that one unreachable
// member does not cut its subtree off until anti-entropy (which repairs peer
// itself). A child that fails in turn is bypassed the same way, down to the
// leaves. Nothing is bypassed when k <= 0 (direct: every member got its
// writer's send).
func Bypass[R any](v View, self, peer string, k int, recs []R, writer func(*R) string) []Send[R] {
	return forward(v, peer, self, k, recs, writer)
}

// forward returns the sends of recs to the children of at in each record's
// writer's tree (around those down), leaving out skip and the writer.
func forward[R any](v View, at, skip string, k int, recs []R, writer func(*R) string) []Send[R] {
	if k <= 0 {
		return nil
	}
	var out []Send[R]
	for _, g := range groupBy(recs, writer) {
		var to []string
		for _, c := range v.Children(g.Peer, at, k) {
			to = v.targets(to, g.Peer, c, k)
		}
		for _, c := range to {
			if c != skip && c != g.Peer {
				out = append(out, Send[R]{Peer: c, Recs: g.Recs})
			}
		}
	}
	return out
}

// groupBy groups recs by writer, in the order each writer first appears
// (deterministic, unlike a map's).
func groupBy[R any](recs []R, writer func(*R) string) []Send[R] {
	var out []Send[R]
	at := map[string]int{}
	for i := range recs {
		w := writer(&recs[i])
		j, ok := at[w]
		if !ok {
			j = len(out)
			at[w] = j
			out = append(out, Send[R]{Peer: w})
		}
		out[j].Recs = append(out[j].Recs, recs[i])
	}
	return out
}
