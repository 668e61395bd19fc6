package openapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// TestProposalObjectsRoundTrip posts every kind of HobbyFarm's v4alpha1
// proposal exactly as the proposal writes it (testdata/v4alpha1: its JSON
// names and types, apiVersion hobbyfarm.io/v4alpha1, every field of each
// kind) and reads each back: every field sent comes back with the value
// sent, but status fields, which the system keeps.
func TestProposalObjectsRoundTrip(t *testing.T) {
	now := time.Date(2026, 6, 10, 10, 0, 0, 0, time.UTC)
	e := newTestEnvOn(t, openStoreAt(t, func() time.Time { return now }))
	files, err := filepath.Glob("testdata/v4alpha1/*.json")
	require.NoError(t, err)
	require.Len(t, files, 9, "one object of each of the proposal's nine kinds")
	var kinds []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var sent map[string]any
		require.NoError(t, json.Unmarshal(raw, &sent))
		kind, name := sent["kind"].(string), sent["metadata"].(map[string]any)["name"].(string)
		kinds = append(kinds, kind)
		func() {
			r := e.do("POST", path(kind), adminTok, raw)
			require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
			r = e.do("GET", path(kind, name), adminTok, nil)
			require.Equal(t, http.StatusOK, r.code, "%s", r.body)
			got := r.obj(t)
			assert.Equal(t, types.APIVersion, got["apiVersion"])
			if !clientWritesStatus(kind) {
				delete(sent, "status") // kept by the system
			}
			for _, miss := range contains(sent, got, "") {
				t.Errorf("%s: %s", kind, miss)
			}
		}()
	}
	// A claim under the event that says nothing of where it binds binds
	// per the event's line: PreferMachineSets, the line's sets and the one
	// the event creates for it (scenario 5 of the proposal).
	r := e.do("POST", path(types.KindMachineClaim), aliceTok, map[string]any{"metadata": map[string]any{"name": "alice-2"},
		"spec": map[string]any{"machineTemplate": "small", "accessCode": "open-sesame", "scheduledEvent": "ws"}})
	require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
	spec := r.obj(t)["spec"].(map[string]any)
	assert.Equal(t, "PreferMachineSets", spec["bindStrategy"])
	assert.Equal(t, []any{"pool", "ws-0"}, spec["bindStrategyMachineSets"])

	slices.Sort(kinds)
	assert.Equal(t, []string{"AccessCode", "Environment", "Machine", "MachineClaim", "MachineSet", "MachineTemplate", "Provider", "ScheduledEvent", "Session"}, kinds)
}

// contains lists where got lacks what sent has: every key of a map, every
// element of a list (in order), every scalar equal (times as instants).
func contains(sent, got any, path string) []string {
	switch s := sent.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an object, got %v", path, got)}
		}
		var out []string
		for k, v := range s {
			gv, ok := g[k]
			if !ok {
				if isEmpty(v) {
					continue // an empty value sent is the field left out
				}
				out = append(out, fmt.Sprintf("%s: missing", joinPath(path, k)))
				continue
			}
			out = append(out, contains(v, gv, joinPath(path, k))...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(s) {
			return []string{fmt.Sprintf("%s: want %v, got %v", path, s, got)}
		}
		var out []string
		for i := range s {
			out = append(out, contains(s[i], g[i], indexPath(path, i))...)
		}
		return out
	case string:
		if ts, err := time.Parse(time.RFC3339, s); err == nil {
			if gs, ok := got.(string); ok {
				if tg, err := time.Parse(time.RFC3339, gs); err == nil && tg.Equal(ts) {
					return nil
				}
			}
		}
	}
	if fmt.Sprint(sent) != fmt.Sprint(got) {
		return []string{fmt.Sprintf("%s: want %v, got %v", path, sent, got)}
	}
	return nil
}

func isEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case float64:
		return x == 0
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

// Configuration is checked against the Provider's configurationItems when
// an Environment, a MachineSet or a MachineTemplate is written: 400 naming
// the key for an unknown key or a value its item refuses.
func TestConfigurationCheckedAgainstProvider(t *testing.T) {
	e := newTestEnv(t)
	raw, err := os.ReadFile("testdata/v4alpha1/01-provider.json")
	require.NoError(t, err)
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindProvider), adminTok, raw).code)
	env := func(cfg map[string]any) map[string]any {
		return map[string]any{"metadata": map[string]any{"name": "lab"}, "spec": map[string]any{"provider": "test", "providerConfiguration": cfg}}
	}
	for _, tc := range []struct {
		name  string
		kind  string
		body  map[string]any
		field string
	}{
		{"above the maximum", types.KindEnvironment, env(map[string]any{"cores": "12"}), "spec.providerConfiguration.cores"},
		{"not an integer", types.KindEnvironment, env(map[string]any{"cores": "two"}), "spec.providerConfiguration.cores"},
		{"not in the enum", types.KindEnvironment, env(map[string]any{"size": "huge"}), "spec.providerConfiguration.size"},
		{"unknown key", types.KindEnvironment, env(map[string]any{"flavour": "x"}), "spec.providerConfiguration.flavour"},
		{"template specific", types.KindEnvironment, map[string]any{"metadata": map[string]any{"name": "lab"},
			"spec": map[string]any{"provider": "test", "templateSpecific": map[string]any{"small": map[string]any{"tags": `["a","a"]`}}}},
			"spec.templateSpecific.small.tags[1]"},
		{"set", types.KindMachineSet, map[string]any{"metadata": map[string]any{"name": "pool"}, "spec": map[string]any{
			"availabilityConfiguration": map[string]any{"availability": "Pool"}, "machineTemplate": "small", "provider": "test",
			"providerConfiguration": map[string]any{"cores": "0"}}}, "spec.providerConfiguration.cores"},
		{"template entry by provider name", types.KindMachineTemplate, map[string]any{"metadata": map[string]any{"name": "small"},
			"spec": map[string]any{"providerConfiguration": map[string]any{"test": map[string]any{"tags": "web"}}}}, "spec.providerConfiguration.test.tags"},
	} {
		r := e.do("POST", path(tc.kind), adminTok, tc.body)
		if assert.Equal(t, http.StatusBadRequest, r.code, "%s: %s", tc.name, r.body) {
			assert.Equal(t, tc.field, r.errBody(t).Field, tc.name)
		}
	}
	ok := e.do("POST", path(types.KindEnvironment), adminTok, env(map[string]any{"cores": "8", "size": "small", "tags": `["a","b"]`}))
	assert.Equal(t, http.StatusCreated, ok.code, "%s", ok.body)

	// A set of an Environment takes the Environment's Provider, whatever
	// it names itself, as its machines are made (scheduler.ProviderName):
	// it was checked against its own Provider's items first.
	inEnv := map[string]any{"metadata": map[string]any{"name": "pool-lab"}, "spec": map[string]any{
		"availabilityConfiguration": map[string]any{"availability": "Pool"}, "machineTemplate": "small",
		"environment": "lab", "provider": "elsewhere", "providerConfiguration": map[string]any{"cores": "0"}}}
	r := e.do("POST", path(types.KindMachineSet), adminTok, inEnv)
	if assert.Equal(t, http.StatusBadRequest, r.code, "%s", r.body) {
		assert.Equal(t, "spec.providerConfiguration.cores", r.errBody(t).Field)
	}
}

// A user ends a claim by setting its phase to Terminated, as the proposal
// says (DELETE keeps working): its end facet is written and the claim reads
// Terminated with who did it; another user's claim is 404; any other update
// by a user is 403.
func TestClaimTerminatedByPhase(t *testing.T) {
	e := newTestEnv(t)
	e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "small"))
	claim := map[string]any{"metadata": map[string]any{"name": "c1"}, "spec": map[string]any{"machineTemplate": "small"}}
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineClaim), aliceTok, claim).code)

	ended := map[string]any{"metadata": map[string]any{"name": "c1"}, "spec": map[string]any{"machineTemplate": "small"},
		"status": map[string]any{"phase": "Terminated"}}
	assert.Equal(t, http.StatusNotFound, e.do("PUT", path(types.KindMachineClaim, "c1"), bobTok, ended).code, "not bob's")
	other := map[string]any{"metadata": map[string]any{"name": "c1"}, "spec": map[string]any{"machineTemplate": "big"}}
	assert.Equal(t, http.StatusForbidden, e.do("PUT", path(types.KindMachineClaim, "c1"), aliceTok, other).code)

	// If-Match is checked as on any write: a bad one is a 400, a version
	// the claim has moved past a 409.
	r := e.do("PUT", path(types.KindMachineClaim, "c1"), aliceTok, ended, "If-Match", "zz")
	assert.Equal(t, http.StatusBadRequest, r.code, "%s", r.body)
	v1 := e.do("GET", path(types.KindMachineClaim, "c1"), aliceTok, nil).obj(t)["metadata"].(map[string]any)["version"].(string)
	labelled := map[string]any{"metadata": map[string]any{"name": "c1", "labels": map[string]any{"team": "a"}},
		"spec": map[string]any{"machineTemplate": "small", "user": "alice"}}
	require.Equal(t, http.StatusOK, e.do("PUT", path(types.KindMachineClaim, "c1"), adminTok, labelled).code)
	r = e.do("PUT", path(types.KindMachineClaim, "c1"), aliceTok, ended, "If-Match", `"`+v1+`"`)
	assert.Equal(t, http.StatusConflict, r.code, "%s", r.body)

	r = e.do("PUT", path(types.KindMachineClaim, "c1"), aliceTok, ended)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	st := r.obj(t)["status"].(map[string]any)
	assert.Equal(t, "Terminated", st["phase"])
	assert.Equal(t, "terminated by alice", st["reason"])
	assert.Equal(t, "small", r.obj(t)["spec"].(map[string]any)["machineTemplate"], "the spec is not changed")
	c, err := store.Get[types.MachineClaim](e.st, types.KindMachineClaim, "c1")
	require.NoError(t, err)
	require.NotNil(t, c.Status.End)

	again := e.do("PUT", path(types.KindMachineClaim, "c1"), aliceTok, ended)
	assert.Equal(t, http.StatusOK, again.code, "terminating twice is fine")
	assert.Equal(t, http.StatusOK, e.do("DELETE", path(types.KindMachineClaim, "c1"), aliceTok, nil).code)
}
