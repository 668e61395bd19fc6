package openapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/internal/syncbuf"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

const (
	adminTok = "admin-secret-token"
	aliceTok = "alice-secret-token"
	bobTok   = "bob-secret-token"
)

// testEnv is one API server on a real in-memory store behind httptest.
type testEnv struct {
	t    *testing.T
	srv  *Server
	st   *store.Store
	http *httptest.Server
	logs *syncbuf.Buffer
	// allow500 lets a test expect a 500 (the panic test only).
	allow500 bool
}

func testTokens() []Token {
	return []Token{
		{Name: "alice-laptop", Token: aliceTok, Role: RoleUser, User: "alice"},
		{Name: "bob", Token: bobTok, Role: RoleUser, User: "bob"},
	}
}

func openStore(t testing.TB) *store.Store {
	t.Helper()
	return openStoreAt(t, nil)
}

// openStoreAt opens an in-memory store on the clock now (nil: the wall clock);
// a server on it reads the same clock unless its Config sets another.
func openStoreAt(t testing.TB, now func() time.Time) *store.Store {
	t.Helper()
	st, err := store.Open(store.Config{InMemory: true, NodeID: "n1", GCInterval: -1, Now: now}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// openDiskStore opens a store in a temp dir. The in-memory store refuses values
// over badger's value threshold (1 KiB), so large objects need a disk store.
func openDiskStore(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(store.Config{Dir: t.TempDir(), NodeID: "n1", GCInterval: -1}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func newTestEnv(t *testing.T, mods ...func(*Config)) *testEnv {
	t.Helper()
	return newTestEnvOn(t, openStore(t), mods...)
}

// newBootstrappedEnv is a test env on a store whose admin user was
// bootstrapped as a first node does: bearer is that admin's token.
func newBootstrappedEnv(t *testing.T) (e *testEnv, bearer string) {
	t.Helper()
	st := openStore(t)
	bearer, err := NewBootstrapToken()
	require.NoError(t, err)
	require.NoError(t, BootstrapAdmin(st, bearer))
	return newTestEnvOn(t, st), bearer
}

func newTestEnvOn(t *testing.T, st *store.Store, mods ...func(*Config)) *testEnv {
	t.Helper()
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	cfg := Config{AdminToken: adminTok, Tokens: testTokens(), NodeName: "n1"}
	for _, m := range mods {
		m(&cfg)
	}
	srv, err := New(cfg, log, st)
	require.NoError(t, err)
	e := &testEnv{t: t, srv: srv, st: st, logs: logs}
	e.http = httptest.NewServer(srv.Handler())
	t.Cleanup(e.http.Close)
	t.Cleanup(func() {
		if !e.allow500 {
			assert.NotContains(t, logs.String(), "handler panic", "a request reached the panic recovery")
		}
	})
	return e
}

// reportNode writes node name's report as the node itself does (nodes make
// their own Node objects; the API refuses to), with phase.
func (e *testEnv) reportNode(name string, phase types.NodePhase) {
	e.t.Helper()
	n := &types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: name},
		Spec: types.NodeSpec{APIAddress: "127.0.0.1:8080"}, Status: types.NodeStatus{Phase: phase}}
	_, err := store.UpdateFacet(e.st, types.KindNode, name, types.FacetReport, func(o *types.Node) error {
		o.Spec.APIAddress, o.Status.Phase = n.Spec.APIAddress, phase
		return nil
	})
	if errors.Is(err, store.ErrNotFound) {
		_, err = e.st.Put(n, store.PutOptions{Create: true, Facets: []string{types.FacetReport}})
	}
	require.NoError(e.t, err)
}

// response is a finished HTTP exchange.
type response struct {
	code   int
	header http.Header
	body   []byte
}

func (r response) obj(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(r.body, &m), "body: %s", r.body)
	return m
}

func (r response) errBody(t *testing.T) Error {
	t.Helper()
	var b ErrorBody
	require.NoError(t, json.Unmarshal(r.body, &b), "body: %s", r.body)
	require.NotEmpty(t, b.Error.Code, "body: %s", r.body)
	require.NotEmpty(t, b.Error.Message, "body: %s", r.body)
	return b.Error
}

// do sends a request and checks the response against openapi.yaml. body may be
// nil, a string, []byte or a value to encode as JSON. hdr are header pairs.
func (e *testEnv) do(method, path, token string, body any, hdr ...string) response {
	e.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case nil:
	case string:
		raw = []byte(b)
	case []byte:
		raw = b
	default:
		var err error
		raw, err = json.Marshal(b)
		require.NoError(e.t, err)
	}
	req, err := http.NewRequest(method, e.http.URL+path, bytes.NewReader(raw))
	require.NoError(e.t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := e.http.Client().Do(req)
	require.NoError(e.t, err)
	defer res.Body.Close()
	out, err := io.ReadAll(res.Body)
	require.NoError(e.t, err)
	r := response{code: res.StatusCode, header: res.Header, body: out}
	if !e.allow500 && r.code != http.StatusServiceUnavailable {
		require.Less(e.t, r.code, 500, "%s %s -> %d %s", method, path, r.code, out)
	}
	req.Body = io.NopCloser(bytes.NewReader(raw))
	checkAgainstSpec(e.t, req, raw, r)
	return r
}

var (
	specOnce sync.Once
	specDoc  *openapi3.T
	specErr  error
)

// loadSpec parses and validates the embedded document once per test binary.
func loadSpec(t testing.TB) *openapi3.T {
	t.Helper()
	specOnce.Do(func() {
		loader := openapi3.NewLoader()
		specDoc, specErr = loader.LoadFromData(specYAML)
		if specErr == nil {
			specErr = specDoc.Validate(context.Background())
		}
	})
	require.NoError(t, specErr)
	return specDoc
}

// specRoute finds the operation of the spec that serves method and path.
func specRoute(doc *openapi3.T, method, path string) (*routers.Route, map[string]string) {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	for tmpl, item := range doc.Paths.Map() {
		ts := strings.Split(strings.Trim(tmpl, "/"), "/")
		if len(ts) != len(segs) {
			continue
		}
		params := map[string]string{}
		ok := true
		for i, s := range ts {
			switch {
			case strings.HasPrefix(s, "{"):
				params[strings.Trim(s, "{}")] = segs[i]
			case s != segs[i]:
				ok = false
			}
		}
		if !ok {
			continue
		}
		op := item.GetOperation(method)
		if op == nil {
			return nil, nil
		}
		return &routers.Route{Spec: doc, Path: tmpl, PathItem: item, Method: method, Operation: op}, params
	}
	return nil, nil
}

// checkAgainstSpec validates a response (and the request of a successful write)
// against the spec. Requests the spec has no operation for must get 404 or 405
// in the error shape.
func checkAgainstSpec(t *testing.T, req *http.Request, reqBody []byte, r response) {
	t.Helper()
	doc := loadSpec(t)
	route, params := specRoute(doc, req.Method, req.URL.Path)
	if route == nil {
		require.Contains(t, []int{http.StatusNotFound, http.StatusMethodNotAllowed}, r.code,
			"%s %s is not in the spec but answered %d", req.Method, req.URL.Path, r.code)
		var b ErrorBody
		require.NoError(t, json.Unmarshal(r.body, &b), "body: %s", r.body)
		require.NotEmpty(t, b.Error.Code)
		return
	}
	ctx := context.Background()
	in := &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: params,
		Route:      route,
		Options:    &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	stream := strings.HasPrefix(r.header.Get("Content-Type"), "text/event-stream")
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 r.code,
		Header:                 r.header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, ExcludeResponseBody: stream},
	}
	out.SetBodyBytes(r.body)
	require.NoError(t, openapi3filter.ValidateResponse(ctx, out), "%s %s -> %d %s", req.Method, req.URL.Path, r.code, r.body)
	if r.code < 300 && (req.Method == http.MethodPost || req.Method == http.MethodPut) {
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
		require.NoError(t, openapi3filter.ValidateRequest(ctx, in), "request the server accepted does not match the spec: %s", reqBody)
	}
}

// sseEvent is one parsed server-sent event.
type sseEvent struct {
	name, id string
	data     WatchEvent
	comment  bool
}

// openStream starts a GET on an event stream and parses what arrives.
func (e *testEnv) openStream(ctx context.Context, path, token string, hdr ...string) (<-chan sseEvent, *http.Response) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.http.URL+path, nil)
	require.NoError(e.t, err)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := e.http.Client().Do(req)
	require.NoError(e.t, err)
	if res.StatusCode != http.StatusOK {
		return nil, res
	}
	require.True(e.t, strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream"))
	return readSSE(e.t, res.Body), res
}

func readSSE(t *testing.T, body io.ReadCloser) <-chan sseEvent {
	ch := make(chan sseEvent, 64)
	go func() {
		defer close(ch)
		defer body.Close()
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		var cur sseEvent
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if cur.comment || cur.name != "" || len(data) > 0 {
					if len(data) > 0 {
						if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &cur.data); err != nil {
							t.Errorf("bad event data %q: %v", data, err)
						}
					}
					ch <- cur
				}
				cur, data = sseEvent{}, nil
			case strings.HasPrefix(line, ":"):
				cur.comment = true
			case strings.HasPrefix(line, "event:"):
				cur.name = strings.TrimSpace(strings.TrimPrefix(line, "event:"))
			case strings.HasPrefix(line, "id:"):
				cur.id = strings.TrimSpace(strings.TrimPrefix(line, "id:"))
			case strings.HasPrefix(line, "data:"):
				data = append(data, strings.TrimPrefix(line, "data:"))
			}
		}
	}()
	return ch
}

// next returns the next event that is not a comment nor the end of the
// snapshot (see nextEvent), failing after a timeout.
func next(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	for {
		if ev := nextEvent(t, ch); ev.name != WatchSynced {
			return ev
		}
	}
}

// nextEvent returns the next non-comment event, failing after a timeout.
func nextEvent(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev, ok := <-ch:
			require.True(t, ok, "stream ended")
			if ev.comment && ev.name == "" {
				continue
			}
			return ev
		case <-timeout:
			require.FailNow(t, "no event within 5s")
		}
	}
}

// minimal returns a valid minimal object of kind named name, as JSON-ready map.
func minimal(kind, name string) map[string]any {
	meta := map[string]any{"name": name}
	var spec map[string]any
	switch kind {
	case types.KindNode:
		spec = map[string]any{"apiAddress": "127.0.0.1:8080"}
	case types.KindProvider:
		spec = map[string]any{"driver": "test"}
	case types.KindEnvironment:
		spec = map[string]any{"provider": "test"}
	case types.KindMachineTemplate:
		spec = map[string]any{"resources": map[string]any{"cpu": 1, "ramGB": 2}, "providerConfiguration": map[string]any{"test": map[string]any{}}}
	case types.KindMachineSet:
		spec = map[string]any{"availabilityConfiguration": map[string]any{"type": "Pool"}, "machineTemplate": "small"}
	case types.KindMachine:
		spec = map[string]any{"machineTemplate": "small"}
	case types.KindMachineClaim:
		spec = map[string]any{"machineTemplate": "small", "user": "alice"}
	case types.KindScheduledEvent:
		spec = map[string]any{"startTime": "2030-01-01T10:00:00Z", "endTime": "2030-01-01T12:00:00Z"}
	case types.KindAccessCode:
		spec = map[string]any{"code": "let-me-in"}
	case types.KindSession:
		spec = map[string]any{"user": "alice"}
	case types.KindUser:
		spec = map[string]any{"roles": []string{RoleUser}}
	case types.KindToken:
		spec = map[string]any{"user": "alice", "role": RoleUser}
	default:
		panic("no minimal object for " + kind)
	}
	return map[string]any{"kind": kind, "metadata": meta, "spec": spec}
}

func path(kind string, name ...string) string {
	p := apiPrefix + "/" + types.Plural(kind)
	if len(name) > 0 {
		p += "/" + name[0]
	}
	return p
}
