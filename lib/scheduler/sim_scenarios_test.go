package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// offers lists the (node, round) of every offer the elector made for claim.
func (s *sim) offers(claim string) []string {
	var out []string
	for _, a := range s.actions {
		if o, ok := a.(SendOffer); ok && o.Claim == claim {
			out = append(out, fmt.Sprintf("%s/%d", o.Node, o.Round))
		}
	}
	return out
}

// requireClean checks that nothing is reserved or leaked once all is settled.
func (s *sim) requireClean(t *testing.T) {
	t.Helper()
	for _, n := range s.nodes {
		if !n.alive {
			continue
		}
		assert.Empty(t, n.resv, "%s holds reservations", n.name)
		assert.InDelta(t, 0, n.reserved.CPU, 1e-9, "%s reserved", n.name)
	}
	for claim, nodes := range s.machines() {
		c := s.claims[claim]
		assert.Equal(t, types.ClaimBound, c.phase, "machine for unbound claim %s", claim)
		assert.Equal(t, []string{c.node}, nodes, "claim %s has machines on %v", claim, nodes)
	}
	assert.Empty(t, s.e.Pending())
}

// makeBusiest reports n with used CPUs (for real), so pack offers there first.
func (s *sim) makeBusiest(name string, used float64) {
	s.node(name).used = res(used, 0, 0)
	s.step(CandidatesChanged{Candidates: s.snapshot()})
}

func TestSimBidAccept(t *testing.T) {
	s := newSim(t, 1, time.Second, 4, 4, 4)
	want := Rank(testReq("c1", 1, 1), s.snapshot())[0].Node
	s.claim("c1", 1, time.Minute)
	s.run(t0.Add(time.Second))

	c := s.claims["c1"]
	require.Equal(t, types.ClaimBound, c.phase)
	assert.Equal(t, want, c.node)
	assert.Equal(t, uint64(1), c.round)
	// offer, accept, record: three one-millisecond hops, no ticks.
	assert.Equal(t, 3*time.Millisecond, c.boundAt.Sub(t0))
	assert.Equal(t, map[string][]string{"c1": {want}}, s.machines())
	s.requireClean(t)
}

func TestSimDeclineThenNext(t *testing.T) {
	s := newSim(t, 1, time.Second, 4, 4, 4)
	// n1 is full for real, but its last report says 2 of 4 used: the report lags.
	stale := s.snapshot()
	stale[0].Capacity = WithUsage(s.node("n1").cap, res(2, 0, 0), types.Resources{})
	s.node("n1").used = res(4, 0, 0)
	s.step(CandidatesChanged{Candidates: stale})

	s.claim("c1", 1, time.Minute)
	s.run(t0.Add(time.Second))
	c := s.claims["c1"]
	require.Equal(t, types.ClaimBound, c.phase)
	offers := s.offers("c1")
	require.Len(t, offers, 2)
	assert.Equal(t, "n1/1", offers[0], "the stale report costs one decline")
	assert.Equal(t, c.node+"/2", offers[1])
	assert.NotEqual(t, "n1", c.node)
	assert.Equal(t, 5*time.Millisecond, c.boundAt.Sub(t0))
	s.requireClean(t)
}

func TestSimOfferTimeout(t *testing.T) {
	s := newSim(t, 1, time.Second, 4, 4, 4)
	s.makeBusiest("n1", 1)
	s.node("n1").silent = true
	s.claim("c1", 1, time.Minute)
	s.run(t0.Add(time.Minute))
	c := s.claims["c1"]
	require.Equal(t, types.ClaimBound, c.phase)
	assert.Equal(t, []string{"n1/1", "n1/1", "n1/1", c.node + "/2"}, s.offers("c1"), "sent again twice, then the next node")
	assert.Equal(t, 3*time.Second+3*time.Millisecond, c.boundAt.Sub(t0))
	s.requireClean(t)
}

func TestSimNodeDeath(t *testing.T) {
	t.Run("mid offer", func(t *testing.T) {
		s := newSim(t, 1, time.Second, 4, 4, 4)
		s.net.delay = 10 * time.Millisecond
		s.makeBusiest("n1", 1)
		s.claim("c1", 1, time.Minute)
		s.run(t0.Add(5 * time.Millisecond)) // the offer is on the wire
		s.kill("n1")
		s.run(t0.Add(time.Minute))
		c := s.claims["c1"]
		require.Equal(t, types.ClaimBound, c.phase)
		assert.Equal(t, []string{"n1/1", c.node + "/2"}, s.offers("c1"))
		// Death noticed at 55 ms, then offer, accept, record: no offer timeout.
		assert.Equal(t, 85*time.Millisecond, c.boundAt.Sub(t0))
		s.requireClean(t)
	})
	t.Run("after accepting, before the record", func(t *testing.T) {
		s := newSim(t, 1, time.Second, 4, 4, 4)
		s.net.delay = 10 * time.Millisecond
		s.makeBusiest("n1", 1)
		s.claim("c1", 1, time.Minute)
		s.run(t0.Add(25 * time.Millisecond)) // accepted at 10, recorded at 20, record lands at 30
		require.Contains(t, s.actions, RecordAccepted{Claim: "c1", Node: "n1", Driver: "test", Round: 1})
		s.kill("n1")
		s.run(t0.Add(time.Minute))
		c := s.claims["c1"]
		require.Equal(t, types.ClaimBound, c.phase)
		assert.NotEqual(t, "n1", c.node)
		assert.Equal(t, uint64(2), c.round)
		assert.Empty(t, s.node("n1").machines, "the dead node never allocated")
		s.requireClean(t)
	})
}

func TestSimWaitThenFreed(t *testing.T) {
	s := newSim(t, 1, time.Second, 2)
	s.claim("a", 2, time.Minute)
	s.run(t0.Add(time.Second))
	require.Equal(t, types.ClaimBound, s.claims["a"].phase)

	s.claim("b", 2, time.Minute)
	s.run(t0.Add(10 * time.Second))
	b := s.claims["b"]
	require.Equal(t, types.ClaimRequested, b.phase)
	assert.Equal(t, Waiting{Claim: "b", Reason: "no node can take template t: driver test on n1 has no capacity: cpu 0.0 free of 2.0 needed"}, b.last)
	assert.Empty(t, s.offers("b"), "nothing is offered while nothing fits")

	freedAt := s.now
	s.deleteClaim("a")
	s.run(t0.Add(20 * time.Second))
	require.Equal(t, types.ClaimBound, b.phase)
	assert.Equal(t, []string{"n1/1"}, s.offers("b"))
	// release replicates (1 ms), report (5 ms), offer, accept, record (3 ms).
	assert.Equal(t, 9*time.Millisecond, b.boundAt.Sub(freedAt))
	s.requireClean(t)
}

func TestSimDeadlineFail(t *testing.T) {
	s := newSim(t, 1, time.Second, 2)
	s.claim("big", 4, 10*time.Second)
	s.run(t0.Add(9 * time.Second))
	require.Equal(t, types.ClaimRequested, s.claims["big"].phase)
	s.run(t0.Add(11 * time.Second))
	c := s.claims["big"]
	require.Equal(t, types.ClaimFailed, c.phase)
	assert.Equal(t, "not bound within its bind timeout: no node can take template t: "+
		"driver test on n1 has no capacity: cpu 2.0 free of 4.0 needed", c.reason)
	assert.Equal(t, Fail{Claim: "big", Reason: c.reason}, c.last)
	s.requireClean(t)
}

// oversubscribed runs 100 one-CPU claims against 3 nodes of 10 CPUs on a lossy,
// jittery network, and stops before the bind deadline.
func oversubscribed(t *testing.T, seed uint64) *sim {
	return oversubscribedOn(t, seed, 200*time.Millisecond, simNet{delay: time.Millisecond, jitter: 5 * time.Millisecond, dropRate: 0.05})
}

func oversubscribedOn(t *testing.T, seed uint64, offerTimeout time.Duration, net simNet) *sim {
	s := newSim(t, seed, offerTimeout, 10, 10, 10)
	s.net = net
	for i := range 100 {
		s.claim(fmt.Sprintf("c%03d", i), 1, 20*time.Second)
		s.run(s.now.Add(time.Millisecond))
	}
	s.run(t0.Add(15 * time.Second))
	return s
}

func TestSimOversubscribed(t *testing.T) {
	nets := []struct {
		name  string
		seeds uint64
		// offer timeout and network
		offerTimeout time.Duration
		net          simNet
	}{
		{"lan", 2, 200 * time.Millisecond, simNet{delay: time.Millisecond}},
		{"lossy", 20, 200 * time.Millisecond, simNet{delay: time.Millisecond, jitter: 5 * time.Millisecond, dropRate: 0.05}},
		// Answers often arrive after the offer timed out, and a quarter are lost.
		{"harsh", 5, 100 * time.Millisecond, simNet{delay: time.Millisecond, jitter: 150 * time.Millisecond, dropRate: 0.25}},
	}
	for _, nt := range nets {
		for seed := range nt.seeds {
			t.Run(fmt.Sprintf("%s seed %d", nt.name, seed), func(t *testing.T) {
				s := oversubscribedOn(t, seed, nt.offerTimeout, nt.net)
				// Settled before the deadline: every slot bound, the rest waiting.
				require.Equal(t, 30, s.count(types.ClaimBound))
				assert.Len(t, s.e.Pending(), 70)
				for _, c := range s.claims {
					if c.phase == types.ClaimRequested {
						assert.IsType(t, Waiting{}, c.last, "claim %s", c.name)
					}
				}
				perNode := map[string]int{}
				for claim, nodes := range s.machines() {
					require.Len(t, nodes, 1, "claim %s", claim)
					perNode[nodes[0]]++
				}
				assert.Equal(t, map[string]int{"n1": 10, "n2": 10, "n3": 10}, perNode)

				s.run(t0.Add(25 * time.Second))
				assert.Equal(t, 30, s.count(types.ClaimBound))
				assert.Equal(t, 70, s.count(types.ClaimFailed))
				for _, c := range s.claims {
					if c.phase == types.ClaimFailed {
						assert.Contains(t, c.reason, "has no capacity: cpu 0.0 free of 1.0 needed", "claim %s", c.name)
					}
				}
				s.requireClean(t)
			})
		}
	}
}

// TestSimLossyNetworkCostsRetries checks that the lossy runs above really lost
// answers (so timeouts and leases were exercised), not just passed on a quiet net.
func TestSimLossyNetworkCostsRetries(t *testing.T) {
	s := oversubscribed(t, 3)
	offers := 0
	for _, a := range s.actions {
		if _, ok := a.(SendOffer); ok {
			offers++
		}
	}
	assert.Greater(t, offers, 30, "some offers had to be repeated")
}

func TestSimDeterminism(t *testing.T) {
	a := oversubscribed(t, 7)
	b := oversubscribed(t, 7)
	require.NotEmpty(t, a.actions)
	assert.Equal(t, a.actions, b.actions, "same seed, same run")

	// Two electors fed the same inputs return the same actions, step by step.
	replay := NewElector(200 * time.Millisecond)
	var got []Action
	for _, st := range a.steps {
		got = append(got, replay.Step(st.now, st.in)...)
	}
	assert.Equal(t, a.actions, got)
	assert.Equal(t, a.e.Pending(), replay.Pending())
}
