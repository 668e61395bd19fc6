package scheduler

import "time"

// Input is something that happened, fed to Elector.Step. The set is sealed:
// only the types in this file implement it.
type Input interface{ isInput() }

// Action is something the shell must carry out, returned by Elector.Step in the
// order it must be done. The set is sealed: only the types in this file
// implement it.
type Action interface{ isAction() }

// ClaimRequested says a claim in phase Requested is this elector's to place. The
// shell feeds it for new claims, on every change of a claim it elects, and for
// every Requested claim when it becomes the elector (membership changed). It is
// idempotent: an echo of what the elector already knows does nothing.
type ClaimRequested struct {
	Claim   string
	Request Request
	// Round is the last round recorded in the claim's status (0 for a new claim).
	Round uint64
	// Deadline is the claim's (ClaimState.Deadline); a zero Deadline never expires.
	Deadline time.Time
	// AcceptedBy is the node recorded in the claim's status, if any. When it is
	// alive the elector resumes waiting for it; otherwise it elects again.
	AcceptedBy string
	// Reason, when set, is why the claim is elected again (ClaimDecision's:
	// the node of its last round gave it back, and why). The elector drops a
	// claim while a live node works on it, so the give-back that brings it
	// back may be news to it: without Reason, a claim whose every allocation
	// failed read "waiting for capacity" on nodes with room.
	Reason string
}

// CandidatesChanged carries the full, fresh set of candidates (capacity reports
// and membership). It replaces what the elector knew and wakes waiting claims.
// An offer to a node no longer alive is given up only with Quorum (see
// NodeDown).
type CandidatesChanged struct {
	Candidates []Candidate
	Quorum     bool
}

// Accepted is a candidate's answer: it reserved capacity for (Claim, Round).
type Accepted struct {
	Claim  string
	Node   string
	Driver string
	Round  uint64
}

// Declined is a candidate's answer: it cannot take (Claim, Round). Fresh, when
// set, is the candidate's own view of its capacity, newer than any report.
type Declined struct {
	Claim  string
	Node   string
	Round  uint64
	Reason string
	Fresh  *Candidate
}

// GaveBack says the node that accepted (Claim, Round) gave it back (its
// allocation failed, say) or is gone: when the elector still waits for that
// acceptance it elects again, without that node. Otherwise it is old news.
type GaveBack struct {
	Claim  string
	Node   string
	Round  uint64
	Reason string
}

// Timeout says the time passed NextDeadline; Step finds what expired. With
// NoQuorum (this node has not confirmed, by a probe made now, that it
// reaches a majority of the cluster) an unanswered offer is not given up:
// the node it went to may have accepted it behind a partition, and offering
// the claim again would replace that machine at the heal. Its wait is
// extended by one offer timeout; the bind deadline still applies.
type Timeout struct{ NoQuorum bool }

// NodeDown says a node left the cluster (declared dead by membership). An
// offer to it is given up, and a claim it already accepted elected again,
// only with Quorum (this node reaches a majority of the members it knows):
// without, the node may be alive behind a partition, and may have accepted.
type NodeDown struct {
	Node   string
	Quorum bool
}

// ClaimGone says a claim is no longer this elector's: deleted, bound, failed, or
// owned by another elector after a membership change.
type ClaimGone struct {
	Claim string
}

// ClaimAccepted says the claim's record names Node, alive, as having accepted
// Round: the node works on it. When that is the acceptance the elector waits
// for, it keeps the claim with the nodes it has tried, so that a give-back
// goes on to a node not tried yet rather than back to one that failed
// already; anything else it holds of the claim is stale and is dropped, as on
// ClaimGone.
type ClaimAccepted struct {
	Claim string
	Node  string
	Round uint64
}

func (ClaimRequested) isInput()    {}
func (CandidatesChanged) isInput() {}
func (Accepted) isInput()          {}
func (Declined) isInput()          {}
func (GaveBack) isInput()          {}
func (Timeout) isInput()           {}
func (NodeDown) isInput()          {}
func (ClaimGone) isInput()         {}
func (ClaimAccepted) isInput()     {}

// SendOffer asks Node to reserve capacity on Driver for (Claim, Round). It goes
// by direct reliable send, not gossip. Round strictly increases for each new
// offer of a claim.
type SendOffer struct {
	Claim  string
	Node   string
	Driver string
	Round  uint64
}

// RecordAccepted tells the shell to write claim.status {node, driver, round}.
// The candidate allocates once it sees the record; every other node holding a
// reservation for the claim releases it (fencing).
type RecordAccepted struct {
	Claim  string
	Node   string
	Driver string
	Round  uint64
}

// Fail tells the shell to mark the claim Failed with Reason: the bind deadline
// passed before any node accepted it.
type Fail struct {
	Claim  string
	Reason string
}

// Waiting says nothing fits the claim now; it waits for CandidatesChanged or its
// deadline. The shell may show Reason in the claim's status. It is emitted once
// each time a claim starts waiting.
type Waiting struct {
	Claim  string
	Reason string
}

func (SendOffer) isAction()      {}
func (RecordAccepted) isAction() {}
func (Fail) isAction()           {}
func (Waiting) isAction()        {}
