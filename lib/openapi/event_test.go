package openapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// eventWindowEnv is a server at 2026-11-30 12:00 UTC with events "open" (in
// its window), "later" (opens in an hour) and "over" (ended an hour ago),
// and an access code "all-the-events" granting them and "nope", which does
// not exist.
func eventWindowEnv(t *testing.T) *testEnv {
	t.Helper()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	e := newTestEnv(t, func(c *Config) { c.Now = func() time.Time { return now } })
	event := func(name string, start, end time.Time) map[string]any {
		return map[string]any{"kind": "ScheduledEvent", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"startTime": start.Format(time.RFC3339), "endTime": end.Format(time.RFC3339)}}
	}
	for _, ev := range []map[string]any{
		event("open", now.Add(-time.Minute), now.Add(time.Minute)),
		event("later", now.Add(time.Hour), now.Add(2*time.Hour)),
		event("over", now.Add(-2*time.Hour), now.Add(-time.Hour)),
	} {
		r := e.do(http.MethodPost, "/api/v1/scheduledevents", adminTok, ev)
		require.Equal(t, http.StatusCreated, r.code, string(r.body))
	}
	code := map[string]any{"kind": "AccessCode", "metadata": map[string]any{"name": "all"},
		"spec": map[string]any{"code": "all-the-events", "scheduledEvents": []any{"open", "later", "over", "nope"}}}
	require.Equal(t, http.StatusCreated, e.do(http.MethodPost, "/api/v1/accesscodes", adminTok, code).code)
	return e
}

func TestClaimsOnlyInsideTheirEventWindow(t *testing.T) {
	e := eventWindowEnv(t)
	claim := func(name, event string) map[string]any {
		return map[string]any{"kind": "MachineClaim", "metadata": map[string]any{"name": name},
			"spec": map[string]any{"machineTemplate": "t", "scheduledEvent": event, "accessCode": "all-the-events"}}
	}
	// A user's claim under an event presents a code granting it.
	noCode := claim("c-nocode", "open")
	delete(noCode["spec"].(map[string]any), "accessCode")
	r := e.do(http.MethodPost, "/api/v1/machineclaims", aliceTok, noCode)
	require.Equal(t, http.StatusForbidden, r.code, string(r.body))
	assert.Equal(t, "spec.accessCode", r.errBody(t).Field)
	for _, tc := range []struct {
		event string
		code  int
		says  string
	}{
		{"open", http.StatusCreated, ""},
		{"later", http.StatusForbidden, "opens at"},
		{"over", http.StatusForbidden, "ended at"},
		{"nope", http.StatusBadRequest, "does not exist"},
	} {
		t.Run(tc.event, func(t *testing.T) {
			r := e.do(http.MethodPost, "/api/v1/machineclaims", aliceTok, claim("c-"+tc.event, tc.event))
			require.Equal(t, tc.code, r.code, string(r.body))
			if tc.says != "" {
				b := r.errBody(t)
				assert.Equal(t, "spec.scheduledEvent", b.Field)
				assert.Contains(t, b.Message, tc.says)
			}
		})
	}
}

// A session is refused once its event is over, as a claim is (it could
// never have a machine); before the start, and for an event that does not
// exist yet, it is accepted and waits, its Claimed condition saying why
// (lib/cluster TestSessionWaitsForItsEventWindow).
func TestSessionsRefusedOnceTheirEventIsOver(t *testing.T) {
	e := eventWindowEnv(t)
	for _, tc := range []struct {
		event string
		code  int
		says  string
	}{
		{"open", http.StatusCreated, ""},
		{"later", http.StatusCreated, ""},
		{"nope", http.StatusCreated, ""},
		{"over", http.StatusForbidden, "scheduled event over ended at 2026-11-30T11:00:00Z"},
	} {
		t.Run(tc.event, func(t *testing.T) {
			r := e.do(http.MethodPost, "/api/v1/sessions", aliceTok, map[string]any{"kind": "Session",
				"metadata": map[string]any{"name": "s-" + tc.event},
				"spec":     map[string]any{"machineTemplate": "t", "scheduledEvent": tc.event, "accessCode": "all-the-events"}})
			require.Equal(t, tc.code, r.code, string(r.body))
			if tc.says != "" {
				b := r.errBody(t)
				assert.Equal(t, "spec.scheduledEvent", b.Field)
				assert.Equal(t, tc.says, b.Message)
			}
		})
	}
}
