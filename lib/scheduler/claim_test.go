package scheduler

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/hf-fleet/hf/lib/types"
)

func bound(round uint64, node, machine string) *types.ClaimBinding {
	return &types.ClaimBinding{Round: round, Node: node, Machine: machine, Phase: types.BindingBound}
}

func TestDecideMachine(t *testing.T) {
	warmReap := &types.MachineRequest{Reason: "Surplus", Message: "machine set pool keeps 3 unclaimed machines"}
	idleReap := &types.MachineRequest{Reason: "Idle", Message: "idle for 2s", Claim: "c"}
	running := Held{Machine: "m1", Claim: "c", Round: 1, Phase: types.MachineRunning}
	for _, tc := range []struct {
		name   string
		h      Held
		c      ClaimState
		action MachineAction
		reason string
	}{
		{"warm machine stays", Held{Machine: "m1", Phase: types.MachineRunning}, ClaimState{}, Keep, ""},
		{"warm machine reaped", Held{Machine: "m1", Phase: types.MachineRunning, Reap: warmReap}, ClaimState{}, Release, "keeps 3 unclaimed"},
		{"a warm machine's reap lapses once a claim took it",
			Held{Machine: "m1", Claim: "c", Round: 1, Phase: types.MachineRunning, Reap: warmReap},
			ClaimState{Exists: true, Binding: bound(1, "n0", "m1")}, Keep, ""},
		{"a claimed machine's reap holds",
			Held{Machine: "m1", Claim: "c", Round: 1, Phase: types.MachineRunning, Reap: idleReap},
			ClaimState{Exists: true, Binding: bound(1, "n0", "m1")}, Release, "idle for 2s"},
		{"busy waits", Held{Machine: "m1", Claim: "c", Busy: true}, ClaimState{}, Keep, ""},
		{"warm machine's record deleted", Held{Machine: "m1", Phase: types.MachineRunning, Deleted: true}, ClaimState{}, Release, "record was deleted"},
		{"bound machine's record deleted", Held{Machine: "m1", Claim: "c", Round: 1, Phase: types.MachineRunning, Deleted: true},
			ClaimState{Exists: true, Binding: bound(1, "n0", "m1")}, Release, "record was deleted"},
		{"busy waits, its record deleted", Held{Machine: "m1", Claim: "c", Busy: true, Deleted: true}, ClaimState{}, Keep, ""},
		{"bound and running", running, ClaimState{Exists: true, Binding: bound(1, "n0", "m1")}, Keep, ""},
		{"claim gone", running, ClaimState{}, Release, "claim c is gone"},
		{"claim ended", running, ClaimState{Exists: true, Ended: true, EndReason: "bye", Binding: bound(1, "n0", "m1")}, Release, "terminated: bye"},
		{"moved on", running, ClaimState{Exists: true, Election: types.ClaimElection{Round: 2}}, Release, "moved on to round 2"},
		{"same round served elsewhere", running, ClaimState{Exists: true, Binding: bound(1, "n1", "m9")}, Release, "served by node n1"},
		{"accepted by another node", running, ClaimState{Exists: true, Election: types.ClaimElection{Round: 1, Node: "n1"}}, Release, "accepted by node n1"},
		{"running, not bound yet", running, ClaimState{Exists: true, Election: types.ClaimElection{Round: 1, Node: "n0"}}, Bind, ""},
		{"reserved", Held{Machine: "m1", Claim: "c", Round: 1, Phase: types.MachinePending}, ClaimState{Exists: true, Election: types.ClaimElection{Round: 1, Node: "n0"}}, Allocate, ""},
		{"reserved past the deadline", Held{Machine: "m1", Claim: "c", Round: 1, Phase: types.MachinePending},
			ClaimState{Exists: true, Election: types.ClaimElection{Round: 1, Node: "n0"}, Deadline: t0}, GiveBack, "bind timeout"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := DecideMachine(t0, "n0", tc.h, tc.c)
			assert.Equal(t, tc.action, d.Action, d.Reason)
			assert.Contains(t, d.Reason, tc.reason)
		})
	}
}

func TestDecideOrphan(t *testing.T) {
	accepted := ClaimState{Exists: true, Election: types.ClaimElection{Round: 2, Node: "n0"}}
	boundHere := ClaimState{Exists: true, Election: types.ClaimElection{Round: 2, Node: "n0"}, Binding: bound(2, "n0", "m1")}
	for _, tc := range []struct {
		name   string
		phase  types.ClaimPhase
		c      ClaimState
		held   []Held
		orphan bool
		reason string
		lost   bool
	}{
		{"accepted, reserved", types.ClaimRequested, accepted, []Held{{Machine: "m1", Claim: "c", Round: 2}}, false, "", false},
		{"accepted, nothing held", types.ClaimRequested, accepted, nil, true, "holds no reservation for round 2", false},
		{"accepted, only an older round held", types.ClaimRequested, accepted, []Held{{Machine: "m0", Claim: "c", Round: 1}}, true, "round 2", false},
		{"accepted by another node", types.ClaimRequested, ClaimState{Exists: true, Election: types.ClaimElection{Round: 2, Node: "n1"}}, nil, false, "", false},
		{"bound here, machine held", types.ClaimBound, boundHere, []Held{{Machine: "m1", Claim: "c", Round: 2}}, false, "", false},
		{"bound here, machine gone", types.ClaimBound, boundHere, nil, true, "machine m1 of round 2 is gone from node n0", true},
		{"bound here, another machine held", types.ClaimBound, boundHere, []Held{{Machine: "m2", Claim: "c", Round: 2}}, true, "machine m1", true},
		{"bound elsewhere", types.ClaimBound, ClaimState{Exists: true, Binding: bound(2, "n1", "m1")}, nil, false, "", false},
		{"ended", types.ClaimBound, ClaimState{Exists: true, Ended: true, Binding: bound(2, "n0", "m1")}, nil, false, "", false},
		{"gone", types.ClaimRequested, ClaimState{}, nil, false, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, orphan := DecideOrphan("n0", tc.phase, tc.c, tc.held)
			assert.Equal(t, tc.orphan, orphan)
			assert.Contains(t, o.Reason, tc.reason)
			assert.Equal(t, tc.lost, o.Lost, "a bound claim's machine is lost; an accepted round is given back")
			if orphan {
				assert.Equal(t, uint64(2), o.Round)
			}
		})
	}
}

func TestDecideClaim(t *testing.T) {
	alive := func(n string) bool { return n == "n0" || n == "n1" }
	acceptedByGone := ClaimState{Exists: true, Election: types.ClaimElection{Round: 3, Node: "n2"}}
	for _, tc := range []struct {
		name   string
		c      ClaimState
		phase  types.ClaimPhase
		lost   string
		policy types.LostPolicy
		quorum bool
		want   ClaimDecision
	}{
		{"new claim", ClaimState{Exists: true}, types.ClaimRequested, "", types.LostRebind, true, ClaimDecision{Action: Elect}},
		{"bound", ClaimState{Exists: true, Binding: bound(1, "n1", "m1")}, types.ClaimBound, "", types.LostRebind, true, ClaimDecision{Action: Forget}},
		{"bound, machine lost, rebind", ClaimState{Exists: true, Binding: bound(1, "n1", "m1")}, types.ClaimBound, "node gone", types.LostRebind, true,
			ClaimDecision{Action: Rebind, Round: 2, Reason: "machine m1 lost: node gone"}},
		{"bound, machine lost, fail", ClaimState{Exists: true, Binding: bound(1, "n1", "m1")}, types.ClaimBound, "node gone", types.LostFail, true,
			ClaimDecision{Action: FailLost, Round: 2, Reason: "machine m1 lost: node gone"}},
		{"given back", ClaimState{Exists: true, Binding: &types.ClaimBinding{Round: 2, Node: "n1", Phase: types.BindingReleased, Reason: "slow"}}, types.ClaimRequested, "", types.LostRebind, true,
			ClaimDecision{Action: Elect, Round: 2, Exclude: "n1", Reason: "node n1 gave round 2 back: slow"}},
		{"accepted by a live node", ClaimState{Exists: true, Election: types.ClaimElection{Round: 3, Node: "n1"}}, types.ClaimRequested, "", types.LostRebind, true, ClaimDecision{Action: Forget, Round: 3, AcceptedBy: "n1"}},
		{"accepted by a gone node, with a majority", acceptedByGone, types.ClaimRequested, "", types.LostRebind, true,
			ClaimDecision{Action: Elect, Round: 3, AcceptedBy: "n2", Reason: "node n2 accepted round 3 and is gone"}},
		{"accepted by a gone node, without a majority", acceptedByGone, types.ClaimRequested, "", types.LostRebind, false,
			ClaimDecision{Action: Wait, Reason: "node n2 accepted round 3 and cannot be reached; without a majority of the cluster this node does not take it over"}},
		{"terminated", ClaimState{Exists: true}, types.ClaimTerminated, "", types.LostRebind, true, ClaimDecision{Action: Forget}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, DecideClaim(tc.c, tc.phase, tc.lost, tc.policy, alive, tc.quorum))
		})
	}
}
