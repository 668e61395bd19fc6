package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/hf-fleet/hf/lib/types"
)

// A session gets its claim only in its event's window: before the start it
// waits for it (and runs again then), from the end on it is over unless it
// holds a claim that a Soft event lets run on; in the window it runs again
// at the end.
func TestSessionUnderEvent(t *testing.T) {
	cut := event("ws", evStart, time.Hour, "")
	soft := event("ws", evStart, time.Hour, types.ExpireSoft)
	end := evStart.Add(time.Hour)
	wait := SessionGate{Reason: SessionEventNotOpen,
		Message: "scheduled event ws opens at 2025-06-02T10:00:00Z; the session gets its machine then", Next: evStart}
	over := SessionGate{Over: true, Reason: SessionEventEnded, Message: "scheduled event ws ended at 2025-06-02T11:00:00Z"}
	open := SessionGate{Open: true, Next: end}
	tests := []struct {
		name  string
		ev    types.ScheduledEvent
		now   time.Time
		claim bool
		want  SessionGate
	}{
		{"before the start", cut, evStart.Add(-10 * time.Minute), false, wait},
		{"just before the start", soft, evStart.Add(-time.Nanosecond), false, wait},
		{"before the start, holding a claim", cut, evStart.Add(-time.Minute), true, SessionGate{Open: true, Next: evStart}},
		{"at the start", cut, evStart, false, open},
		{"in the window", soft, evStart.Add(30 * time.Minute), false, open},
		{"just before the end", cut, evStart.Add(time.Hour - time.Nanosecond), true, open},
		{"at the end, CutOff", cut, evStart.Add(time.Hour), true, over},
		{"after the end, CutOff, no claim", cut, evStart.Add(2 * time.Hour), false, over},
		{"after the end, Soft, holding a claim", soft, evStart.Add(2 * time.Hour), true, SessionGate{Open: true}},
		{"after the end, Soft, no claim", soft, evStart.Add(time.Hour), false, over},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, SessionUnderEvent(tc.now, tc.ev, tc.claim))
		})
	}
}
