package member

import "slices"

// DefaultFanout is how many peers a write is sent to by its writer and by
// each member that relays it: at most 3 sends per write per member, and a
// write reaches 200 members in 5 hops.
const DefaultFanout = 3

// treeChildren returns the members self sends a write of root's to: its
// children in the k-ary tree over live, rooted at root. The tree is the
// members in name order, rotated so that root is at position 0, and the
// member at position p has the children at k*p+1 .. k*p+k. Every member
// computes the same tree from the same membership, so a write reaches each
// live member exactly once and no member sends it more than k times; where
// views differ for a moment (a join, a death) a member may be skipped or
// reached twice: anti-entropy repairs the first, the version check drops the
// second. live need not be sorted; root and self need not be in it.
func treeChildren(live []string, root, self string, k int) []string {
	members := slices.Clone(live)
	for _, n := range []string{root, self} {
		if !slices.Contains(members, n) {
			members = append(members, n)
		}
	}
	slices.Sort(members)
	members = slices.Compact(members)
	n := len(members)
	r, _ := slices.BinarySearch(members, root)
	s, _ := slices.BinarySearch(members, self)
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
