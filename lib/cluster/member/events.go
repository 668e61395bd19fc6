package member

import (
	"maps"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/hf-fleet/hf/lib/cluster/member/internal/fanout"
)

// State is a member's state as this member sees it.
//
// memberlist v0.7 keeps "suspect" internal (the State of the Node values it
// hands out is never set), so a suspected member reads as alive until it is
// declared dead; with the LAN profile that takes 1-2 s.
type State string

// Member states.
const (
	StateAlive State = "alive"
	// StateDead is a member that stopped answering probes.
	StateDead State = "dead"
	// StateLeft is a member that said it was leaving (Stop) before it went.
	StateLeft State = "left"
)

// MemberState is one known member.
type MemberState struct {
	Name string
	// Addr is the member's gossip host:port.
	Addr  string
	State State
	// Since is when this member saw it enter State.
	Since time.Time
}

// leavingValid is how long a leaving note explains a member's departure: a
// member that said it was leaving but is still around later and then fails
// is dead, not left.
const leavingValid = time.Minute

// memberInfo is what the table keeps per member.
type memberInfo struct {
	name    string
	addr    net.IP
	port    uint16
	state   State
	since   time.Time
	leaving time.Time // when its leaving note arrived; zero when none
	meta    []byte    // its memberlist metadata (see delegate.NodeMeta)
}

func (i *memberInfo) address() string {
	return net.JoinHostPort(i.addr.String(), strconv.Itoa(int(i.port)))
}

// node builds the memberlist.Node that SendReliable needs.
func (i *memberInfo) node() *memberlist.Node {
	return &memberlist.Node{Name: i.name, Addr: i.addr, Port: i.port, Meta: i.meta}
}

// members is this member's own table of the cluster, kept from memberlist's
// events, so reads never touch memberlist's internals (whose Node values it
// keeps changing under its own lock).
type members struct {
	self   string
	forget time.Duration
	now    func() time.Time
	// changed wakes the membership loop (OnMembership); joined hands a newly
	// joined peer to anti-entropy; reset is told of a peer that went (left
	// or died), whose link is of no use. None may block.
	changed func()
	joined  func(name string)
	reset   func(name string)

	mu     sync.Mutex
	byName map[string]*memberInfo
	// liveNames is live's answer until the table changes (nil: to be
	// made); the elector asks for it several times per claim.
	liveNames []string
}

func newMembers(self string, forget time.Duration, changed func(), joined, reset func(string)) *members {
	return &members{
		self: self, forget: forget, now: time.Now,
		changed: changed, joined: joined, reset: reset,
		byName: map[string]*memberInfo{},
	}
}

// set records n as alive (join or update).
func (t *members) set(n *memberlist.Node, join bool) {
	now := t.now()
	t.mu.Lock()
	i := t.byName[n.Name]
	if i == nil {
		i = &memberInfo{name: n.Name}
		t.byName[n.Name] = i
	}
	i.addr = slices.Clone(n.Addr)
	i.port = n.Port
	i.meta = slices.Clone(n.Meta)
	if i.state != StateAlive {
		i.state, i.since = StateAlive, now
		t.liveNames = nil
	}
	if join {
		i.leaving = time.Time{}
	}
	t.mu.Unlock()
	t.changed()
	if join && n.Name != t.self {
		t.joined(n.Name)
	}
}

// gone records that n left or died.
func (t *members) gone(n *memberlist.Node) {
	now := t.now()
	t.mu.Lock()
	i := t.byName[n.Name]
	if i == nil {
		i = &memberInfo{name: n.Name, addr: slices.Clone(n.Addr), port: n.Port}
		t.byName[n.Name] = i
	}
	i.state, i.since = StateDead, now
	if !i.leaving.IsZero() && now.Sub(i.leaving) < leavingValid {
		i.state = StateLeft
	}
	t.liveNames = nil
	t.mu.Unlock()
	t.changed()
	if n.Name != t.self {
		t.reset(n.Name)
	}
}

// leavingNote records that name said it is leaving. The note may arrive
// before or after memberlist reports the departure.
func (t *members) leavingNote(name string) {
	now := t.now()
	t.mu.Lock()
	i := t.byName[name]
	changed := false
	if i != nil {
		i.leaving = now
		if i.state == StateDead {
			i.state, changed = StateLeft, true
		}
	}
	t.mu.Unlock()
	if changed {
		t.changed()
	}
}

// live returns the names of the live members, self included, sorted.
func (t *members) live() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.liveNames != nil {
		return t.liveNames
	}
	out := []string{}
	seenSelf := false
	for name, i := range t.byName {
		if i.state == StateAlive {
			out = append(out, name)
			seenSelf = seenSelf || name == t.self
		}
	}
	if !seenSelf {
		out = append(out, t.self)
	}
	slices.Sort(out)
	t.liveNames = out
	return out
}

// peers returns the live members other than self, sorted.
func (t *members) peers() []string {
	live := t.live()
	out := make([]string, 0, len(live))
	for _, n := range live {
		if n != t.self {
			out = append(out, n)
		}
	}
	return out
}

// view is the membership the dissemination trees are built over: the live
// peers, and those that died (not those that left) within forget, down
// (fanout.View says why a dead member keeps its place).
func (t *members) view() fanout.View {
	now := t.now()
	t.mu.Lock()
	var up, dead []string
	for name, i := range t.byName {
		switch {
		case name == t.self:
		case i.state == StateAlive:
			up = append(up, name)
		case i.state == StateDead && now.Sub(i.since) <= t.forget:
			dead = append(dead, name)
		}
	}
	t.mu.Unlock()
	return fanout.NewView(up).WithDown(dead...)
}

// lookup returns the node to send to when name is alive.
func (t *members) lookup(name string) (*memberlist.Node, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	i := t.byName[name]
	if i == nil || i.state != StateAlive || i.addr == nil {
		return nil, false
	}
	return i.node(), true
}

// states returns every known member, sorted by name, after dropping those
// down for longer than forget.
func (t *members) states() []MemberState {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forgetLocked(now)
	out := make([]MemberState, 0, len(t.byName))
	for name, i := range t.byName {
		out = append(out, MemberState{Name: name, Addr: i.address(), State: i.state, Since: i.since})
	}
	slices.SortFunc(out, func(a, b MemberState) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// knownNames returns the names of every member in states, sorted, without
// their addresses.
func (t *members) knownNames() []string {
	now := t.now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.forgetLocked(now)
	out := slices.Collect(maps.Keys(t.byName))
	slices.Sort(out)
	return out
}

// forgetLocked drops the members dead or left for longer than forget. t.mu
// is held.
func (t *members) forgetLocked(now time.Time) {
	for name, i := range t.byName {
		if i.state != StateAlive && now.Sub(i.since) > t.forget {
			delete(t.byName, name)
		}
	}
}

// addrs returns the addresses of the live members (self included) and of
// the members that died or left, for rejoining: a member that left to be
// restarted (hf-node stopped by its service) comes back at its address.
func (t *members) addrs() (live, gone []string) {
	for _, s := range t.states() {
		switch s.State {
		case StateAlive:
			live = append(live, s.Addr)
		case StateDead, StateLeft:
			gone = append(gone, s.Addr)
		}
	}
	return live, gone
}

// eventDelegate feeds memberlist's membership events into the table.
//
// Concurrency: memberlist calls these from several goroutines but never
// concurrently, with its node lock held; they must not block or call back
// into memberlist. They update the table under its own lock and signal.
type eventDelegate struct{ t *members }

var _ memberlist.EventDelegate = (*eventDelegate)(nil)

func (d *eventDelegate) NotifyJoin(n *memberlist.Node)   { d.t.set(n, true) }
func (d *eventDelegate) NotifyUpdate(n *memberlist.Node) { d.t.set(n, false) }
func (d *eventDelegate) NotifyLeave(n *memberlist.Node)  { d.t.gone(n) }
