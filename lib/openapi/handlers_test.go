package openapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

func TestCRUDEveryKind(t *testing.T) {
	e := newTestEnv(t)
	e.makeUser("alice", RoleUser) // the user of the minimal token
	for _, kind := range types.Kinds() {
		t.Run(kind, func(t *testing.T) {
			name := strings.ToLower(kind) + "-1"
			r := e.do("POST", path(kind), adminTok, minimal(kind, name))
			if kind == types.KindNode {
				// A node makes its own; this one has stopped (Down), so
				// that it may be deleted.
				require.Equal(t, http.StatusMethodNotAllowed, r.code, "%s", r.body)
				e.reportNode(name, types.NodeDown)
				r = e.do("GET", path(kind, name), adminTok, nil)
			} else {
				require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
			}
			created := r.obj(t)
			if kind == types.KindToken {
				assert.NotEmpty(t, created["token"], "a new token's answer holds its bearer string")
				delete(created, "token")
			}
			assert.Equal(t, kind, created["kind"])
			meta := created["metadata"].(map[string]any)
			assert.Equal(t, name, meta["name"])
			assert.NotEmpty(t, meta["version"])
			assert.NotEmpty(t, meta["createdAt"])

			r = e.do("GET", path(kind, name), adminTok, nil)
			require.Equal(t, http.StatusOK, r.code)
			assert.Equal(t, created, r.obj(t))

			r = e.do("GET", path(kind), adminTok, nil)
			require.Equal(t, http.StatusOK, r.code)
			list := r.obj(t)
			assert.Equal(t, kind+"List", list["kind"])
			assert.Contains(t, list["items"], any(created))

			upd := minimal(kind, name)
			upd["metadata"].(map[string]any)["labels"] = map[string]any{"tier": "gold"}
			if kind == types.KindNode {
				upd["spec"].(map[string]any)["maintenance"] = true
			}
			r = e.do("PUT", path(kind, name), adminTok, upd)
			if kind == types.KindToken {
				require.Equal(t, http.StatusMethodNotAllowed, r.code, "tokens cannot be changed")
				r = e.do("DELETE", path(kind, name), adminTok, nil)
				require.Equal(t, http.StatusOK, r.code)
				assert.Equal(t, created, r.obj(t))
				return
			}
			if kind == types.KindNode || kind == types.KindMachine {
				// Their labels are their node's to write.
				require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
				assert.Equal(t, "metadata.labels", r.errBody(t).Field)
				delete(upd["metadata"].(map[string]any), "labels")
				r = e.do("PUT", path(kind, name), adminTok, upd)
			}
			require.Equal(t, http.StatusOK, r.code, "%s", r.body)
			updated := r.obj(t)
			umeta := updated["metadata"].(map[string]any)
			switch kind {
			case types.KindNode:
				// The API writes a node's maintenance flag.
				assert.Equal(t, true, updated["spec"].(map[string]any)["maintenance"])
				assert.NotEqual(t, meta["version"], umeta["version"])
			case types.KindMachine:
				// A machine is its node's alone: nothing changes.
				assert.Equal(t, meta["version"], umeta["version"])
			default:
				assert.Equal(t, map[string]any{"tier": "gold"}, umeta["labels"])
				assert.NotEqual(t, meta["version"], umeta["version"])
			}
			assert.Equal(t, meta["createdAt"], umeta["createdAt"], "update keeps createdAt")

			r = e.do("DELETE", path(kind, name), adminTok, nil)
			require.Equal(t, http.StatusOK, r.code)
			assert.Equal(t, updated, r.obj(t), "delete returns the last object")

			r = e.do("GET", path(kind, name), adminTok, nil)
			assert.Equal(t, http.StatusNotFound, r.code)
			assert.Equal(t, CodeNotFound, r.errBody(t).Code)
			r = e.do("DELETE", path(kind, name), adminTok, nil)
			assert.Equal(t, http.StatusNotFound, r.code)
			r = e.do("PUT", path(kind, name), adminTok, upd)
			assert.Equal(t, http.StatusNotFound, r.code)
		})
	}
}

func TestCreateSetsServerFields(t *testing.T) {
	now := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	e := newTestEnvOn(t, openStoreAt(t, func() time.Time { return now }))

	t.Run("claim is Requested at now, client status ignored", func(t *testing.T) {
		c := minimal(types.KindMachineClaim, "c1")
		c["status"] = map[string]any{"phase": "Bound", "node": "n9"}
		delete(c, "kind")
		r := e.do("POST", path(types.KindMachineClaim), adminTok, c)
		require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
		st := r.obj(t)["status"].(map[string]any)
		assert.Equal(t, "Requested", st["phase"])
		assert.Nil(t, st["node"])
		assert.Equal(t, map[string]any{"Requested": now.Format(time.RFC3339Nano)}, st["phaseTimes"])
	})
	t.Run("machine status is cleared", func(t *testing.T) {
		m := minimal(types.KindMachine, "m1")
		m["status"] = map[string]any{"phase": "Running"}
		r := e.do("POST", path(types.KindMachine), adminTok, m)
		require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
		assert.Equal(t, map[string]any{}, r.obj(t)["status"])
	})
	t.Run("access code status is the system's; the earlier admin switch reads as spec.disabled", func(t *testing.T) {
		a := minimal(types.KindAccessCode, "code1")
		a["status"] = map[string]any{"phase": "Inactive", "status": "Active"}
		r := e.do("POST", path(types.KindAccessCode), adminTok, a)
		require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
		obj := r.obj(t)
		assert.Equal(t, true, obj["spec"].(map[string]any)["disabled"])
		assert.Equal(t, map[string]any{}, obj["status"], "the client's status is not taken")
	})
	t.Run("client version and times are ignored on create", func(t *testing.T) {
		n := minimal(types.KindMachineTemplate, "t1")
		n["metadata"].(map[string]any)["version"] = "5@elsewhere"
		n["metadata"].(map[string]any)["createdAt"] = "2001-01-01T00:00:00Z"
		r := e.do("POST", path(types.KindMachineTemplate), adminTok, n)
		require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
		meta := r.obj(t)["metadata"].(map[string]any)
		assert.NotEqual(t, "5@elsewhere", meta["version"])
		assert.NotEqual(t, "2001-01-01T00:00:00Z", meta["createdAt"])
	})
}

// TestUpdateKeepsOwnerStatus: status written by an owner through the store
// survives a PUT, and a PUT without a version never overwrites a newer status.
func TestUpdateKeepsOwnerStatus(t *testing.T) {
	e := newTestEnv(t)
	r := e.do("POST", path(types.KindMachineSet), adminTok, minimal(types.KindMachineSet, "pool"))
	require.Equal(t, http.StatusCreated, r.code, "%s", r.body)

	// The set's owner writes its status...
	_, err := store.UpdateFacet(e.st, types.KindMachineSet, "pool", types.FacetStatus, func(o *types.MachineSet) error {
		o.Status.Provisioned, o.Status.Available = 2, 1
		return nil
	})
	require.NoError(t, err)

	// ... and a PUT, which sends a status of its own, changes the spec only.
	upd := minimal(types.KindMachineSet, "pool")
	upd["spec"].(map[string]any)["minAvailable"] = 3
	upd["status"] = map[string]any{"provisioned": 9}
	r = e.do("PUT", path(types.KindMachineSet, "pool"), adminTok, upd)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	got := r.obj(t)
	assert.EqualValues(t, 3, got["spec"].(map[string]any)["minAvailable"])
	assert.Equal(t, map[string]any{"provisioned": float64(2), "available": float64(1)}, got["status"])

	// A machine is its node's alone: a PUT that would change it is refused.
	r = e.do("POST", path(types.KindMachine), adminTok, minimal(types.KindMachine, "m1"))
	require.Equal(t, http.StatusCreated, r.code)
	m := minimal(types.KindMachine, "m1")
	m["spec"].(map[string]any)["claim"] = "c1"
	r = e.do("PUT", path(types.KindMachine, "m1"), adminTok, m)
	require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
	assert.Equal(t, "spec.claim", r.errBody(t).Field)
}

func TestLabelSelector(t *testing.T) {
	e := newTestEnv(t)
	for i, labels := range []map[string]any{{"team": "ci", "tier": "gpu"}, {"team": "ci"}, {"team": "qa", "tier": "gpu"}, nil} {
		o := minimal(types.KindMachineTemplate, fmt.Sprintf("t%d", i))
		if labels != nil {
			o["metadata"].(map[string]any)["labels"] = labels
		}
		require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineTemplate), adminTok, o).code)
	}
	names := func(sel string) []string {
		r := e.do("GET", path(types.KindMachineTemplate)+"?labelSelector="+sel, adminTok, nil)
		require.Equal(t, http.StatusOK, r.code, "%s", r.body)
		var out []string
		for _, it := range r.obj(t)["items"].([]any) {
			out = append(out, it.(map[string]any)["metadata"].(map[string]any)["name"].(string))
		}
		return out
	}
	assert.Equal(t, []string{"t0", "t1", "t2", "t3"}, names(""))
	assert.Equal(t, []string{"t0", "t1"}, names("team=ci"))
	assert.Equal(t, []string{"t0"}, names("team=ci,tier=gpu"))
	assert.Equal(t, []string{"t0", "t2"}, names("tier%3D%3Dgpu"))
	assert.Nil(t, names("team=nobody"))
}

// TestListPages: ?limit pages through a list in name order, with the label
// selector applied before the limit, and continue ends on the last page.
func TestListPages(t *testing.T) {
	e := newTestEnv(t)
	for i := range 8 {
		o := minimal(types.KindMachineTemplate, fmt.Sprintf("t%d", i))
		if i != 3 && i != 7 {
			o["metadata"].(map[string]any)["labels"] = map[string]any{"team": "ci"}
		}
		require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineTemplate), adminTok, o).code)
	}
	page := func(query string) (names []string, next string) {
		r := e.do("GET", path(types.KindMachineTemplate)+"?"+query, adminTok, nil)
		require.Equal(t, http.StatusOK, r.code, "%s", r.body)
		body := r.obj(t)
		for _, it := range body["items"].([]any) {
			names = append(names, it.(map[string]any)["metadata"].(map[string]any)["name"].(string))
		}
		next, _ = body["continue"].(string)
		return names, next
	}
	var all []string
	pages := 0
	for cont := ""; ; {
		require.Less(t, pages, 5, "paging does not end")
		names, next := page("labelSelector=team=ci&limit=2&continue=" + cont)
		pages++
		assert.Len(t, names, 2, "full pages, no empty one at the end")
		all = append(all, names...)
		if next == "" {
			break
		}
		cont = next
	}
	assert.Equal(t, []string{"t0", "t1", "t2", "t4", "t5", "t6"}, all)
	assert.Equal(t, 3, pages)
	names, next := page("limit=3&continue=t2")
	assert.Equal(t, []string{"t3", "t4", "t5"}, names, "a page starts past its continue")
	assert.Equal(t, "t5", next)
	names, next = page("limit=10")
	assert.Len(t, names, 8)
	assert.Empty(t, next, "no continue when everything fit")
}

// TestBadInput: every bad request is a 4xx in the error shape, naming the field
// when there is one; none reaches the panic recovery (checked by the env).
func TestBadInput(t *testing.T) {
	e := newTestEnv(t)
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "small")).code)
	tmpl := func(mod func(m map[string]any)) map[string]any {
		o := minimal(types.KindMachineTemplate, "t2")
		mod(o)
		return o
	}
	spec := func(o map[string]any) map[string]any { return o["spec"].(map[string]any) }
	cases := []struct {
		name, method, path string
		body               any
		hdr                []string
		code               int
		errCode, field     string
	}{
		{"malformed json", "POST", path(types.KindMachineTemplate), `{"metadata": {`, nil, 400, CodeBadRequest, ""},
		{"not json", "POST", path(types.KindMachineTemplate), `hello`, nil, 400, CodeBadRequest, ""},
		{"empty body", "POST", path(types.KindMachineTemplate), ``, nil, 400, CodeBadRequest, ""},
		{"array body", "POST", path(types.KindMachineTemplate), `[1,2]`, nil, 400, CodeBadRequest, ""},
		{"null body", "POST", path(types.KindMachineTemplate), `null`, nil, 400, CodeBadRequest, ""},
		{"trailing data", "POST", path(types.KindMachineTemplate), `{"metadata":{"name":"x"}} {}`, nil, 400, CodeBadRequest, ""},
		{"duplicate member", "POST", path(types.KindMachineClaim), `{"metadata":{"name":"d1","name":"d2"},"spec":{"machineTemplate":"small"}}`, nil, 400, CodeBadRequest, "metadata.name"},
		{"duplicate member, escaped", "POST", path(types.KindMachineClaim), `{"metadata":{"name":"d1"},"spec":{"machineTemplate":"small","user":"admin","\u0075ser":"bob"}}`, nil, 400, CodeBadRequest, "spec.user"},
		{"duplicate member in a list", "POST", path(types.KindScheduledEvent), `{"metadata":{"name":"ev"},"spec":{"requiredMachines":[{"machineTemplate":"small","count":1,"count":2}]}}`, nil, 400, CodeBadRequest, "spec.requiredMachines[0].count"},
		{"unknown kind path", "GET", "/api/v1/gizmos", nil, nil, 404, CodeNotFound, ""},
		{"unknown kind path post", "POST", "/api/v1/gizmos", `{}`, nil, 404, CodeNotFound, ""},
		{"unknown top field", "POST", path(types.KindMachineTemplate), tmpl(func(m map[string]any) { m["extra"] = 1 }), nil, 400, CodeBadRequest, "extra"},
		{"unknown nested field", "POST", path(types.KindMachineTemplate), tmpl(func(m map[string]any) { spec(m)["resources"].(map[string]any)["gpu"] = 1 }), nil, 400, CodeBadRequest, "spec.resources.gpu"},
		{"field in wrong case", "POST", path(types.KindMachineTemplate), tmpl(func(m map[string]any) { m["Metadata"] = m["metadata"] }), nil, 400, CodeBadRequest, "Metadata"},
		{"unknown field in list item", "POST", path(types.KindScheduledEvent), func() any {
			o := minimal(types.KindScheduledEvent, "ev")
			spec(o)["requiredMachines"] = []any{map[string]any{"machineTemplate": "small", "count": 1, "colour": "red"}}
			return o
		}(), nil, 400, CodeBadRequest, "spec.requiredMachines[0].colour"},
		{"wrong type", "POST", path(types.KindMachineTemplate), tmpl(func(m map[string]any) { spec(m)["resources"].(map[string]any)["cpu"] = "two" }), nil, 400, CodeBadRequest, "spec.resources.cpu"},
		{"wrong type in list", "POST", path(types.KindScheduledEvent), func() any {
			o := minimal(types.KindScheduledEvent, "ev")
			spec(o)["requiredMachines"] = []any{map[string]any{"machineTemplate": "small", "count": "1"}}
			return o
		}(), nil, 400, CodeBadRequest, "spec.requiredMachines[0].count"},
		{"bad time", "POST", path(types.KindScheduledEvent), func() any {
			o := minimal(types.KindScheduledEvent, "ev")
			spec(o)["startTime"] = "tomorrow"
			return o
		}(), nil, 400, CodeBadRequest, "spec.startTime"},
		{"bad duration", "POST", path(types.KindMachineClaim), func() any {
			o := minimal(types.KindMachineClaim, "c")
			spec(o)["bindTimeout"] = "soon"
			return o
		}(), nil, 400, CodeBadRequest, "spec.bindTimeout"},
		{"bad version", "POST", path(types.KindMachineTemplate), tmpl(func(m map[string]any) { m["metadata"].(map[string]any)["version"] = "v1" }), nil, 400, CodeBadRequest, "metadata.version"},
		{"time out of range", "POST", path(types.KindScheduledEvent), func() any {
			o := minimal(types.KindScheduledEvent, "ev")
			spec(o)["startTime"] = "9999-12-31T23:00:00-05:00"
			spec(o)["endTime"] = "9999-12-31T23:30:00-05:00"
			return o
		}(), nil, 201, "", ""},
		{"missing name", "POST", path(types.KindMachineTemplate), tmpl(func(m map[string]any) { m["metadata"] = map[string]any{} }), nil, 400, CodeInvalid, "metadata.name"},
		{"bad name", "POST", path(types.KindMachineTemplate), tmpl(func(m map[string]any) { m["metadata"] = map[string]any{"name": "Big_Name"} }), nil, 400, CodeInvalid, "metadata.name"},
		{"missing spec field", "POST", path(types.KindMachineTemplate), tmpl(func(m map[string]any) { delete(spec(m), "providerConfiguration") }), nil, 400, CodeInvalid, "spec.providerConfiguration"},
		{"bad enum", "POST", path(types.KindMachineTemplate), tmpl(func(m map[string]any) { spec(m)["machineType"] = "Huge" }), nil, 400, CodeInvalid, "spec.machineType"},
		{"negative", "POST", path(types.KindMachineTemplate), tmpl(func(m map[string]any) { spec(m)["resources"].(map[string]any)["cpu"] = -1 }), nil, 400, CodeInvalid, "spec.resources.cpu"},
		{"bad label", "POST", path(types.KindMachineTemplate), tmpl(func(m map[string]any) { m["metadata"].(map[string]any)["labels"] = map[string]any{"-x": "y"} }), nil, 400, CodeInvalid, "metadata.labels.-x"},
		{"kind mismatch", "POST", path(types.KindMachineTemplate), tmpl(func(m map[string]any) { m["kind"] = "Machine" }), nil, 400, CodeBadRequest, "kind"},
		{"kind not a string", "POST", path(types.KindMachineTemplate), tmpl(func(m map[string]any) { m["kind"] = 7 }), nil, 400, CodeBadRequest, "kind"},
		{"name mismatch on put", "PUT", path(types.KindMachineTemplate, "small"), minimal(types.KindMachineTemplate, "other"), nil, 400, CodeBadRequest, "metadata.name"},
		{"bad if-match", "PUT", path(types.KindMachineTemplate, "small"), minimal(types.KindMachineTemplate, "small"), []string{"If-Match", "yesterday"}, 400, CodeBadRequest, "If-Match"},
		{"bad if-match on delete", "DELETE", path(types.KindMachineTemplate, "small"), nil, []string{"If-Match", "12"}, 400, CodeBadRequest, "If-Match"},
		{"bad label selector", "GET", path(types.KindMachineTemplate) + "?labelSelector=team+in+(a", nil, nil, 400, CodeBadRequest, "labelSelector"},
		{"bad watch", "GET", path(types.KindMachineTemplate) + "?watch=maybe", nil, nil, 400, CodeBadRequest, "watch"},
		{"zero limit", "GET", path(types.KindMachineTemplate) + "?limit=0", nil, nil, 400, CodeBadRequest, "limit"},
		{"huge limit", "GET", path(types.KindMachineTemplate) + "?limit=10001", nil, nil, 400, CodeBadRequest, "limit"},
		{"limit not a number", "GET", path(types.KindMachineTemplate) + "?limit=ten", nil, nil, 400, CodeBadRequest, "limit"},
		{"bad continue", "GET", path(types.KindMachineTemplate) + "?continue=%2F..%2F", nil, nil, 400, CodeBadRequest, "continue"},
		{"bad since", "GET", path(types.KindMachineTemplate) + "?watch=true&since=-1", nil, nil, 400, CodeBadRequest, "since"},
		{"bad kinds", "GET", "/api/v1/events?kinds=Gizmo", nil, nil, 400, CodeBadRequest, "kinds"},
		{"unknown name", "GET", path(types.KindMachineTemplate, "nope"), nil, nil, 404, CodeNotFound, ""},
		{"huge name", "GET", path(types.KindMachineTemplate, strings.Repeat("n", 70000)), nil, nil, 404, CodeNotFound, ""},
		{"huge name delete", "DELETE", path(types.KindMachineTemplate, strings.Repeat("n", 70000)), nil, nil, 404, CodeNotFound, ""},
		{"odd name", "GET", path(types.KindMachineTemplate, "%00%20x"), nil, nil, 404, CodeNotFound, ""},
		{"wrong method", "PATCH", path(types.KindMachineTemplate, "small"), `{}`, nil, 405, CodeMethodNotAllowed, ""},
		{"wrong method on collection", "DELETE", path(types.KindMachineTemplate), nil, nil, 405, CodeMethodNotAllowed, ""},
		{"unknown top path", "GET", "/nothing", nil, nil, 404, CodeNotFound, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.do(tc.method, tc.path, adminTok, tc.body, tc.hdr...)
			require.Equal(t, tc.code, r.code, "%s", r.body)
			if tc.code < 300 {
				return
			}
			eb := r.errBody(t)
			assert.Equal(t, tc.errCode, eb.Code)
			assert.Equal(t, tc.field, eb.Field, "message: %s", eb.Message)
		})
	}
	t.Run("unknown kind lists kinds", func(t *testing.T) {
		r := e.do("GET", "/api/v1/gizmos", adminTok, nil)
		assert.Contains(t, r.errBody(t).Message, "machineclaims")
	})
	t.Run("405 says what is allowed", func(t *testing.T) {
		r := e.do("PATCH", path(types.KindMachineTemplate, "small"), adminTok, `{}`)
		assert.Contains(t, r.header.Get("Allow"), "PUT")
	})
}

func TestConflicts(t *testing.T) {
	e := newTestEnv(t)
	r := e.do("POST", path(types.KindEnvironment), adminTok, minimal(types.KindEnvironment, "lab"))
	require.Equal(t, http.StatusCreated, r.code)
	v1 := r.obj(t)["metadata"].(map[string]any)["version"].(string)

	r = e.do("POST", path(types.KindEnvironment), adminTok, minimal(types.KindEnvironment, "lab"))
	require.Equal(t, http.StatusConflict, r.code)
	assert.Equal(t, CodeConflict, r.errBody(t).Code)

	// A conditional update with the current version wins once.
	changed := minimal(types.KindEnvironment, "lab")
	changed["metadata"].(map[string]any)["labels"] = map[string]any{"tier": "gold"}
	r = e.do("PUT", path(types.KindEnvironment, "lab"), adminTok, changed, "If-Match", `"`+v1+`"`)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	v2 := r.obj(t)["metadata"].(map[string]any)["version"].(string)
	require.NotEqual(t, v1, v2)

	// An update that changes nothing writes nothing: the version stays.
	r = e.do("PUT", path(types.KindEnvironment, "lab"), adminTok, changed, "If-Match", v2)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	assert.Equal(t, v2, r.obj(t)["metadata"].(map[string]any)["version"])

	r = e.do("PUT", path(types.KindEnvironment, "lab"), adminTok, minimal(types.KindEnvironment, "lab"), "If-Match", v1)
	require.Equal(t, http.StatusConflict, r.code)
	assert.Equal(t, CodeConflict, r.errBody(t).Code)

	stale := minimal(types.KindEnvironment, "lab")
	stale["metadata"].(map[string]any)["version"] = v1
	r = e.do("PUT", path(types.KindEnvironment, "lab"), adminTok, stale)
	require.Equal(t, http.StatusConflict, r.code)
	assert.Equal(t, CodeConflict, r.errBody(t).Code)

	r = e.do("PUT", path(types.KindEnvironment, "lab"), adminTok, stale, "If-Match", v2)
	require.Equal(t, http.StatusBadRequest, r.code, "If-Match and metadata.version disagree")
	assert.Equal(t, "metadata.version", r.errBody(t).Field)

	r = e.do("DELETE", path(types.KindEnvironment, "lab"), adminTok, nil, "If-Match", v1)
	require.Equal(t, http.StatusConflict, r.code)
	r = e.do("DELETE", path(types.KindEnvironment, "lab"), adminTok, nil, "If-Match", "*")
	require.Equal(t, http.StatusOK, r.code)
}

func TestBodyLimits(t *testing.T) {
	e := newTestEnvOn(t, openDiskStore(t))
	// Annotations hold at most 256 KiB; a template's driver configuration
	// takes the whole body.
	big := func(value string) map[string]any {
		o := minimal(types.KindMachineTemplate, "p")
		o["spec"].(map[string]any)["providerConfiguration"] = map[string]any{"test": map[string]any{"blob": value}}
		return o
	}
	t.Run("over 1 MiB is 413", func(t *testing.T) {
		r := e.do("POST", path(types.KindMachineTemplate), adminTok, big(strings.Repeat("a", MaxBodyBytes)))
		require.Equal(t, http.StatusRequestEntityTooLarge, r.code)
		assert.Equal(t, CodeTooLarge, r.errBody(t).Code)
	})
	t.Run("a body that grows when encoded is 413, not 500", func(t *testing.T) {
		// '<' is escaped to \u003c: 900 KB of them would be 5 MB stored.
		body, err := json.Marshal(big("x"))
		require.NoError(t, err)
		raw := strings.Replace(string(body), `"x"`, `"`+strings.Repeat("<", 900<<10)+`"`, 1)
		r := e.do("POST", path(types.KindMachineTemplate), adminTok, raw)
		require.Equal(t, http.StatusRequestEntityTooLarge, r.code, "%.200s", r.body)
	})
	t.Run("just under the limit is stored", func(t *testing.T) {
		r := e.do("POST", path(types.KindMachineTemplate), adminTok, big(strings.Repeat("a", MaxBodyBytes-300)))
		require.Equal(t, http.StatusCreated, r.code, "%.200s", r.body)
		r = e.do("GET", path(types.KindMachineTemplate, "p"), adminTok, nil)
		require.Equal(t, http.StatusOK, r.code)
	})
}

// TestPanicIsInternal: a handler panic is a logged 500 in the error shape.
func TestPanicIsInternal(t *testing.T) {
	e := newTestEnv(t)
	e.allow500 = true
	e.srv.engine.GET("/api/v1/boom", e.srv.authenticate, func(c *gin.Context) { panic("boom") })
	req, err := http.NewRequest("GET", e.http.URL+"/api/v1/boom", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminTok)
	res, err := e.http.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	require.Equal(t, http.StatusInternalServerError, res.StatusCode)
	var b ErrorBody
	require.NoError(t, json.NewDecoder(res.Body).Decode(&b))
	assert.Equal(t, CodeInternal, b.Error.Code)
	assert.Contains(t, e.logs.String(), "handler panic")
	assert.Contains(t, e.logs.String(), "boom")
}

// TestNoRouteMessages: a path under a kind that no route has (a name with a
// '/', escaped or not) says so, not that the kind is unknown; an unknown
// kind lists the kinds.
func TestNoRouteMessages(t *testing.T) {
	e := newTestEnv(t)
	for _, p := range []string{
		"/api/v1/machineclaims/a1,hf%2Fclaim!=x",
		"/api/v1/machineclaims/a1/b",
	} {
		r := e.do("DELETE", p, adminTok, nil)
		require.Equal(t, http.StatusNotFound, r.code, p)
		msg := r.errBody(t).Message
		assert.NotContains(t, msg, "unknown resource", p)
		assert.Contains(t, msg, "a name is one path segment", p)
	}
	r := e.do("GET", "/api/v1/gizmos/x", adminTok, nil)
	require.Equal(t, http.StatusNotFound, r.code)
	assert.Contains(t, r.errBody(t).Message, `unknown resource "gizmos"; kinds are `)
}

// A list's JSON keeps its items as they are and is what encoding/json made
// of the same body, field for field.
func TestListBodyEncode(t *testing.T) {
	items := []json.RawMessage{
		json.RawMessage(`{"kind":"MachineClaim","metadata":{"name":"a"}}`),
		json.RawMessage(`{"kind":"MachineClaim","metadata":{"name":"b","labels":{"x":"<&>"}}}`),
	}
	for _, l := range []listBody{
		{APIVersion: types.APIVersion, Kind: "MachineClaimList", Items: items},
		{APIVersion: types.APIVersion, Kind: "MachineClaimList", Continue: "b", Items: items[:1]},
		{APIVersion: types.APIVersion, Kind: "MachineList", Items: []json.RawMessage{}},
	} {
		got, err := l.encode()
		require.NoError(t, err)
		require.True(t, json.Valid(got), "%s", got)
		var back listBody
		require.NoError(t, json.Unmarshal(got, &back))
		assert.Equal(t, l.APIVersion, back.APIVersion)
		assert.Equal(t, l.Kind, back.Kind)
		assert.Equal(t, l.Continue, back.Continue)
		require.Len(t, back.Items, len(l.Items))
		for i := range l.Items {
			assert.Equal(t, string(l.Items[i]), string(back.Items[i]), "item %d as it was", i)
		}
		var a, b any
		want, err := json.Marshal(l)
		require.NoError(t, err)
		require.NoError(t, json.Unmarshal(want, &a))
		require.NoError(t, json.Unmarshal(got, &b))
		assert.Equal(t, a, b, "the same list as encoding/json's")
		assert.Equal(t, l.Continue == "", !strings.Contains(string(got), `"continue"`))
	}
}

// A claim's spec cannot change after creation: its machine was made from
// it. A PUT by an admin or an operator that gives another template, user,
// environment, ... is a 409 naming the field and changes nothing; labels
// and annotations still change, and spec fields the body leaves out keep
// their values. (The spec used to be rewritten unchecked: a Bound claim
// read template big, a user that did not exist and an environment whose
// cap was never checked, while its machine was the small one.)
func TestClaimSpecIsFixed(t *testing.T) {
	e := newTestEnv(t)
	e.makeUser("olga", RoleOperator)
	opTok := e.makeToken("olga-1", "olga", RoleOperator)
	for _, n := range []string{"small", "big"} {
		require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, n)).code)
	}
	require.Equal(t, http.StatusCreated, e.do("POST", path(types.KindEnvironment), adminTok, minimal(types.KindEnvironment, "lab")).code)
	pc := map[string]any{"metadata": map[string]any{"name": "pc"}, "spec": map[string]any{"machineTemplate": "small"}}
	r := e.do("POST", path(types.KindMachineClaim), aliceTok, pc)
	require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
	created := r.obj(t)

	for _, tc := range []struct {
		name  string
		spec  map[string]any
		field string
	}{
		{"the report's PUT", map[string]any{"machineTemplate": "big", "user": "mallory", "environment": "lab"}, "spec.machineTemplate"},
		{"user", map[string]any{"machineTemplate": "small", "user": "mallory"}, "spec.user"},
		{"environment", map[string]any{"environment": "lab"}, "spec.environment"},
		{"bind timeout", map[string]any{"bindTimeout": "1h"}, "spec.bindTimeout"},
		{"sets", map[string]any{"bindStrategy": "PreferMachineSets", "bindStrategyMachineSets": []string{"pool"}}, "spec.bindStrategy"},
	} {
		for who, tok := range map[string]string{"admin": adminTok, "operator": opTok} {
			t.Run(tc.name+" by "+who, func(t *testing.T) {
				r := e.do("PUT", path(types.KindMachineClaim, "pc"), tok, map[string]any{"metadata": map[string]any{"name": "pc"}, "spec": tc.spec})
				require.Equal(t, http.StatusConflict, r.code, "%s", r.body)
				b := r.errBody(t)
				assert.Equal(t, tc.field, b.Field)
				assert.Contains(t, b.Message, tc.field+" cannot change after creation; delete the claim and create another", "the message names the field: clients show it alone")
			})
		}
	}
	r = e.do("GET", path(types.KindMachineClaim, "pc"), adminTok, nil)
	require.Equal(t, http.StatusOK, r.code)
	assert.Equal(t, created, r.obj(t), "nothing changed")

	// Labels change, by an operator too; the spec the body leaves out stays.
	labelled := map[string]any{"metadata": map[string]any{"name": "pc", "labels": map[string]any{"team": "a"}}, "spec": map[string]any{"machineTemplate": "small"}}
	r = e.do("PUT", path(types.KindMachineClaim, "pc"), opTok, labelled)
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
	got := r.obj(t)
	assert.Equal(t, map[string]any{"team": "a"}, got["metadata"].(map[string]any)["labels"])
	assert.Equal(t, created["spec"], got["spec"])
	// The claim as read goes back unchanged.
	r = e.do("PUT", path(types.KindMachineClaim, "pc"), adminTok, json.RawMessage(e.do("GET", path(types.KindMachineClaim, "pc"), adminTok, nil).body))
	require.Equal(t, http.StatusOK, r.code, "%s", r.body)
}
