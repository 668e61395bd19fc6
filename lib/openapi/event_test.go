package openapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
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
	postUnderEvents(t, e, "/api/v1/machineclaims", "c-", []eventCase{
		{"open", http.StatusCreated, ""},
		{"later", http.StatusForbidden, "opens at"},
		{"over", http.StatusForbidden, "ended at"},
		{"nope", http.StatusBadRequest, "does not exist"},
	})
}

// eventCase is what a POST of an object under event answers.
type eventCase struct {
	event string
	code  int
	says  string // part of the message on spec.scheduledEvent
}

// postUnderEvents posts a claim or session (of alice's, template t, code
// all-the-events) named prefix+event under each case's event.
func postUnderEvents(t *testing.T, e *testEnv, path, prefix string, cases []eventCase) {
	t.Helper()
	kind := map[string]string{"/api/v1/machineclaims": "MachineClaim", "/api/v1/sessions": "Session"}[path]
	for _, tc := range cases {
		t.Run(tc.event, func(t *testing.T) {
			r := e.do(http.MethodPost, path, aliceTok, map[string]any{"kind": kind, "metadata": map[string]any{"name": prefix + tc.event},
				"spec": map[string]any{"machineTemplate": "t", "scheduledEvent": tc.event, "accessCode": "all-the-events"}})
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
	postUnderEvents(t, e, "/api/v1/sessions", "s-", []eventCase{
		{"open", http.StatusCreated, ""},
		{"later", http.StatusCreated, ""},
		{"nope", http.StatusCreated, ""},
		{"over", http.StatusForbidden, "scheduled event over ended at 2026-11-30T11:00:00Z"},
	})
}

// A set a scheduled event created is the event's to size: a PUT that
// changes a field the event decides (hf-cli set scale's minAvailable, say)
// is a 409 naming the field and the event, since the event's reconcile set
// it back within milliseconds after a 200. Fields the event leaves to the
// set still change, and other sets scale as before.
func TestEventSetIsTheEvents(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	e := newTestEnv(t, func(c *Config) { c.Now = func() time.Time { return now } })
	require.Equal(t, http.StatusCreated, e.do(http.MethodPost, path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "small")).code)
	ev := map[string]any{"kind": "ScheduledEvent", "metadata": map[string]any{"name": "ws"},
		"spec": map[string]any{"startTime": now.Add(-time.Minute).Format(time.RFC3339), "endTime": now.Add(time.Hour).Format(time.RFC3339),
			"expectedUsers": 2, "requiredMachines": []any{map[string]any{"machineTemplate": "small", "count": 1, "createMachineSet": map[string]any{}}}}}
	r := e.do(http.MethodPost, path(types.KindScheduledEvent)+"?capacityCheck=off", adminTok, ev)
	require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
	// The event's owner makes its set, as lib/cluster's reconcileEvent does.
	stored, err := store.Get[types.ScheduledEvent](e.st, types.KindScheduledEvent, "ws")
	require.NoError(t, err)
	plan := scheduler.PlanEvent(now, *stored, stored.Spec.ExpectedUsers, nil)
	require.Len(t, plan.Create, 1)
	_, err = e.st.Put(&plan.Create[0], store.PutOptions{Create: true})
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, e.do(http.MethodPost, path(types.KindMachineSet), adminTok, minimal(types.KindMachineSet, "pool")).code)

	scale := func(name string, min int) response {
		set := e.do(http.MethodGet, path(types.KindMachineSet, name), adminTok, nil).obj(t)
		set["spec"].(map[string]any)["minAvailable"] = min
		return e.do(http.MethodPut, path(types.KindMachineSet, name), adminTok, set)
	}
	r = scale("ws-0", 1)
	require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
	b := r.errBody(t)
	assert.Equal(t, "spec.minAvailable", b.Field)
	assert.Contains(t, b.Message, "kept by scheduled event ws")
	assert.Contains(t, b.Message, "change the event instead")
	set, err := store.Get[types.MachineSet](e.st, types.KindMachineSet, "ws-0")
	require.NoError(t, err)
	assert.Equal(t, 2, set.Spec.MinAvailable, "unchanged")
	assert.Equal(t, http.StatusOK, scale("ws-0", 2).code, "the value the event gives is no change")

	// What the event leaves to the set changes.
	o := e.do(http.MethodGet, path(types.KindMachineSet, "ws-0"), adminTok, nil).obj(t)
	o["spec"].(map[string]any)["maxAge"] = "2h"
	r = e.do(http.MethodPut, path(types.KindMachineSet, "ws-0"), adminTok, o)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	assert.Equal(t, "2h0m0s", r.obj(t)["spec"].(map[string]any)["maxAge"])

	r = scale("pool", 3)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	assert.EqualValues(t, 3, r.obj(t)["spec"].(map[string]any)["minAvailable"])

	// Nor can the set be relabelled away from its event first (the label
	// is how the API finds the event): that let the next PUT change it.
	for _, label := range []any{"zzz", nil} {
		o := e.do(http.MethodGet, path(types.KindMachineSet, "ws-0"), adminTok, nil).obj(t)
		labels := o["metadata"].(map[string]any)["labels"].(map[string]any)
		if label == nil {
			delete(labels, scheduler.LabelScheduledEvent)
		} else {
			labels[scheduler.LabelScheduledEvent] = label
		}
		r = e.do(http.MethodPut, path(types.KindMachineSet, "ws-0"), adminTok, o)
		require.Equal(t, http.StatusConflict, r.code, "%v: %s", label, r.body)
		assert.Equal(t, "metadata.labels."+scheduler.LabelScheduledEvent, r.errBody(t).Field)
	}
	assert.Equal(t, http.StatusConflict, scale("ws-0", 1).code, "still the event's")
}
