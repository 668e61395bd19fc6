package openapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

func TestEventCapacityCheck(t *testing.T) {
	e := newTestEnv(t)
	// One node with 4 usable CPUs; a 1-CPU template.
	node := &types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "n1"},
		Spec: types.NodeSpec{Drivers: []types.NodeDriver{{Name: "test", Driver: "test",
			Capacity: types.Capacity{Usable: types.Resources{CPU: 4, RAMGB: 100}}}}},
		Status: types.NodeStatus{Phase: types.NodeUp}}
	_, err := e.st.Put(node, store.PutOptions{Create: true})
	require.NoError(t, err)
	r := e.do(http.MethodPost, "/api/v1/machinetemplates", adminTok, map[string]any{"kind": "MachineTemplate",
		"metadata": map[string]any{"name": "one"}, "spec": map[string]any{"resources": map[string]any{"cpu": 1, "ramGB": 1}, "providerConfiguration": map[string]any{"test": map[string]any{}}}})
	require.Equal(t, http.StatusCreated, r.code, string(r.body))

	start := time.Now().Add(time.Hour)
	event := func(name string, count int, shift time.Duration) map[string]any {
		return map[string]any{"kind": "ScheduledEvent", "metadata": map[string]any{"name": name}, "spec": map[string]any{
			"startTime": start.Add(shift).Format(time.RFC3339), "endTime": start.Add(shift + time.Hour).Format(time.RFC3339),
			"requiredMachines": []any{map[string]any{"machineTemplate": "one", "count": count, "machineType": "Shared", "createMachineSet": map[string]any{}}}}}
	}
	r = e.do(http.MethodPost, "/api/v1/scheduledevents", adminTok, event("a", 3, 0))
	require.Equal(t, http.StatusCreated, r.code, string(r.body))
	// Overlapping: 3 + 2 > 4 CPUs.
	r = e.do(http.MethodPost, "/api/v1/scheduledevents", adminTok, event("b", 2, 30*time.Minute))
	require.Equal(t, http.StatusConflict, r.code, string(r.body))
	assert.Equal(t, "spec.requiredMachines", r.errBody(t).Field)
	// The refusal names both ways to accept the event anyway: the API's
	// query parameter and the CLI's flag that passes it.
	assert.Contains(t, r.errBody(t).Message, "?capacityCheck=warn")
	assert.Contains(t, r.errBody(t).Message, "hf-cli create|apply -f FILE --capacity-check warn")
	// The same, not overlapping, fits.
	r = e.do(http.MethodPost, "/api/v1/scheduledevents", adminTok, event("c", 2, 3*time.Hour))
	require.Equal(t, http.StatusCreated, r.code, string(r.body))
	// Warn accepts it with a warning.
	r = e.do(http.MethodPost, "/api/v1/scheduledevents?capacityCheck=warn", adminTok, event("b", 2, 30*time.Minute))
	require.Equal(t, http.StatusCreated, r.code, string(r.body))
	assert.Contains(t, r.header.Get("Warning"), "199 hf")
	r = e.do(http.MethodPost, "/api/v1/scheduledevents?capacityCheck=maybe", adminTok, event("d", 1, 0))
	assert.Equal(t, http.StatusBadRequest, r.code)
	assert.Equal(t, "capacityCheck", r.errBody(t).Field)

	// An update is checked as a create when it changes what the event
	// needs or when (it raised c's count past the capacity unchecked, and
	// hf-cli apply's --capacity-check did nothing).
	r = e.do(http.MethodPut, "/api/v1/scheduledevents/c", adminTok, event("c", 5, 3*time.Hour))
	require.Equal(t, http.StatusConflict, r.code, string(r.body))
	assert.Equal(t, "spec.requiredMachines", r.errBody(t).Field)
	assert.Contains(t, r.errBody(t).Message, "?capacityCheck=warn")
	r = e.do(http.MethodPut, "/api/v1/scheduledevents/c", adminTok, event("c", 2, 30*time.Minute))
	require.Equal(t, http.StatusConflict, r.code, "moved onto a and b: %s", r.body)
	r = e.do(http.MethodPut, "/api/v1/scheduledevents/c", adminTok, event("c", 4, 3*time.Hour))
	require.Equal(t, http.StatusOK, r.code, "4 of 4 fit: %s", r.body)
	assert.Empty(t, r.header.Get("Warning"))
	r = e.do(http.MethodPut, "/api/v1/scheduledevents/c?capacityCheck=warn", adminTok, event("c", 5, 3*time.Hour))
	require.Equal(t, http.StatusOK, r.code, string(r.body))
	assert.Contains(t, r.header.Get("Warning"), "199 hf")
	r = e.do(http.MethodPut, "/api/v1/scheduledevents/c?capacityCheck=maybe", adminTok, event("c", 5, 3*time.Hour))
	assert.Equal(t, http.StatusBadRequest, r.code)
	assert.Equal(t, "capacityCheck", r.errBody(t).Field)
	// An update that leaves its needs alone is not refused for what the
	// cluster holds now: b overlaps a over capacity, and its name is
	// changed all the same.
	upd := event("b", 2, 30*time.Minute)
	upd["spec"].(map[string]any)["displayName"] = "B"
	r = e.do(http.MethodPut, "/api/v1/scheduledevents/b", adminTok, upd)
	require.Equal(t, http.StatusOK, r.code, string(r.body))
	assert.Empty(t, r.header.Get("Warning"))
}
