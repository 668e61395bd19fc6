// Package fanout is the pure part of hf's dissemination: given a member's
// view of the live membership, whom it sends a write to (as its writer, as a
// relay, around a peer it could not reach), and the per-peer queue that
// coalesces what waits for one peer. It does no I/O and reads no clock:
// package member carries the sends out over memberlist, and package
// member/sim drives the same functions on a simulated network.
package fanout

import "slices"

// View is one member's view of the live membership: names, sorted and
// unique. It need not hold the member itself, nor a write's root. A View is
// read-only once built, so one view may serve many calls.
type View struct {
	names []string
}

// NewView builds a view from names in any order (copied).
func NewView(names []string) View {
	v := slices.Clone(names)
	if !slices.IsSorted(v) {
		slices.Sort(v)
	}
	return View{names: slices.Compact(v)}
}

// Names returns the view's names, sorted: read-only.
func (v View) Names() []string { return v.names }

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
// in its own tree, or every peer in the view when k <= 0 (direct).
func (v View) Broadcast(self string, k int) []string {
	if k > 0 {
		return v.Children(self, self, k)
	}
	return slices.DeleteFunc(slices.Clone(v.names), func(n string) bool { return n == self })
}

// Send is records for one peer.
type Send[R any] struct {
	Peer string
	Recs []R
}

// Relay returns where self passes on recs, records that came to it by push
// from peer from and were new to it: to its children in each record's
// writer's tree, never to from or to the writer. A record that was not new
// is not relayed (the caller leaves it out): self had it already, from
// another path or an older round, and relayed it then. writer names a
// record's writer, the root of its tree. Nothing is relayed when k <= 0.
func Relay[R any](v View, self, from string, k int, recs []R, writer func(*R) string) []Send[R] {
	if k <= 0 {
		return nil
	}
	var out []Send[R]
	for _, g := range groupBy(recs, writer) {
		for _, c := range v.Children(g.Peer, self, k) {
			if c != from && c != g.Peer {
				out = append(out, Send[R]{Peer: c, Recs: g.Recs})
			}
		}
	}
	return out
}

// Bypass returns where self sends recs that it could not send to peer:
// peer's children in each record's writer's tree, so that one unreachable
// member does not cut its subtree off until anti-entropy (which repairs peer
// itself). A child that fails in turn is bypassed the same way, down to the
// leaves. Nothing is bypassed when k <= 0 (direct: every member got its
// writer's send).
func Bypass[R any](v View, self, peer string, k int, recs []R, writer func(*R) string) []Send[R] {
	if k <= 0 {
		return nil
	}
	var out []Send[R]
	for _, g := range groupBy(recs, writer) {
		for _, c := range v.Children(g.Peer, peer, k) {
			if c != self && c != g.Peer {
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
