package openapi

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/internal/testclock"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// What a browser needs of the API: CORS, a way for EventSource to
// authenticate, ids that resume on any node, field selectors.

// rawDo sends a request outside the spec check (OPTIONS is no operation).
func rawDo(t *testing.T, e *testEnv, method, path string, hdr ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, e.http.URL+path, nil)
	require.NoError(t, err)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := e.http.Client().Do(req)
	require.NoError(t, err)
	t.Cleanup(func() { _ = res.Body.Close() })
	return res
}

func TestCORS(t *testing.T) {
	e := newTestEnv(t, func(c *Config) { c.CORSOrigins = []string{"https://ui.example"} })
	claims := path(types.KindMachineClaim)

	t.Run("an allowed origin's request", func(t *testing.T) {
		r := e.do("GET", claims, adminTok, nil, "Origin", "https://ui.example")
		assert.Equal(t, http.StatusOK, r.code)
		assert.Equal(t, "https://ui.example", r.header.Get("Access-Control-Allow-Origin"))
		assert.Contains(t, r.header.Values("Vary"), "Origin")
		assert.Contains(t, r.header.Get("Access-Control-Expose-Headers"), "X-Hf-Node")
	})
	t.Run("another origin gets no grant", func(t *testing.T) {
		r := e.do("GET", claims, adminTok, nil, "Origin", "https://evil.example")
		assert.Empty(t, r.header.Get("Access-Control-Allow-Origin"))
	})
	t.Run("preflight", func(t *testing.T) {
		res := rawDo(t, e, http.MethodOptions, claims+"/c1", "Origin", "https://ui.example",
			"Access-Control-Request-Method", "PUT", "Access-Control-Request-Headers", "authorization,content-type")
		assert.Equal(t, http.StatusNoContent, res.StatusCode)
		assert.Equal(t, "https://ui.example", res.Header.Get("Access-Control-Allow-Origin"))
		for _, m := range []string{"GET", "PUT", "DELETE", "OPTIONS"} {
			assert.Contains(t, res.Header.Get("Access-Control-Allow-Methods"), m)
		}
		assert.Contains(t, res.Header.Get("Access-Control-Allow-Headers"), "Authorization")
		assert.Contains(t, res.Header.Get("Access-Control-Allow-Headers"), "Last-Event-ID")
		assert.NotEmpty(t, res.Header.Get("Access-Control-Max-Age"))
	})
	t.Run("preflight of another origin is 403 naming Origin", func(t *testing.T) {
		res := rawDo(t, e, http.MethodOptions, claims, "Origin", "https://evil.example", "Access-Control-Request-Method", "POST")
		assert.Equal(t, http.StatusForbidden, res.StatusCode)
		body := readErr(t, res)
		assert.Equal(t, "Origin", body.Field)
		assert.Contains(t, body.Message, "api.cors_origins")
	})
	t.Run("plain OPTIONS lists the methods", func(t *testing.T) {
		res := rawDo(t, e, http.MethodOptions, "/api/v1/events")
		assert.Equal(t, http.StatusNoContent, res.StatusCode)
		assert.Equal(t, "GET, OPTIONS", res.Header.Get("Allow"))
	})
	t.Run("OPTIONS on no route is 404", func(t *testing.T) {
		res := rawDo(t, e, http.MethodOptions, "/api/v1/gadgets", "Origin", "https://ui.example", "Access-Control-Request-Method", "GET")
		assert.Equal(t, http.StatusNotFound, res.StatusCode)
	})
	t.Run("any origin with *", func(t *testing.T) {
		e := newTestEnv(t, func(c *Config) { c.CORSOrigins = []string{"*"} })
		r := e.do("GET", claims, adminTok, nil, "Origin", "http://localhost:3000")
		assert.Equal(t, "http://localhost:3000", r.header.Get("Access-Control-Allow-Origin"))
	})
}

func readErr(t *testing.T, res *http.Response) Error {
	t.Helper()
	var b ErrorBody
	require.NoError(t, json.NewDecoder(res.Body).Decode(&b))
	return b.Error
}

func TestStreamTickets(t *testing.T) {
	clock := testclock.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	e := newTestEnvOn(t, openStoreAt(t, clock.Now))
	ticket := func(tok string) string {
		r := e.do("POST", "/api/v1/stream-tickets", tok, nil)
		require.Equal(t, http.StatusCreated, r.code, "%s", r.body)
		m := r.obj(t)
		assert.Equal(t, clock.Now().Add(StreamTicketTTL).Format(time.RFC3339), m["expiresAt"])
		return m["ticket"].(string)
	}
	require.Equal(t, 201, e.do("POST", path(types.KindMachineClaim), aliceTok, minimal(types.KindMachineClaim, "mine")).code)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tk := ticket(aliceTok)
	ch, res := e.openStream(ctx, "/api/v1/events?kinds=machineclaims&ticket="+tk, "")
	require.NotNil(t, ch, "status %d", res.StatusCode)
	assert.Equal(t, "mine", next(t, ch).data.Name, "the stream is alice's")

	for name, tc := range map[string]struct {
		url, ticket string
	}{
		"used twice":         {"/api/v1/events?ticket=", tk},
		"unknown":            {"/api/v1/events?ticket=", "nope"},
		"not a stream":       {path(types.KindMachineClaim) + "?ticket=", ticket(aliceTok)},
		"a watch=false list": {path(types.KindMachineClaim) + "?watch=false&ticket=", ticket(aliceTok)},
		// ?watch=true makes a stream of a list only: with it a ticket read
		// one object, or a machine's logs (and passed a shell's check).
		"one object, watch=true": {path(types.KindMachineClaim, "mine") + "?watch=true&ticket=", ticket(aliceTok)},
		"whoami, watch=true":     {"/api/v1/whoami?watch=true&ticket=", ticket(aliceTok)},
		"logs, watch=true":       {path(types.KindMachine, "m1") + "/logs?follow=true&watch=true&ticket=", ticket(aliceTok)},
		"shell, watch=true":      {path(types.KindMachine, "m1") + "/shell?watch=true&ticket=", ticket(aliceTok)},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.do("GET", tc.url+tc.ticket, "", nil)
			assert.Equal(t, http.StatusUnauthorized, r.code)
			assert.Equal(t, "ticket", r.errBody(t).Field)
		})
	}
	t.Run("a watch=true list", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch, _ := e.openStream(ctx, path(types.KindMachineClaim)+"?watch=true&ticket="+ticket(adminTok), "")
		require.NotNil(t, ch)
		assert.Equal(t, "mine", next(t, ch).data.Name)
	})
	t.Run("expired", func(t *testing.T) {
		tk := ticket(aliceTok)
		clock.Add(StreamTicketTTL)
		r := e.do("GET", "/api/v1/events?ticket="+tk, "", nil)
		assert.Equal(t, http.StatusUnauthorized, r.code)
	})
	t.Run("its token revoked meanwhile", func(t *testing.T) {
		e.makeUser("olga", RoleOperator)
		tok := e.makeToken("olga-1", "olga", RoleOperator)
		tk := ticket(tok)
		require.Equal(t, http.StatusOK, e.do("DELETE", path(types.KindToken, "olga-1"), adminTok, nil).code)
		r := e.do("GET", "/api/v1/events?ticket="+tk, "", nil)
		assert.Equal(t, http.StatusUnauthorized, r.code)
	})
	t.Run("a ticket buys no ticket", func(t *testing.T) {
		r := e.do("POST", "/api/v1/stream-tickets?ticket="+ticket(adminTok), "", nil)
		assert.Equal(t, http.StatusUnauthorized, r.code)
	})
}

func TestFieldSelector(t *testing.T) {
	e := newTestEnv(t)
	claim := func(name, user, tmpl string) map[string]any {
		o := minimal(types.KindMachineClaim, name)
		o["spec"].(map[string]any)["user"] = user
		o["spec"].(map[string]any)["machineTemplate"] = tmpl
		return o
	}
	for _, c := range [][3]string{{"a1", "alice", "small"}, {"a2", "alice", "big"}, {"b1", "bob", "small"}} {
		require.Equal(t, 201, e.do("POST", path(types.KindMachineClaim), adminTok, claim(c[0], c[1], c[2])).code)
	}
	names := func(r response) []string {
		var out []string
		for _, it := range r.obj(t)["items"].([]any) {
			out = append(out, it.(map[string]any)["metadata"].(map[string]any)["name"].(string))
		}
		return out
	}
	for _, tc := range []struct{ sel, want string }{
		{"spec.user=alice", "a1,a2"},
		{"spec.user==alice,spec.machineTemplate!=big", "a1"},
		{"spec.machineTemplate=small", "a1,b1"},
		{"metadata.name=b1", "b1"},
		{"status.phase=Requested", "a1,a2,b1"},
		{"status.phase=Bound", ""},
	} {
		r := e.do("GET", path(types.KindMachineClaim)+"?fieldSelector="+tc.sel, adminTok, nil)
		require.Equal(t, http.StatusOK, r.code, "%s: %s", tc.sel, r.body)
		got := names(r)
		assert.Equal(t, tc.want, joinNames(got), tc.sel)
	}
	for _, tc := range []struct{ url, msg string }{
		{path(types.KindMachineClaim) + "?fieldSelector=spec.colour=red", `"spec.colour" is not selectable on machineclaims`},
		{path(types.KindMachineClaim) + "?fieldSelector=spec.user", "invalid selector"},
		{path(types.KindMachineTemplate) + "?fieldSelector=spec.user=alice", "spec.user"},
		{path(types.KindMachineClaim) + "?watch=true&fieldSelector=spec.colour=red", "spec.colour"},
		{"/api/v1/events?fieldSelector=spec.user=alice", "not selectable on"},
	} {
		r := e.do("GET", tc.url, adminTok, nil)
		require.Equal(t, http.StatusBadRequest, r.code, tc.url)
		b := r.errBody(t)
		assert.Equal(t, "fieldSelector", b.Field, tc.url)
		assert.Contains(t, b.Message, tc.msg, tc.url)
	}

	// A watch sends what matches, and one that stops matching as deleted.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ch, _ := e.openStream(ctx, "/api/v1/events?kinds=machineclaims,sessions&fieldSelector=spec.user%3Dalice", adminTok)
	require.NotNil(t, ch)
	got := []string{next(t, ch).data.Name, next(t, ch).data.Name}
	assert.Equal(t, "a1,a2", joinNames(got))
	// (A claim's spec cannot change through the API; a store write, as
	// replication brings any, moves it out of the selection.)
	_, err := store.UpdateFacet(e.st, types.KindMachineClaim, "a1", types.FacetSpec, func(o *types.MachineClaim) error {
		o.Spec.User = "bob"
		return nil
	})
	require.NoError(t, err)
	ev := next(t, ch)
	assert.Equal(t, "delete", ev.name)
	assert.Equal(t, "a1", ev.data.Name)
}

func joinNames(names []string) string { return strings.Join(names, ",") }

// A client that saw node 2's stream resumes through node 1 with the
// Last-Event-ID node 2 sent: the ids are the same on both, and a change
// node 2 had not received yet when the client left still arrives.
func TestStreamResumesThroughAnotherNode(t *testing.T) {
	clock := testclock.New(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	st1 := openStoreAt(t, clock.Now)
	st2, err := store.Open(store.Config{InMemory: true, NodeID: "n2", GCInterval: -1, Now: clock.Now}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st2.Close() })
	n1, n2 := newTestEnvOn(t, st1), newTestEnvOn(t, st2)
	replicate := func(name string) {
		rec, err := st1.Get(types.KindMachineTemplate, name)
		require.NoError(t, err)
		_, err = st2.Apply(rec)
		require.NoError(t, err)
	}
	for _, name := range []string{"old", "a", "b"} {
		require.Equal(t, 201, n1.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, name)).code)
		if name == "old" {
			clock.Add(10 * time.Minute) // far before the others: outside the resume window
		}
	}
	replicate("old")
	replicate("b") // a is late to node 2

	ctx, cancel := context.WithCancel(context.Background())
	ch, _ := n2.openStream(ctx, path(types.KindMachineTemplate)+"?watch=true", adminTok)
	var ids []string
	for _, want := range []string{"old", "b", WatchSynced} {
		ev := nextEvent(t, ch)
		if want == WatchSynced {
			assert.Equal(t, WatchSynced, ev.name, "the snapshot's end")
			assert.Empty(t, ev.id, "the marker has no id: the client keeps its last")
			break
		}
		assert.Equal(t, want, ev.data.Name)
		ids = append(ids, ev.id)
	}
	cancel()
	recB, err := st1.Get(types.KindMachineTemplate, "b")
	require.NoError(t, err)
	assert.Equal(t, recB.Version.String(), ids[1], "b's id is the same on both nodes")

	require.Equal(t, 201, n1.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "c")).code)
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	ch, _ = n1.openStream(ctx, path(types.KindMachineTemplate)+"?watch=true", adminTok, "Last-Event-ID", ids[1])
	var got []string
	for ev := nextEvent(t, ch); ev.name != WatchSynced; ev = nextEvent(t, ch) {
		got = append(got, ev.data.Name)
	}
	assert.Equal(t, []string{"a", "b", "c"}, got, "a, which node 2 lacked, comes; old, long before, does not")
	require.Equal(t, 201, n1.do("POST", path(types.KindMachineTemplate), adminTok, minimal(types.KindMachineTemplate, "d")).code)
	assert.Equal(t, "d", next(t, ch).data.Name, "live changes follow the marker")

	r := n1.do("GET", path(types.KindMachineTemplate)+"?watch=true", adminTok, nil, "Last-Event-ID", "12@")
	assert.Equal(t, http.StatusBadRequest, r.code)
	assert.Equal(t, "Last-Event-ID", r.errBody(t).Field)
	r = n1.do("GET", path(types.KindMachineTemplate)+"?watch=true", adminTok, nil, "Last-Event-ID", "twelve")
	assert.Equal(t, http.StatusBadRequest, r.code)
	assert.Equal(t, `want a version hlc@node (an event's id) or a sequence number, got "twelve"`, r.errBody(t).Message, "both forms are named")
}

func TestStreamAsksForRetry(t *testing.T) {
	e := newTestEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.http.URL+"/api/v1/events", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+adminTok)
	res, err := e.http.Client().Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	buf := make([]byte, len("retry: 2000\n\n"))
	_, err = io.ReadFull(res.Body, buf)
	require.NoError(t, err)
	assert.Equal(t, "retry: 2000\n\n", string(buf))
}

func TestDashboardFiles(t *testing.T) {
	e := newTestEnv(t)
	for _, tc := range []struct {
		path, ctype, has string
		code             int
	}{
		{"/", "text/html", `<script src="/ui/app.js"`, http.StatusOK},
		{"/ui/app.js", "javascript", "EventSource", http.StatusOK},
		{"/ui/app.css", "text/css", ".bar", http.StatusOK},
		{"/ui/nope.js", "application/json", "no dashboard file", http.StatusNotFound},
		{"/ui/../dashboard.go", "application/json", "", http.StatusNotFound},
		{"/ui/", "application/json", "", http.StatusNotFound},
	} {
		res := rawDo(t, e, http.MethodGet, tc.path)
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		assert.Equal(t, tc.code, res.StatusCode, tc.path)
		assert.Contains(t, res.Header.Get("Content-Type"), tc.ctype, tc.path)
		assert.Contains(t, string(body), tc.has, tc.path)
		if tc.code == http.StatusOK {
			assert.Contains(t, res.Header.Get("Content-Security-Policy"), "script-src 'self'", tc.path)
			assert.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"), "tickets in URLs stay here")
		}
	}
}

// One token holds at most maxTicketsPerToken unused tickets, so it cannot
// keep other tokens from streaming; a used or expired ticket frees a place.
func TestStreamTicketsPerToken(t *testing.T) {
	e := newTestEnv(t)
	for i := range maxTicketsPerToken {
		require.Equal(t, http.StatusCreated, e.do("POST", "/api/v1/stream-tickets", aliceTok, nil).code, "ticket %d", i)
	}
	r := e.do("POST", "/api/v1/stream-tickets", aliceTok, nil)
	assert.Equal(t, http.StatusTooManyRequests, r.code)
	assert.Contains(t, r.errBody(t).Message, "per token")
	assert.Equal(t, http.StatusCreated, e.do("POST", "/api/v1/stream-tickets", bobTok, nil).code, "another token has its own")
}
