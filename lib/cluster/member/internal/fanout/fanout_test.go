package fanout

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

type rec struct{ writer, name string }

func writer(r *rec) string { return r.writer }

func names(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("n%02d", i))
	}
	return out
}

// Broadcast: the writer's children in its tree, or every other member when
// direct.
func TestBroadcast(t *testing.T) {
	v := NewView(names(10))
	assert.Equal(t, []string{"n01", "n02", "n03"}, v.Broadcast("n00", 3))
	assert.Equal(t, []string{"n06", "n07", "n08"}, v.Broadcast("n05", 3), "rotated to the writer")
	assert.Len(t, v.Broadcast("n05", -1), 9, "direct: every peer, not self")
	assert.Len(t, NewView(names(10)[1:]).Broadcast("n00", -1), 9, "a view without self")
}

// Relay passes a write on to self's children in its writer's tree, never
// back to the sender or the writer; Bypass sends to the unreachable peer's
// children instead. Records of several writers go down each writer's tree,
// grouped in the order the writers first appear.
func TestRelayAndBypass(t *testing.T) {
	v := NewView(names(13))
	recs := []rec{{"n00", "a"}, {"n04", "b"}, {"n00", "c"}}
	got := Relay(v, "n01", "n00", 3, recs, writer)
	assert.Equal(t, []Send[rec]{
		{Peer: "n04", Recs: []rec{{"n00", "a"}, {"n00", "c"}}},
		{Peer: "n05", Recs: []rec{{"n00", "a"}, {"n00", "c"}}},
		{Peer: "n06", Recs: []rec{{"n00", "a"}, {"n00", "c"}}},
		// in n04's tree n01 is at position 10: a leaf
	}, got)
	assert.Empty(t, Relay(v, "n01", "n00", -1, recs, writer), "direct: no relays")

	got = Bypass(v, "n00", "n01", 3, recs[:1], writer)
	assert.Equal(t, []Send[rec]{
		{Peer: "n04", Recs: recs[:1]}, {Peer: "n05", Recs: recs[:1]}, {Peer: "n06", Recs: recs[:1]},
	}, got, "n01's children")
	// n11 is at position 7 in n04's tree, a leaf: nothing to bypass to.
	assert.Empty(t, Bypass(v, "n00", "n11", 3, []rec{{"n04", "b"}}, writer))
	// Views that lack the unreachable peer (declared dead already) still
	// place it where it was.
	lacking := NewView(append(names(13)[:1], names(13)[2:]...))
	assert.Equal(t, []string{"n04", "n05", "n06"}, lacking.Children("n00", "n01", 3))
}

// TestChildrenTree: from any root, the tree reaches every member exactly
// once and nobody sends more than k times.
func TestChildrenTree(t *testing.T) {
	for _, n := range []int{1, 2, 7, 50, 200} {
		v := NewView(names(n))
		for _, root := range []string{v.Names()[0], v.Names()[n-1]} {
			reached := map[string]int{root: 1}
			for level := []string{root}; len(level) > 0; {
				var next []string
				for _, m := range level {
					kids := v.Children(root, m, 3)
					assert.LessOrEqual(t, len(kids), 3)
					for _, c := range kids {
						reached[c]++
					}
					next = append(next, kids...)
				}
				level = next
			}
			assert.Len(t, reached, n)
			for m, c := range reached {
				assert.Equal(t, 1, c, "n=%d root %s: %s", n, root, m)
			}
		}
	}
}

func TestQueue(t *testing.T) {
	q := NewQueue(func(r *rec) string { return r.name }, func(r *rec) int { return 10 })
	q.Add(rec{"w", "a"})
	q.Add(rec{"w", "b"})
	q.Add(rec{"x", "a"})
	assert.Equal(t, 2, q.Len(), "a replaced in place")
	assert.Equal(t, []rec{{"x", "a"}}, q.Take(15))
	assert.Equal(t, 10, q.Bytes())
	q.Add(rec{"y", "a"})
	assert.Equal(t, []rec{{"w", "b"}, {"y", "a"}}, q.Drain())
	assert.Zero(t, q.Len())
	assert.Nil(t, q.Take(100))
}

// spread disseminates one write of root's over the fleet as the members
// would, each with its own view, the dead member failing every send, and
// returns who got it.
func spread(views map[string]View, root, dead string, k int) map[string]bool {
	got := map[string]bool{root: true}
	type msg struct{ from, to string }
	var todo []msg
	for _, c := range views[root].Broadcast(root, k) {
		todo = append(todo, msg{root, c})
	}
	r := []rec{{writer: root, name: "x"}}
	for len(todo) > 0 {
		m := todo[0]
		todo = todo[1:]
		var next []Send[rec]
		sender := m.to
		switch {
		case m.to == dead: // the send fails: the sender goes around it
			sender = m.from
			next = Bypass(views[m.from], m.from, m.to, k, r, writer)
		case got[m.to]:
			continue
		default:
			got[m.to] = true
			next = Relay(views[m.to], m.to, m.from, k, r, writer)
		}
		for _, s := range next {
			todo = append(todo, msg{sender, s.Peer})
		}
	}
	return got
}

// While some members know that n01 died and others do not, a write still
// reaches every live member: those that know keep n01 in the tree, down, and
// send around it; the others send to it, fail, and bypass it. Had the first
// dropped n01 from their views, every member after it would have moved up
// one place for them, and the two kinds of member would disagree about who
// is whose child.
func TestMixedViewsOfADeath(t *testing.T) {
	all := names(40)
	up := NewView(all)
	down := NewView(append(all[:1:1], all[2:]...)).WithDown("n01")
	dropped := NewView(append(all[:1:1], all[2:]...))
	for _, tc := range []struct {
		name    string
		knowing View
		missed  bool
	}{{"kept down", down, false}, {"dropped", dropped, true}} {
		t.Run(tc.name, func(t *testing.T) {
			views := map[string]View{}
			for i, n := range all {
				views[n] = up
				if i%2 == 0 { // every other member has learnt of the death
					views[n] = tc.knowing
				}
			}
			for _, root := range []string{"n00", "n20"} {
				got := spread(views, root, "n01", 3)
				if tc.missed {
					assert.Less(t, len(got), len(all)-1, "root %s", root)
					continue
				}
				assert.Len(t, got, len(all)-1, "root %s: every live member", root)
				assert.False(t, got["n01"])
			}
		})
	}
	assert.Equal(t, []string{"n04", "n05", "n06", "n02", "n03"}, down.Broadcast("n00", 3), "the writer sends to its dead child's children")
}
