package member_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/member"
	"github.com/hf-fleet/hf/lib/cluster/member/membertest"
)

// stateOf returns name's state as m sees it, "" when unknown.
func stateOf(m *member.Member, name string) member.State {
	for _, s := range m.MemberStates() {
		if s.Name == name {
			return s.State
		}
	}
	return ""
}

func TestMembershipStates(t *testing.T) {
	c := membertest.Start(t, 4, membertest.Options{})
	observer := c.Nodes[0]
	for _, s := range observer.Member.MemberStates() {
		assert.Equal(t, member.StateAlive, s.State, s.Name)
		assert.Equal(t, c.Nodes[c.Index(s.Name)].Addr, s.Addr, s.Name)
	}
	assert.Equal(t, []string{"n0", "n1", "n2", "n3"}, observer.Member.Members())
	assert.Equal(t, "n0", observer.Member.Self())

	calls := observer.MembershipCalls()
	c.Stop(2)
	require.Eventually(t, func() bool {
		return stateOf(c.Nodes[0].Member, "n2") == member.StateLeft &&
			stateOf(c.Nodes[1].Member, "n2") == member.StateLeft &&
			stateOf(c.Nodes[3].Member, "n2") == member.StateLeft
	}, 5*time.Second, 10*time.Millisecond, "stopped member not seen as left")
	require.Eventually(t, func() bool { return observer.MembershipCalls() > calls }, 10*time.Second, 5*time.Millisecond)
	assert.Equal(t, []string{"n0", "n1", "n3"}, observer.Member.Members())

	calls = observer.MembershipCalls()
	killed := time.Now()
	c.Kill(3)
	require.Eventually(t, func() bool {
		return stateOf(c.Nodes[0].Member, "n3") == member.StateDead &&
			stateOf(c.Nodes[1].Member, "n3") == member.StateDead
	}, 15*time.Second, 10*time.Millisecond, "killed member not seen as dead")
	t.Logf("killed member declared dead after %s", time.Since(killed).Round(time.Millisecond))
	// OnMembership runs on the membership loop, after the table changed.
	require.Eventually(t, func() bool { return observer.MembershipCalls() > calls }, 10*time.Second, 5*time.Millisecond,
		"OnMembership not called after the death")
	assert.Equal(t, []string{"n0", "n1"}, observer.Member.Members())
	assert.Equal(t, member.StateLeft, stateOf(observer.Member, "n2"), "left stays left")

	// Both come back under their names.
	c.Restart(2)
	c.Restart(3)
	c.WaitMembers(10 * time.Second)
	for _, name := range []string{"n2", "n3"} {
		assert.Equal(t, member.StateAlive, stateOf(observer.Member, name), name)
	}
}

func TestStopBeforeStartAndTwice(t *testing.T) {
	st := openMemStore(t, "s1")
	cfg := membertest.FastConfig()
	cfg.Name, cfg.Bind = "s1", "127.0.0.1:0"
	m, err := member.New(cfg, nil, st)
	require.NoError(t, err)
	assert.Equal(t, []string{"s1"}, m.Members())
	assert.Empty(t, m.Addr())
	require.NoError(t, m.Stop(t.Context()))
	require.NoError(t, m.Stop(t.Context()))
	assert.Error(t, m.Start(t.Context()), "a stopped member does not start again")
	_, err = m.Join(t.Context(), []string{"127.0.0.1:1"})
	assert.ErrorIs(t, err, member.ErrNotRunning)
}

// TestJoined: a member told to join is not joined while nobody it can reach
// answers, and is once a rejoin gets through; one told to join nobody but
// itself is joined from the start.
func TestJoined(t *testing.T) {
	c := membertest.Start(t, 2, membertest.Options{})
	require.NoError(t, c.Nodes[0].Member.Joined(), "the first member joins nobody")
	require.NoError(t, c.Nodes[1].Member.Joined())

	c.Net.Partition([]string{"n0", "n1"}, []string{"n2"})
	n2 := c.Add()
	err := n2.Member.Joined()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not joined: no member at "+c.Nodes[0].Addr)

	c.Net.Heal()
	require.Eventually(t, func() bool { return n2.Member.Joined() == nil }, 10*time.Second, 20*time.Millisecond,
		"the rejoin loop gets through")
	c.WaitMembers(5 * time.Second)
}
