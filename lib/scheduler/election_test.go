package scheduler

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const offerTO = time.Second

// three nodes: n1 is the busiest, so pack offers there first, then n2, then n3.
func threeNodes() []Candidate {
	return []Candidate{cand("n1", 8, 32, 4, 0), cand("n2", 8, 32, 2, 0), cand("n3", 8, 32, 0, 0)}
}

func newElector(t *testing.T, cands []Candidate) *Elector {
	t.Helper()
	e := NewElector(offerTO)
	require.Empty(t, e.Step(t0, CandidatesChanged{Candidates: cands}))
	return e
}

func request(claim string, cpu float64) ClaimRequested {
	return ClaimRequested{Claim: claim, Request: testReq(claim, cpu, 1), Deadline: t0.Add(time.Minute)}
}

func offerOf(t *testing.T, acts []Action) SendOffer {
	t.Helper()
	require.Len(t, acts, 1, "actions: %+v", acts)
	o, ok := acts[0].(SendOffer)
	require.True(t, ok, "want SendOffer, got %#v", acts[0])
	return o
}

func TestElectorOfferAccept(t *testing.T) {
	e := newElector(t, threeNodes())
	o := offerOf(t, e.Step(t0, request("c1", 2)))
	assert.Equal(t, SendOffer{Claim: "c1", Node: "n1", Driver: "test", Round: 1}, o)
	assert.Equal(t, []string{"c1"}, e.Pending())
	dl, ok := e.NextDeadline()
	require.True(t, ok)
	assert.Equal(t, t0.Add(offerTO), dl, "the offer expires before the bind deadline")

	// Stale answers change nothing.
	assert.Empty(t, e.Step(t0, Accepted{Claim: "c1", Node: "n1", Driver: "test", Round: 0}))
	assert.Empty(t, e.Step(t0, Accepted{Claim: "c1", Node: "n2", Driver: "test", Round: 1}))
	assert.Empty(t, e.Step(t0, Accepted{Claim: "c1", Node: "n1", Driver: "docker", Round: 1}))
	assert.Empty(t, e.Step(t0, Accepted{Claim: "other", Node: "n1", Round: 1}))

	acts := e.Step(t0, Accepted{Claim: "c1", Node: "n1", Driver: "test", Round: 1})
	assert.Equal(t, []Action{RecordAccepted{Claim: "c1", Node: "n1", Driver: "test", Round: 1}}, acts)
	// Idempotent: the same answer again, and the echo of the record, do nothing.
	assert.Empty(t, e.Step(t0, Accepted{Claim: "c1", Node: "n1", Driver: "test", Round: 1}))
	echo := request("c1", 2)
	echo.Round, echo.AcceptedBy = 1, "n1"
	assert.Empty(t, e.Step(t0, echo))
	assert.Empty(t, e.Step(t0, Declined{Claim: "c1", Node: "n1", Round: 1, Reason: "late"}))

	_, ok = e.NextDeadline()
	assert.False(t, ok, "an accepted claim has no deadline in the elector")
	assert.Equal(t, []string{"c1"}, e.Pending(), "accepted but not bound")
	assert.Empty(t, e.Step(t0.Add(time.Hour), Timeout{}), "no deadline applies once accepted")

	assert.Empty(t, e.Step(t0, ClaimGone{Claim: "c1"}))
	assert.Empty(t, e.Pending())
	assert.Empty(t, e.Step(t0, ClaimGone{Claim: "c1"}))
}

func TestElectorDeclineThenNext(t *testing.T) {
	e := newElector(t, threeNodes())
	o := offerOf(t, e.Step(t0, request("c1", 2)))
	require.Equal(t, "n1", o.Node)

	// n1's fresh view: it is full now. The claim moves on to n2 with round 2.
	fresh := cand("n1", 8, 32, 8, 0)
	o = offerOf(t, e.Step(t0, Declined{Claim: "c1", Node: "n1", Round: 1, Reason: "cpu 0.0 free of 2.0 needed", Fresh: &fresh}))
	assert.Equal(t, SendOffer{Claim: "c1", Node: "n2", Driver: "test", Round: 2}, o)
	// A duplicate of the decline is stale now.
	assert.Empty(t, e.Step(t0, Declined{Claim: "c1", Node: "n1", Round: 1, Reason: "again"}))

	// Another claim sees n1's fresh capacity: n1 is skipped, and n2 carries
	// c1's pending offer, so a 6-CPU claim only fits n3.
	o2 := offerOf(t, e.Step(t0, request("c2", 6)))
	assert.Equal(t, "n3", o2.Node)
	assert.Equal(t, uint64(1), o2.Round)

	// n2 declines too; n3 still has room for c1 beside c2's 6 CPUs.
	o = offerOf(t, e.Step(t0, Declined{Claim: "c1", Node: "n2", Round: 2, Reason: "disk"}))
	assert.Equal(t, SendOffer{Claim: "c1", Node: "n3", Driver: "test", Round: 3}, o)
	acts := e.Step(t0, Declined{Claim: "c1", Node: "n3", Round: 3, Reason: "disk"})
	require.Len(t, acts, 1)
	w, ok := acts[0].(Waiting)
	require.True(t, ok, "%#v", acts[0])
	assert.Equal(t, "c1", w.Claim)
	// n2 and n3 still fit by the reports, so the last decline is the news.
	assert.Equal(t, "every node that fits (n2, n3) was tried; last: node n3 declined: disk", w.Reason)
}

func TestElectorWaitingReasonAfterDeclines(t *testing.T) {
	e := newElector(t, []Candidate{cand("n1", 8, 32, 0, 0)})
	o := offerOf(t, e.Step(t0, request("c1", 2)))
	acts := e.Step(t0, Declined{Claim: "c1", Node: "n1", Round: o.Round, Reason: "image missing"})
	assert.Equal(t, []Action{Waiting{Claim: "c1",
		Reason: "every node that fits (n1) was tried; last: node n1 declined: image missing"}}, acts)
	_, ok := e.NextDeadline()
	assert.True(t, ok, "a waiting claim still has its bind deadline")

	// A fresh report clears the exclusions: n1 is offered again with a higher round.
	o = offerOf(t, e.Step(t0.Add(time.Second), CandidatesChanged{Candidates: []Candidate{cand("n1", 8, 32, 0, 0)}}))
	assert.Equal(t, SendOffer{Claim: "c1", Node: "n1", Driver: "test", Round: 2}, o)
}

// resent steps the timeouts at which the pending offer is sent again (to the
// same node, at the same round) and returns the deadline after them.
func resent(t *testing.T, e *Elector, want SendOffer) time.Time {
	t.Helper()
	for range offerResends {
		dl, _ := e.NextDeadline()
		assert.Equal(t, want, offerOf(t, e.Step(dl, Timeout{})), "sent again")
	}
	dl, _ := e.NextDeadline()
	return dl
}

func TestElectorOfferTimeout(t *testing.T) {
	e := newElector(t, threeNodes())
	first := offerOf(t, e.Step(t0, request("c1", 2)))
	assert.Empty(t, e.Step(t0.Add(offerTO-time.Millisecond), Timeout{}), "early timer does nothing")

	dl := resent(t, e, first)
	assert.Equal(t, t0.Add((offerResends+1)*offerTO), dl)
	o := offerOf(t, e.Step(dl, Timeout{}))
	assert.Equal(t, SendOffer{Claim: "c1", Node: "n2", Driver: "test", Round: 2}, o)
	assert.Empty(t, e.Step(dl, Timeout{}), "a repeated timeout does nothing")
	// n1 answers late: stale.
	assert.Empty(t, e.Step(dl, Accepted{Claim: "c1", Node: "n1", Driver: "test", Round: 1}))
	next, _ := e.NextDeadline()
	assert.Equal(t, dl.Add(offerTO), next)
}

// Without a confirmed majority an unanswered offer stands: the node it went
// to may have accepted behind a partition. It is given up once a timeout
// comes with the majority confirmed.
func TestElectorOfferTimeoutWithoutQuorum(t *testing.T) {
	e := newElector(t, threeNodes())
	offerOf(t, e.Step(t0, request("c1", 2)))
	dl, _ := e.NextDeadline()
	assert.True(t, e.OffersExpired(dl))
	acts := e.Step(dl, Timeout{NoQuorum: true})
	require.Len(t, acts, 1)
	w, ok := acts[0].(Waiting)
	require.True(t, ok, "%#v", acts[0])
	assert.Contains(t, w.Reason, "offer to node n1 (round 1) is unanswered, and without a majority")
	assert.False(t, e.OffersExpired(dl))
	next, _ := e.NextDeadline()
	assert.Equal(t, dl.Add(offerTO), next, "asked again one offer timeout later")
	next = resent(t, e, SendOffer{Claim: "c1", Node: "n1", Driver: "test", Round: 1})
	o := offerOf(t, e.Step(next, Timeout{}))
	assert.Equal(t, SendOffer{Claim: "c1", Node: "n2", Driver: "test", Round: 2}, o)
}

func TestElectorNodeDown(t *testing.T) {
	t.Run("pending node goes down: next at once, with a majority", func(t *testing.T) {
		e := newElector(t, threeNodes())
		offerOf(t, e.Step(t0, request("c1", 2)))
		assert.Empty(t, e.Step(t0, NodeDown{Node: "n3", Quorum: true}), "another node going down does not matter")
		o := offerOf(t, e.Step(t0, NodeDown{Node: "n1", Quorum: true}))
		assert.Equal(t, SendOffer{Claim: "c1", Node: "n2", Driver: "test", Round: 2}, o)
		assert.Empty(t, e.Step(t0, NodeDown{Node: "n1", Quorum: true}), "duplicate")
	})
	t.Run("pending node out of reach without a majority: the offer stands", func(t *testing.T) {
		e := newElector(t, threeNodes())
		offerOf(t, e.Step(t0, request("c1", 2)))
		assert.Empty(t, e.Step(t0, NodeDown{Node: "n1"}), "it may have accepted behind a partition")
		dl, _ := e.NextDeadline()
		assert.Equal(t, t0.Add(offerTO), dl)
	})
	t.Run("accepted node goes down before binding: elected again with a majority", func(t *testing.T) {
		e := newElector(t, threeNodes())
		offerOf(t, e.Step(t0, request("c1", 2)))
		require.Len(t, e.Step(t0, Accepted{Claim: "c1", Node: "n1", Driver: "test", Round: 1}), 1)
		o := offerOf(t, e.Step(t0.Add(time.Second), NodeDown{Node: "n1", Quorum: true}))
		assert.Equal(t, SendOffer{Claim: "c1", Node: "n2", Driver: "test", Round: 2}, o)
	})
	t.Run("accepted node out of reach without a majority: kept", func(t *testing.T) {
		e := newElector(t, threeNodes())
		offerOf(t, e.Step(t0, request("c1", 2)))
		require.Len(t, e.Step(t0, Accepted{Claim: "c1", Node: "n1", Driver: "test", Round: 1}), 1)
		assert.Empty(t, e.Step(t0.Add(time.Second), NodeDown{Node: "n1"}), "a node cut off from the majority passes no verdict")
	})
	t.Run("pending node missing from a fresh snapshot, without a majority: the offer stands", func(t *testing.T) {
		e := newElector(t, threeNodes())
		offerOf(t, e.Step(t0, request("c1", 2)))
		assert.Empty(t, e.Step(t0, CandidatesChanged{Candidates: threeNodes()[1:]}))
	})
	t.Run("pending node missing from a fresh snapshot", func(t *testing.T) {
		e := newElector(t, threeNodes())
		offerOf(t, e.Step(t0, request("c1", 2)))
		o := offerOf(t, e.Step(t0, CandidatesChanged{Candidates: threeNodes()[1:], Quorum: true}))
		assert.Equal(t, "n2", o.Node)
		assert.Equal(t, uint64(2), o.Round)
	})
}

func TestElectorWaitThenCapacity(t *testing.T) {
	full := []Candidate{cand("n1", 4, 32, 4, 0), cand("n2", 4, 32, 3, 0)}
	e := newElector(t, full)
	acts := e.Step(t0, request("c1", 2))
	assert.Equal(t, []Action{Waiting{Claim: "c1", Reason: "no node can take template t: " +
		"driver test on n1 has no capacity: cpu 0.0 free of 2.0 needed; driver test on n2 has no capacity: cpu 1.0 free of 2.0 needed"}}, acts)
	// Still full: Waiting is not repeated.
	assert.Empty(t, e.Step(t0.Add(time.Second), CandidatesChanged{Candidates: full}))
	assert.Empty(t, e.Step(t0.Add(time.Second), request("c1", 2)), "duplicate request")

	freed := []Candidate{cand("n1", 4, 32, 4, 0), cand("n2", 4, 32, 1, 0)}
	o := offerOf(t, e.Step(t0.Add(2*time.Second), CandidatesChanged{Candidates: freed}))
	assert.Equal(t, SendOffer{Claim: "c1", Node: "n2", Driver: "test", Round: 1}, o)
}

func TestElectorDeadline(t *testing.T) {
	e := newElector(t, []Candidate{cand("n1", 4, 32, 4, 0)})
	require.IsType(t, Waiting{}, e.Step(t0, request("c1", 2))[0])
	dl, ok := e.NextDeadline()
	require.True(t, ok)
	assert.Equal(t, t0.Add(time.Minute), dl)
	assert.Empty(t, e.Step(dl.Add(-time.Nanosecond), Timeout{}))

	acts := e.Step(dl, Timeout{})
	assert.Equal(t, []Action{Fail{Claim: "c1", Reason: "not bound within its bind timeout: " +
		"no node can take template t: driver test on n1 has no capacity: cpu 0.0 free of 2.0 needed"}}, acts)
	assert.Empty(t, e.Pending())
	_, ok = e.NextDeadline()
	assert.False(t, ok)
	// Echoes and late news of a failed claim stay quiet.
	assert.Empty(t, e.Step(dl, request("c1", 2)))
	assert.Empty(t, e.Step(dl, Timeout{}))
	assert.Empty(t, e.Step(dl, CandidatesChanged{Candidates: threeNodes()}))

	// Gone, then created again under the same name: a new claim.
	e.Step(dl, ClaimGone{Claim: "c1"})
	again := request("c1", 2)
	again.Deadline = dl.Add(time.Minute)
	assert.Equal(t, "n1", offerOf(t, e.Step(dl, again)).Node)
}

func TestElectorDeadlineWithOfferOut(t *testing.T) {
	e := NewElector(time.Hour) // the offer outlives the bind deadline
	e.Step(t0, CandidatesChanged{Candidates: threeNodes()})
	offerOf(t, e.Step(t0, request("c1", 2)))
	dl, _ := e.NextDeadline()
	assert.Equal(t, t0.Add(time.Minute), dl)
	acts := e.Step(dl, Timeout{})
	assert.Equal(t, []Action{Fail{Claim: "c1", Reason: "not bound within its bind timeout: offer to node n1 (round 1) is unanswered"}}, acts)
	assert.Empty(t, e.Step(dl, Accepted{Claim: "c1", Node: "n1", Driver: "test", Round: 1}), "too late")
}

func TestElectorDeclineAfterDeadlineFails(t *testing.T) {
	e := newElector(t, threeNodes())
	o := offerOf(t, e.Step(t0, request("c1", 2)))
	acts := e.Step(t0.Add(2*time.Minute), Declined{Claim: "c1", Node: o.Node, Round: o.Round, Reason: "full"})
	require.Len(t, acts, 1)
	f, ok := acts[0].(Fail)
	require.True(t, ok, "%#v", acts[0])
	// n2 and n3 were never offered it: the reason said that every node
	// that fits had declined or not answered.
	assert.Equal(t, "not bound within its bind timeout: node n1 declined: full; not yet offered to n2, n3", f.Reason)
}

func TestElectorResume(t *testing.T) {
	t.Run("recorded node alive: go on", func(t *testing.T) {
		e := newElector(t, threeNodes())
		in := request("c1", 2)
		in.Round, in.AcceptedBy = 4, "n2"
		assert.Empty(t, e.Step(t0, in))
		assert.Equal(t, []string{"c1"}, e.Pending())
		// The node gives the claim back (allocation failed): round 5 without a node.
		in.Round, in.AcceptedBy = 5, ""
		o := offerOf(t, e.Step(t0, in))
		assert.Equal(t, SendOffer{Claim: "c1", Node: "n1", Driver: "test", Round: 6}, o)
	})
	t.Run("recorded node gone: round+1 elsewhere", func(t *testing.T) {
		cands := threeNodes()
		cands[0].Alive = false
		e := newElector(t, cands)
		in := request("c1", 2)
		in.Round, in.AcceptedBy = 4, "n1"
		o := offerOf(t, e.Step(t0, in))
		assert.Equal(t, SendOffer{Claim: "c1", Node: "n2", Driver: "test", Round: 5}, o)
	})
	t.Run("served node gave the claim back: not offered again", func(t *testing.T) {
		e := newElector(t, threeNodes())
		offerOf(t, e.Step(t0, request("c1", 2)))
		e.Step(t0, Accepted{Claim: "c1", Node: "n1", Driver: "test", Round: 1})
		back := request("c1", 2)
		back.Round = 2
		o := offerOf(t, e.Step(t0, back))
		assert.Equal(t, SendOffer{Claim: "c1", Node: "n2", Driver: "test", Round: 3}, o)
	})
}

func TestElectorHoldsSpreadABurst(t *testing.T) {
	// n1 has room for one 4-CPU machine, n2 for two. Pack prefers n1 (busier),
	// but the elector counts its own outstanding offers, so a burst of three
	// claims goes n1, n2, n2 instead of three offers to n1.
	cands := []Candidate{cand("n1", 8, 32, 4, 0), cand("n2", 8, 32, 0, 0)}
	e := newElector(t, cands)
	var got []string
	for _, c := range []string{"a", "b", "c"} {
		got = append(got, offerOf(t, e.Step(t0, request(c, 4))).Node)
	}
	assert.Equal(t, []string{"n1", "n2", "n2"}, got)
	require.IsType(t, Waiting{}, e.Step(t0, request("d", 4))[0])

	// a is accepted; the others are still out. A stale snapshot (taken before
	// any of it) is believed: accepted holds go, pending holds stay. Only a's
	// room looks free again, so d gets n1 and will learn the truth from n1.
	e.Step(t0, Accepted{Claim: "a", Node: "n1", Driver: "test", Round: 1})
	o := offerOf(t, e.Step(t0, CandidatesChanged{Candidates: cands}))
	assert.Equal(t, SendOffer{Claim: "d", Node: "n1", Driver: "test", Round: 1}, o)
}

func TestElectorNoDeadline(t *testing.T) {
	e := newElector(t, nil)
	in := request("c1", 1)
	in.Deadline = time.Time{}
	require.IsType(t, Waiting{}, e.Step(t0, in)[0])
	_, ok := e.NextDeadline()
	assert.False(t, ok)
	assert.Empty(t, e.Step(t0.Add(1000*time.Hour), Timeout{}))
}

func TestNewElectorDefaultTimeout(t *testing.T) {
	e := NewElector(0)
	e.Step(t0, CandidatesChanged{Candidates: threeNodes()})
	in := request("c1", 1)
	in.Deadline = t0.Add(time.Hour)
	e.Step(t0, in)
	dl, ok := e.NextDeadline()
	require.True(t, ok)
	assert.Equal(t, t0.Add(DefaultOfferTimeout), dl)
}

func TestElectorRoundsIncrease(t *testing.T) {
	e := newElector(t, []Candidate{cand("n1", 8, 32, 0, 0), cand("n2", 8, 32, 0, 0)})
	var last uint64
	now := t0
	for i := range 20 {
		var acts []Action
		if i == 0 {
			acts = e.Step(now, request("c1", 1))
		} else {
			// Alternate declines, timeouts and fresh snapshots.
			switch i % 3 {
			case 0:
				now = now.Add(offerTO)
				acts = e.Step(now, Timeout{})
			default:
				acts = e.Step(now, CandidatesChanged{Candidates: []Candidate{cand("n1", 8, 32, 0, 0), cand("n2", 8, 32, 0, 0)}})
			}
		}
		for _, a := range acts {
			if o, ok := a.(SendOffer); ok {
				assert.GreaterOrEqual(t, o.Round, last, "(an unanswered offer is sent again at its round)")
				last = o.Round
				if i%3 == 1 {
					e.Step(now, Declined{Claim: "c1", Node: o.Node, Round: o.Round, Reason: "no"})
				}
			}
		}
	}
	assert.GreaterOrEqual(t, last, uint64(3))
}

func TestElectorWakesWaitingWhenAnOfferComesToNothing(t *testing.T) {
	// One slot. a holds it with an offer; b waits. a's offer is lost on the wire
	// and times out: the slot is free again in the elector's view, and no report
	// will say so (n1 never changed), so b is woken at once.
	e := newElector(t, []Candidate{cand("n1", 1, 32, 0, 0)})
	offerOf(t, e.Step(t0, request("a", 1)))
	require.IsType(t, Waiting{}, e.Step(t0, request("b", 1))[0])

	dl := resent(t, e, SendOffer{Claim: "a", Node: "n1", Driver: "test", Round: 1})
	acts := e.Step(dl, Timeout{})
	assert.Equal(t, []Action{
		Waiting{Claim: "a", Reason: "every node that fits (n1) was tried; last: node n1 did not answer the offer in 3 tries of 1s"},
		SendOffer{Claim: "b", Node: "n1", Driver: "test", Round: 1},
	}, acts)

	// A claim deleted with its offer out frees the slot the same way.
	acts = e.Step(dl, ClaimGone{Claim: "b"})
	assert.Empty(t, acts, "a still excludes n1 until a fresh report")
	acts = e.Step(dl.Add(offerTO), CandidatesChanged{Candidates: []Candidate{cand("n1", 1, 32, 0, 0)}})
	assert.Equal(t, []Action{SendOffer{Claim: "a", Node: "n1", Driver: "test", Round: 2}}, acts)
}

func TestElectorDeclineDetails(t *testing.T) {
	e := newElector(t, []Candidate{cand("n1", 8, 32, 0, 0)})
	o := offerOf(t, e.Step(t0, request("c1", 2)))
	// The decline carries a candidate the elector had not heard of: it is learnt.
	newcomer := cand("n9", 8, 32, 0, 0)
	o = offerOf(t, e.Step(t0, Declined{Claim: "c1", Node: o.Node, Round: o.Round, Fresh: &newcomer}))
	assert.Equal(t, SendOffer{Claim: "c1", Node: "n9", Driver: "test", Round: 2}, o)
	acts := e.Step(t0, Declined{Claim: "c1", Node: "n9", Round: 2})
	assert.Equal(t, []Action{Waiting{Claim: "c1",
		Reason: "every node that fits (n1, n9) was tried; last: node n9 declined: no reason given"}}, acts)
}

// A claim whose allocation failed on the one node that fits is brought back
// by the shell (ClaimRequested with the give-back's reason, after it dropped
// the claim while the node worked on it). It waits for that node's next
// report, and says what failed there: it read "waiting for capacity" on a
// node with room, and failed at its bind timeout as "waiting for capacity;
// last: allocation ... failed".
func TestElectorReasonAfterAGiveBack(t *testing.T) {
	const gaveBack = `node n1 gave round 6 back: allocation on n1 (driver test) failed: template "bad" asks to fail (6 failed allocations of the claim there)`
	e := newElector(t, []Candidate{cand("n1", 8, 32, 0, 0)})
	in := request("c1", 2)
	in.Round, in.Request.Exclude, in.Reason = 6, map[string]bool{"n1": true}, gaveBack
	assert.Equal(t, []Action{Waiting{Claim: "c1", Reason: "every node that fits (n1) was tried; last: " + gaveBack}}, e.Step(t0, in))

	// Its deadline passes while it waits.
	acts := e.Step(t0.Add(time.Minute), Timeout{})
	assert.Equal(t, []Action{Fail{Claim: "c1", Reason: "not bound within its bind timeout: every node that fits (n1) was tried; last: " + gaveBack}}, acts)
}

// The same give-back seen by an elector that still waits on the round
// (GaveBack not fed, the claim's next round comes first) names what failed
// too, not only that the node gave the claim back.
func TestElectorReasonOfARoundGivenBack(t *testing.T) {
	e := newElector(t, []Candidate{cand("n1", 8, 32, 0, 0)})
	o := offerOf(t, e.Step(t0, request("c1", 2)))
	require.Len(t, e.Step(t0, Accepted{Claim: "c1", Node: o.Node, Driver: o.Driver, Round: o.Round}), 1)
	in := request("c1", 2)
	in.Round, in.Reason = o.Round+1, "node n1 gave round 1 back: allocation on n1 (driver test) failed: no image"
	assert.Equal(t, []Action{Waiting{Claim: "c1",
		Reason: "every node that fits (n1) was tried; last: node n1 gave round 1 back: allocation on n1 (driver test) failed: no image"}}, e.Step(t0, in))
	without := NewElector(offerTO)
	require.Empty(t, without.Step(t0, CandidatesChanged{Candidates: []Candidate{cand("n1", 8, 32, 0, 0)}}))
	o = offerOf(t, without.Step(t0, request("c1", 2)))
	require.Len(t, without.Step(t0, Accepted{Claim: "c1", Node: o.Node, Driver: o.Driver, Round: o.Round}), 1)
	in.Reason = ""
	assert.Equal(t, []Action{Waiting{Claim: "c1", Reason: "every node that fits (n1) was tried; last: node n1 gave the claim back"}}, without.Step(t0, in),
		"without a reason from the shell, what the elector knows")
}

func TestElectorReasonListsAFewNodes(t *testing.T) {
	var cands []Candidate
	for _, n := range []string{"n5", "n4", "n3", "n2", "n1"} {
		cands = append(cands, cand(n, 8, 32, 0, 0))
	}
	e := newElector(t, cands)
	in := request("c1", 2)
	in.Request.Exclude = map[string]bool{"n1": true, "n2": true, "n3": true, "n4": true, "n5": true}
	assert.Equal(t, []Action{Waiting{Claim: "c1", Reason: "every node that fits (n1, n2, n3 and 2 more) was tried"}}, e.Step(t0, in))
}

// Allocations that fail on two nodes of three: each gives the claim back
// after accepting it, and the claim goes on to the third, never back to a
// node that failed it (while there is one not tried). The shell feeds
// ClaimAccepted each time the record shows the acceptance, as its reconcile
// does; that keeps the claim's tries.
func TestElectorGiveBacksGoOnToNodesNotTried(t *testing.T) {
	e := newElector(t, threeNodes())
	o := offerOf(t, e.Step(t0, request("c1", 2)))
	for _, want := range []string{"n1", "n2"} {
		require.Equal(t, want, o.Node)
		require.Len(t, e.Step(t0, Accepted{Claim: "c1", Node: o.Node, Driver: o.Driver, Round: o.Round}), 1)
		assert.Empty(t, e.Step(t0, ClaimAccepted{Claim: "c1", Node: o.Node, Round: o.Round}), "the record of the acceptance")
		o = offerOf(t, e.Step(t0, GaveBack{Claim: "c1", Node: o.Node, Round: o.Round, Reason: "allocation on " + o.Node + " failed"}))
	}
	assert.Equal(t, SendOffer{Claim: "c1", Node: "n3", Driver: "test", Round: 3}, o)

	// The last one gives it back too: every node was tried, the claim waits.
	require.Len(t, e.Step(t0, Accepted{Claim: "c1", Node: "n3", Driver: "test", Round: 3}), 1)
	assert.Empty(t, e.Step(t0, ClaimAccepted{Claim: "c1", Node: "n3", Round: 3}))
	assert.Equal(t, []Action{Waiting{Claim: "c1", Reason: "every node that fits (n1, n2, n3) was tried; last: allocation on n3 failed"}},
		e.Step(t0, GaveBack{Claim: "c1", Node: "n3", Round: 3, Reason: "allocation on n3 failed"}))
}

// A record of an acceptance the elector does not wait for (another
// elector's, before a membership change) makes what it holds stale: it
// drops the claim as on ClaimGone, and its offer is not sent again.
func TestElectorClaimAcceptedElsewhereDropsTheClaim(t *testing.T) {
	e := newElector(t, threeNodes())
	o := offerOf(t, e.Step(t0, request("c1", 2)))
	require.Equal(t, "n1", o.Node)
	assert.Empty(t, e.Step(t0, ClaimAccepted{Claim: "c1", Node: "n2", Round: 4}))
	assert.Empty(t, e.Pending())
	assert.Empty(t, e.Step(t0.Add(time.Hour), Timeout{}), "no offer left to send again")
	assert.Empty(t, e.Step(t0, ClaimAccepted{Claim: "other", Node: "n2", Round: 1}), "a claim it does not hold")
}

// A claim tried on every node that fits, offered again in a new pass (a
// fresh report), and given back at its bind timeout by the first node of
// that pass: its reason says every node was tried. It said "not yet
// offered to n2, n3", which it had been, in the pass before (the new pass
// clears the nodes it excludes, not what the claim went through).
func TestElectorReasonCountsEarlierPasses(t *testing.T) {
	e := newElector(t, threeNodes())
	o := offerOf(t, e.Step(t0, request("c1", 2)))
	for range 3 {
		require.Len(t, e.Step(t0, Accepted{Claim: "c1", Node: o.Node, Driver: o.Driver, Round: o.Round}), 1)
		assert.Empty(t, e.Step(t0, ClaimAccepted{Claim: "c1", Node: o.Node, Round: o.Round}))
		acts := e.Step(t0, GaveBack{Claim: "c1", Node: o.Node, Round: o.Round, Reason: "allocation on " + o.Node + " failed"})
		if o.Node == "n3" {
			require.Equal(t, []Action{Waiting{Claim: "c1", Reason: "every node that fits (n1, n2, n3) was tried; last: allocation on n3 failed"}}, acts)
			break
		}
		o = offerOf(t, acts)
	}
	o = offerOf(t, e.Step(t0.Add(time.Second), CandidatesChanged{Candidates: threeNodes()}))
	require.Equal(t, "n1", o.Node, "a new pass")
	require.Len(t, e.Step(t0, Accepted{Claim: "c1", Node: o.Node, Driver: o.Driver, Round: o.Round}), 1)
	assert.Empty(t, e.Step(t0, ClaimAccepted{Claim: "c1", Node: o.Node, Round: o.Round}))
	in := request("c1", 2)
	in.Round, in.Reason = o.Round+1, "node n1 gave round 4 back: its bind timeout passed before the machine was allocated"
	assert.Equal(t, []Action{Fail{Claim: "c1", Reason: "not bound within its bind timeout: every node that fits (n1, n2, n3) was tried; last: " + in.Reason}},
		e.Step(t0.Add(2*time.Minute), in))
}

// A claim that every node that fits refuses (declines it, or gives it back
// as its allocation fails: an image missing from every engine) fails once
// that held for DefaultRefusedPasses passes in a row over MinRefusedSpan,
// saying so, rather than wait for its bind deadline (5 minutes by default,
// up to 24 h). A pass in which a node did not answer starts the count
// again, as does one with a node that fits and was not refused; an elector
// without the limit waits for the deadline.
func TestElectorFailsAClaimEveryNodeRefuses(t *testing.T) {
	two := func() []Candidate { return []Candidate{cand("n1", 8, 32, 0, 0), cand("n2", 8, 32, 0, 0)} }
	e := NewElectorRefusing(offerTO, DefaultRefusedPasses)
	require.Empty(t, e.Step(t0, CandidatesChanged{Candidates: two()}))
	req := request("c1", 2)
	req.Deadline = t0.Add(24 * time.Hour)
	now := t0
	// pass runs one pass: each offer refused, by a decline or a give-back
	// after an acceptance, and returns the actions of the last refusal.
	pass := func(giveBack bool) []Action {
		t.Helper()
		acts := e.Step(now, CandidatesChanged{Candidates: two()})
		if now == t0 {
			acts = e.Step(now, req)
		}
		for range 2 {
			o := offerOf(t, acts)
			if giveBack {
				require.NotEmpty(t, e.Step(now, Accepted{Claim: "c1", Node: o.Node, Driver: o.Driver, Round: o.Round}))
				acts = e.Step(now, GaveBack{Claim: "c1", Node: o.Node, Round: o.Round, Reason: "allocation on " + o.Node + " failed: image hf/lab:1 not found"})
			} else {
				acts = e.Step(now, Declined{Claim: "c1", Node: o.Node, Round: o.Round, Reason: "no such image"})
			}
		}
		return acts
	}
	waits := func(acts []Action) {
		t.Helper()
		require.Len(t, acts, 1)
		_, ok := acts[0].(Waiting)
		require.True(t, ok, "%#v", acts[0])
	}
	// Three passes within the minute: it waits on.
	for i := range DefaultRefusedPasses {
		waits(pass(i%2 == 0))
		now = now.Add(10 * time.Second)
	}
	// A pass whose last offer goes unanswered starts the count again.
	o := offerOf(t, e.Step(now, CandidatesChanged{Candidates: two()}))
	o = offerOf(t, e.Step(now, Declined{Claim: "c1", Node: o.Node, Round: o.Round, Reason: "no such image"}))
	for range offerResends {
		now = now.Add(offerTO)
		offerOf(t, e.Step(now, Timeout{}))
	}
	now = now.Add(offerTO)
	waits(e.Step(now, Timeout{}))
	for range DefaultRefusedPasses - 1 {
		now = now.Add(30 * time.Second)
		waits(pass(true))
	}
	// The third refused pass in a row, 60 s after the first: it fails.
	now = now.Add(30 * time.Second)
	acts := pass(true)
	require.Len(t, acts, 1)
	f, ok := acts[0].(Fail)
	require.True(t, ok, "%#v", acts[0])
	assert.Equal(t, Fail{Claim: "c1", Reason: "every node that fits (n1, n2) refused it, 3 times in a row over 1m0s; " +
		"last: allocation on n1 failed: image hf/lab:1 not found"}, f)
	assert.Empty(t, e.Pending())

	// Without the limit it waits until its deadline.
	e = NewElector(offerTO)
	now = t0
	require.Empty(t, e.Step(t0, CandidatesChanged{Candidates: two()}))
	for range 10 {
		waits(pass(false))
		now = now.Add(time.Minute)
	}
}

// Compact changes nothing the elector decides: two electors fed one burst
// (offers, acceptances, declines, timeouts, claims gone) decide alike when
// one of them compacts before every step.
func TestElectorCompactKeepsDecisions(t *testing.T) {
	a, b := newElector(t, threeNodes()), newElector(t, threeNodes())
	step := func(now time.Time, in Input) {
		t.Helper()
		b.Compact()
		require.Equal(t, a.Step(now, in), b.Step(now, in), "input %#v", in)
	}
	var offers []SendOffer
	for i := range 300 {
		acts := a.Step(t0, request(fmt.Sprintf("c%03d", i), 0.25))
		b.Compact()
		require.Equal(t, acts, b.Step(t0, request(fmt.Sprintf("c%03d", i), 0.25)))
		for _, act := range acts {
			if o, ok := act.(SendOffer); ok {
				offers = append(offers, o)
			}
		}
	}
	require.NotEmpty(t, offers)
	for i, o := range offers {
		switch i % 4 {
		case 0, 1:
			step(t0, Accepted{Claim: o.Claim, Node: o.Node, Driver: o.Driver, Round: o.Round})
			step(t0, ClaimGone{Claim: o.Claim}) // bound
		case 2:
			step(t0, Declined{Claim: o.Claim, Node: o.Node, Round: o.Round, Reason: "full"})
		}
	}
	step(t0.Add(2*offerTO), Timeout{})
	step(t0.Add(2*offerTO), CandidatesChanged{Candidates: threeNodes(), Quorum: true})
	step(t0.Add(2*time.Minute), Timeout{})
	assert.Equal(t, a.Pending(), b.Pending())
}
