package member

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/hf-fleet/hf/lib/cluster/member/internal/fanout"
)

// TestTreeChildren: from any root, the tree reaches every member exactly
// once, nobody sends more than k times, and depth is logarithmic.
func TestTreeChildren(t *testing.T) {
	for _, tc := range []struct{ n, k int }{{1, 3}, {2, 3}, {4, 3}, {5, 3}, {10, 3}, {50, 3}, {200, 3}, {200, 1}, {17, 4}} {
		t.Run(fmt.Sprintf("n=%d,k=%d", tc.n, tc.k), func(t *testing.T) {
			var live []string
			for i := range tc.n {
				live = append(live, fmt.Sprintf("n%d", i))
			}
			for _, root := range []string{live[0], live[tc.n/2], live[tc.n-1]} {
				reached := map[string]int{root: 1}
				depth := 0
				for level := []string{root}; len(level) > 0; depth++ {
					var next []string
					for _, m := range level {
						kids := treeChildren(live, root, m, tc.k)
						assert.LessOrEqual(t, len(kids), tc.k)
						for _, c := range kids {
							reached[c]++
						}
						next = append(next, kids...)
					}
					level = next
				}
				assert.Len(t, reached, tc.n, "root %s", root)
				for m, c := range reached {
					assert.Equal(t, 1, c, "root %s: %s reached %d times", root, m, c)
				}
				if tc.k > 1 {
					assert.LessOrEqual(t, depth, 2+logk(tc.n, tc.k), "root %s", root)
				}
			}
		})
	}
}

func logk(n, k int) int {
	d := 0
	for p := 1; p < n; p *= k {
		d++
	}
	return d
}

// TestTreeChildrenViews: a root or a sender missing from the live list (a
// view that lags) still gets a tree; the list need not be sorted.
func TestTreeChildrenViews(t *testing.T) {
	live := []string{"c", "a", "d", "b"}
	assert.Equal(t, []string{"b", "c", "d"}, treeChildren(live, "a", "a", 3))
	assert.Equal(t, []string{"c", "d", "a"}, treeChildren(live, "b", "b", 3), "the tree wraps past the last name")
	assert.Equal(t, []string{"b", "c"}, treeChildren([]string{"a", "b", "c", "d"}, "d", "e", 2), "self not in the list: e is at position 1")
	assert.Empty(t, treeChildren(live, "a", "b", 3), "a leaf")
	kids := treeChildren(live, "x", "x", 2)
	assert.Equal(t, []string{"a", "b"}, kids, "root not in the list")
	assert.True(t, slices.IsSorted(kids))
	assert.Empty(t, treeChildren(live, "a", "b", 0))
}

// The trees are built over the live peers and the dead ones, down, so that
// a death changes nobody's place; a member that left, or died longer ago
// than ForgetAfter, is out.
func TestTableView(t *testing.T) {
	tbl, _, _, now := testTable()
	d := &eventDelegate{t: tbl}
	for i, n := range []string{"self", "a", "b", "c", "d"} {
		d.NotifyJoin(node(n, uint16(i+1)))
	}
	d.NotifyLeave(node("b", 3)) // died
	tbl.leavingNote("c")
	d.NotifyLeave(node("c", 4)) // left
	v := tbl.view()
	assert.Equal(t, []string{"a", "b", "d"}, v.Names())
	assert.True(t, v.Up("a"))
	assert.False(t, v.Up("b"), "dead: down")
	assert.Equal(t, []string{"a", "d"}, v.Broadcast("self", -1), "direct: the live peers")
	// self's tree over a, b, d, self: a, b, d are its children; b's place
	// stays its own
	assert.Equal(t, []string{"a", "d"}, v.Broadcast("self", 3))

	*now = now.Add(2 * time.Hour)
	assert.Equal(t, []string{"a", "d"}, tbl.view().Names(), "forgotten")
}

// treeChildren returns the members self sends a write of root's to: its
// children in the k-ary tree over live, rooted at root (fanout.View.Children,
// which package member/sim drives too). live need not be sorted; root and
// self need not be in it.
func treeChildren(live []string, root, self string, k int) []string {
	return fanout.NewView(live).Children(root, self, k)
}
