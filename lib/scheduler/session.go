package scheduler

import (
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// Reasons of a session's Claimed condition that its scheduled event gives.
const (
	// SessionEventNotOpen: the event has not started; the session gets its
	// claim at the start.
	SessionEventNotOpen = "EventNotOpen"
	// SessionEventEnded: the event is over; the session ended.
	SessionEventEnded = "EventEnded"
)

// SessionGate is what a session's scheduled event lets it do at one time.
type SessionGate struct {
	// Open: the session may have its claim, or keep the one it holds.
	Open bool
	// Over: the event is over for the session, which ends.
	Over bool
	// Reason and Message are the session's Claimed condition when it is
	// neither Open nor Over (SessionEventNotOpen: it waits) or Over
	// (SessionEventEnded).
	Reason, Message string
	// Next is when the answer may change, so the session's reconcile runs
	// again then: the event's start (a waiting session gets its claim),
	// else its end; zero from the end on.
	Next time.Time
}

// SessionUnderEvent is what ev lets a session do at now, holding a claim or
// not. A session gets its claim only in ev's window, as any claim under the
// event (ClaimAllowedByEvent), but unlike a claim it is not refused before
// the start: it waits for it. From the end on a session without a claim is
// over, and so is one of a CutOff event (whose end terminates its claim);
// a Soft event lets a session that holds a claim run on with it, as it
// lets the claim. A session that holds a claim before the start (the start
// moved later) keeps it.
func SessionUnderEvent(now time.Time, ev types.ScheduledEvent, holdsClaim bool) SessionGate {
	ok, why := ClaimAllowedByEvent(now, ev)
	switch {
	case ok:
		return SessionGate{Open: true, Next: ev.Spec.EndTime}
	case now.Before(ev.Spec.StartTime):
		if holdsClaim {
			return SessionGate{Open: true, Next: ev.Spec.StartTime}
		}
		return SessionGate{Reason: SessionEventNotOpen, Message: why + "; the session gets its machine then",
			Next: ev.Spec.StartTime}
	case holdsClaim && ev.Spec.ExpirationStrategy == types.ExpireSoft:
		return SessionGate{Open: true}
	}
	return SessionGate{Over: true, Reason: SessionEventEnded, Message: why}
}
