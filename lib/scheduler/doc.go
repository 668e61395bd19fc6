// Package scheduler is the pure decision logic of hf: capacity maths, ranking
// of candidates, rendezvous ownership and the elector's per-claim state
// machine. It imports lib/types and the standard library only. Nothing here
// does I/O, starts goroutines or reads the clock: time is an argument (`now`),
// and the shell in lib/cluster carries out the actions the functions return.
//
// # What is pure here
//
//   - capacity.go: HostCapacity, WithUsage, Fit and Reserve. A node calls
//     Reserve under its own lock before it accepts an offer, so its word on its
//     own resources is final and a stale report costs a Decline, never an
//     over-commit.
//   - rendezvous.go: Owner picks the elector of a claim (and the owner of any
//     cluster-wide duty) as argmax Weight(key, member) over live members.
//   - rank.go: Feasible -> Rank -> select, nomad style: small steps over a
//     read-only snapshot of candidates, ties broken by Weight(claim, candidate)
//     so every node computes the same order.
//   - election.go: Elector, a state machine in the style of etcd-io/raft:
//     Step(now, input) returns actions; NextDeadline tells the shell when to
//     feed Timeout{} (one timer, no fixed ticks).
//
// # The offer / accept protocol
//
//	claim Requested (round r), replicated to every node
//	        |
//	        v
//	every node computes the elector E = Owner(claim, live members)
//	        |
//	E: Rank(candidates from Node reports; fit, policy, labels, not draining; tie: hash)
//	        |
//	        |  SendOffer(claim, C, r+1)        direct reliable send, not gossip
//	        v
//	+----------------------------------------------------------------+
//	| candidate C: lock; Reserve(real free - reservations)?          |
//	|   yes: persist Reservation(claim, r+1)  --Accepted-->  E       |
//	|   no : --Declined(reason, fresh capacity)-->  E                |
//	+----------------------------------------------------------------+
//	        |
//	E on Accepted:  RecordAccepted -> claim.status {node: C, round: r+1}
//	E on Declined / offer timeout / NodeDown(C):
//	                exclude C, SendOffer to the next candidate with round+1
//	E when nothing fits:
//	                Waiting; CandidatesChanged (a report, a release) retries
//	E at the bind deadline, not accepted:
//	                Fail(reason a person can act on)
//	        |
//	C sees the record: allocate via driver -> Machine(owner C) -> claim Bound
//	  on failure: release, round+1 (the elector sees ClaimRequested again)
//
//	Fencing: a node allocates only for the (claim, round) it accepted and the
//	record names; seeing the claim recorded for another node or a higher round,
//	it releases (and deallocates) its own. Conflict: higher round wins, ties by
//	Weight.
//
// A new elector (membership changed) is fed ClaimRequested for every Requested
// claim with the recorded round and node: a live recorded node goes on, any
// other claim is offered again with a higher round.
package scheduler
