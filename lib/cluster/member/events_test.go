package member

import (
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func node(name string, port uint16) *memberlist.Node {
	return &memberlist.Node{Name: name, Addr: net.IPv4(127, 0, 0, 1), Port: port}
}

// testTable is a members table with a fake clock that counts signals.
func testTable() (*members, *int, *[]string, *time.Time) {
	changed, joined := 0, []string{}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	t := newMembers("self", time.Hour, func() { changed++ }, func(n string) { joined = append(joined, n) }, func(string) {})
	t.now = func() time.Time { return now }
	return t, &changed, &joined, &now
}

func TestMembersTable(t *testing.T) {
	tbl, changed, joined, now := testTable()
	d := &eventDelegate{t: tbl}
	d.NotifyJoin(node("self", 1))
	d.NotifyJoin(node("b", 2))
	d.NotifyJoin(node("a", 3))
	assert.Equal(t, []string{"a", "b", "self"}, tbl.live())
	assert.Equal(t, []string{"a", "b"}, tbl.peers())
	assert.Equal(t, []string{"b", "a"}, *joined, "self is not a peer to repair")
	assert.Equal(t, 3, *changed)

	n, ok := tbl.lookup("a")
	require.True(t, ok)
	assert.Equal(t, "127.0.0.1:3", n.Address())

	// A leaving note before the leave: left.
	tbl.leavingNote("a")
	d.NotifyLeave(node("a", 3))
	// A leave without a note: dead; a note arriving afterwards: left.
	d.NotifyLeave(node("b", 2))
	states := tbl.states()
	require.Len(t, states, 3)
	assert.Equal(t, MemberState{Name: "a", Addr: "127.0.0.1:3", State: StateLeft, Since: *now}, states[0])
	assert.Equal(t, StateDead, states[1].State)
	live, gone := tbl.addrs()
	assert.Equal(t, []string{"127.0.0.1:1"}, live)
	assert.Equal(t, []string{"127.0.0.1:3", "127.0.0.1:2"}, gone, "left and dead members are joined again")
	tbl.leavingNote("b")
	assert.Equal(t, StateLeft, tbl.states()[1].State)
	_, ok = tbl.lookup("a")
	assert.False(t, ok, "no sending to a member that left")
	assert.Equal(t, []string{"self"}, tbl.live())

	// Back under a new address: alive, the note forgotten.
	d.NotifyJoin(node("a", 4))
	assert.Equal(t, StateAlive, tbl.states()[0].State)
	assert.Equal(t, "127.0.0.1:4", tbl.states()[0].Addr)
	*now = now.Add(2 * leavingValid)
	d.NotifyLeave(node("a", 4))
	assert.Equal(t, StateDead, tbl.states()[0].State, "an old note does not explain a later failure")

	// Forgotten after ForgetAfter.
	*now = now.Add(2 * time.Hour)
	assert.Equal(t, []string{"self"}, names(tbl.states()))
}

func names(states []MemberState) []string {
	var out []string
	for _, s := range states {
		out = append(out, s.Name)
	}
	return out
}

func TestMembersUpdateKeepsState(t *testing.T) {
	tbl, _, joined, _ := testTable()
	d := &eventDelegate{t: tbl}
	d.NotifyJoin(node("a", 1))
	d.NotifyUpdate(node("a", 2))
	assert.Equal(t, "127.0.0.1:2", tbl.states()[0].Addr)
	assert.Equal(t, []string{"a"}, *joined, "an update is not a join")
	assert.Equal(t, []string{"self"}, newMembers("self", time.Hour, func() {}, func(string) {}, func(string) {}).live(), "self is always live")
}

func TestTakeRounds(t *testing.T) {
	tests := []struct {
		name  string
		setup func(a *antiEntropy)
		live  []string
		want  func(t *testing.T, got []target)
	}{
		{"nothing asked", func(*antiEntropy) {}, []string{"a", "b"}, func(t *testing.T, got []target) { assert.Empty(t, got) }},
		{"full round for a failed peer", func(a *antiEntropy) { a.want("b") }, []string{"a", "b"},
			func(t *testing.T, got []target) { assert.Equal(t, []target{{peer: "b", push: true}}, got) }},
		{"dead peers are skipped", func(a *antiEntropy) { a.want("gone") }, []string{"a"},
			func(t *testing.T, got []target) { assert.Empty(t, got) }},
		{"all", func(a *antiEntropy) { a.wantAll() }, []string{"a", "b"},
			func(t *testing.T, got []target) {
				assert.Equal(t, []target{{peer: "a", push: true}, {peer: "b", push: true}}, got)
			}},
		{"pull rounds with up to joinPulls of many joins", func(a *antiEntropy) {
			for _, p := range []string{"a", "b", "c", "d", "e"} {
				a.joined(p)
			}
		}, []string{"a", "b", "c", "d", "e"},
			func(t *testing.T, got []target) {
				require.Len(t, got, joinPulls)
				seen := map[string]bool{}
				for _, g := range got {
					assert.False(t, g.push)
					assert.Contains(t, []string{"a", "b", "c", "d", "e"}, g.peer)
					seen[g.peer] = true
				}
				assert.Len(t, seen, joinPulls, "distinct peers")
			}},
		{"every one of two joins is pulled", func(a *antiEntropy) { a.joined("a"); a.joined("b") }, []string{"a", "b", "c"},
			func(t *testing.T, got []target) {
				assert.ElementsMatch(t, []target{{peer: "a"}, {peer: "b"}}, got)
			}},
		{"a joined peer already in a full round is not pulled twice", func(a *antiEntropy) { a.joined("a"); a.want("a") }, []string{"a"},
			func(t *testing.T, got []target) { assert.Equal(t, []target{{peer: "a", push: true}}, got) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAntiEntropy(&Member{}, nil)
			tt.setup(a)
			tt.want(t, a.take(tt.live))
			assert.Empty(t, a.take(tt.live), "requests are cleared")
		})
	}
}

func TestRejoinAddrs(t *testing.T) {
	got := rejoinAddrs(
		[]string{"10.0.0.1:7701", "10.0.0.2:7701", "seed.example:7701", ""},
		[]string{"10.0.0.3:7701", "10.0.0.1:7701"},
		[]string{"10.0.0.2:7701", "10.0.0.9:7701"},
	)
	assert.Equal(t, []string{"10.0.0.1:7701", "10.0.0.3:7701", "seed.example:7701"}, got)
}

func TestLeaveTimeout(t *testing.T) {
	assert.Equal(t, 500*time.Millisecond, leaveTimeout(20*time.Millisecond))
	assert.Equal(t, 2*time.Second, leaveTimeout(200*time.Millisecond))
	assert.Equal(t, 5*time.Second, leaveTimeout(time.Second))
}

// A peer's link is reset when it goes (left or died), not when it joins or
// is updated: a link dialled to a restarted peer before its join reached
// this member is already the new one.
func TestMembersTableResetsLinks(t *testing.T) {
	var reset []string
	tbl := newMembers("self", time.Hour, func() {}, func(string) {}, func(n string) { reset = append(reset, n) })
	d := &eventDelegate{t: tbl}
	d.NotifyJoin(node("self", 1))
	d.NotifyJoin(node("a", 2))
	d.NotifyUpdate(node("a", 2))
	d.NotifyLeave(node("a", 2))
	d.NotifyJoin(node("a", 3))
	assert.Equal(t, []string{"a"}, reset, "the leave; never a join, an update or self")
	n, ok := tbl.lookup("a")
	require.True(t, ok)
	assert.Equal(t, "127.0.0.1:3", n.Address())
}
