// Package clienttest is an in-memory fake of hf's REST API for tests of API
// clients (lib/client, hf-cli): objects of every kind with versions and
// If-Match, label selectors, the error body, bearer-token auth, server-sent
// watch events with sequence numbers (a watch without ?since starts with every
// current object, as lib/openapi's does), node drain, session keepalive and
// machine shells.
// Like the real server it owns versions, times and status: a created claim is
// Requested and an update keeps the stored status. Tests drive the "cluster"
// side through Put, Remove and OnCreate.
package clienttest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// Tokens the fake accepts.
const (
	// Token is the admin token: everything is allowed.
	Token = "test-admin-token"
	// ReadOnlyToken may read; every write answers 403 forbidden.
	ReadOnlyToken = "test-read-only-token"
)

// Request is what the fake recorded of one API request.
type Request struct {
	Method string
	// Host is the Host header: which of the server's names was used.
	Host  string
	Path  string
	Query string
	// IfMatch is the If-Match header.
	IfMatch string
	Body    []byte
}

// Event is one change as the fake streams it.
type Event struct {
	Type   string          `json:"type"`
	Kind   string          `json:"kind"`
	Name   string          `json:"name"`
	Seq    uint64          `json:"seq"`
	Object json.RawMessage `json:"object,omitempty"`
}

// Server is a running fake API on 127.0.0.1. It is closed by t.Cleanup.
type Server struct {
	// URL is the base URL ("http://127.0.0.1:port").
	URL string

	srv  *httptest.Server
	stop chan struct{}

	mu            sync.Mutex
	objects       map[string]map[string][]byte // kind -> name -> JSON
	hlc           uint64
	seq           uint64
	log           []Event
	watchers      map[int]chan Event
	nextWatcher   int
	requests      []Request
	onCreate      func(types.Object)
	watchDisabled bool
	onShell       ShellFunc
	rawShellsOnly bool
}

// New starts a fake API server and registers its shutdown with t.Cleanup.
func New(t testing.TB) *Server {
	t.Helper()
	s := &Server{
		stop:     make(chan struct{}),
		objects:  map[string]map[string][]byte{},
		watchers: map[int]chan Event{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.requests = append(s.requests, Request{Method: r.Method, Host: r.Host, Path: r.URL.Path})
		s.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
	})
	api := http.NewServeMux()
	api.HandleFunc("GET /api/v1/whoami", s.whoami)
	api.HandleFunc("GET /api/v1/events", s.events)
	api.HandleFunc("GET /api/v1/{plural}", s.list)
	api.HandleFunc("POST /api/v1/{plural}", s.create)
	api.HandleFunc("GET /api/v1/{plural}/{name}", s.get)
	api.HandleFunc("PUT /api/v1/{plural}/{name}", s.update)
	api.HandleFunc("DELETE /api/v1/{plural}/{name}", s.delete)
	api.HandleFunc("POST /api/v1/nodes/{name}/{action}", s.nodeAction)
	api.HandleFunc("POST /api/v1/sessions/{name}/keepalive", s.keepalive)
	api.HandleFunc("GET /api/v1/machines/{name}/shell", s.shell)
	api.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "not_found", "no route "+r.Method+" "+r.URL.Path, "")
	})
	mux.Handle("/api/", s.auth(api))
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

// Close ends every watch stream and stops the server. It is safe to call twice.
func (s *Server) Close() {
	s.mu.Lock()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	s.mu.Unlock()
	s.srv.Close()
}

// OnCreate registers fn to run (in its own goroutine) after every successful
// create through the API, with the stored object: tests use it to play the
// cluster, e.g. to bind a claim.
func (s *Server) OnCreate(fn func(types.Object)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onCreate = fn
}

// DisableWatch makes the events endpoint answer 404, as a server without
// streaming would.
func (s *Server) DisableWatch(disabled bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.watchDisabled = disabled
}

// Watchers returns how many watch streams are open.
func (s *Server) Watchers() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.watchers)
}

// CloseWatches ends every open watch stream, as a restarting server would.
func (s *Server) CloseWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ch := range s.watchers {
		close(ch)
		delete(s.watchers, id)
	}
}

// Requests returns the requests received so far: the API's and /healthz.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Put stores obj as the cluster would (no validation, no preconditions), stamps
// its metadata and streams a put event. It returns the stored object.
func (s *Server) Put(obj types.Object) types.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, err := json.Marshal(obj)
	if err != nil {
		panic(fmt.Sprintf("clienttest: marshal %T: %v", obj, err))
	}
	stored, _ := s.store(obj.GetKind(), raw)
	return stored
}

// Object returns a copy of the stored object kind/name.
func (s *Server) Object(kind, name string) (types.Object, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, ok := s.objects[kind][name]
	if !ok {
		return nil, false
	}
	return mustDecode(kind, raw), true
}

// Objects returns copies of every stored object of kind, in name order.
func (s *Server) Objects(kind string) []types.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := make([]string, 0, len(s.objects[kind]))
	for n := range s.objects[kind] {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]types.Object, 0, len(names))
	for _, n := range names {
		out = append(out, mustDecode(kind, s.objects[kind][n]))
	}
	return out
}

// Remove deletes kind/name as the cluster would and streams a delete event.
func (s *Server) Remove(kind, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.remove(kind, name)
}

// store writes raw as kind under s.mu, stamping metadata; createdAt is kept
// from an existing object.
func (s *Server) store(kind string, raw []byte) (types.Object, []byte) {
	obj := mustDecode(kind, raw)
	m := obj.Meta()
	now := time.Now().UTC()
	if old, ok := s.objects[kind][m.Name]; ok {
		m.CreatedAt = mustDecode(kind, old).Meta().CreatedAt
	} else if m.CreatedAt.IsZero() {
		m.CreatedAt = now
	}
	m.UpdatedAt = now
	s.hlc++
	m.Version = types.Version{HLC: s.hlc, Node: "fake"}
	out, err := json.Marshal(obj)
	if err != nil {
		panic(fmt.Sprintf("clienttest: marshal %s: %v", kind, err))
	}
	if s.objects[kind] == nil {
		s.objects[kind] = map[string][]byte{}
	}
	s.objects[kind][m.Name] = out
	s.emit(Event{Type: "put", Kind: kind, Name: m.Name, Object: out})
	return obj, out
}

// remove deletes kind/name under s.mu.
func (s *Server) remove(kind, name string) bool {
	raw, ok := s.objects[kind][name]
	if !ok {
		return false
	}
	delete(s.objects[kind], name)
	s.emit(Event{Type: "delete", Kind: kind, Name: name, Object: raw})
	return true
}

// emit numbers ev, logs it and hands it to every watcher under s.mu. A watcher
// that cannot keep up is dropped: its stream ends.
func (s *Server) emit(ev Event) {
	s.seq++
	ev.Seq = s.seq
	s.log = append(s.log, ev)
	for id, ch := range s.watchers {
		select {
		case ch <- ev:
		default:
			close(ch)
			delete(s.watchers, id)
		}
	}
}

// current returns a put event for every stored object, in sequence order,
// under s.mu.
func (s *Server) current() []Event {
	latest := map[string]Event{}
	for _, ev := range s.log {
		latest[ev.Kind+"/"+ev.Name] = ev
	}
	var out []Event
	for _, ev := range latest {
		if _, ok := s.objects[ev.Kind][ev.Name]; ok && ev.Type == "put" {
			out = append(out, ev)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out
}

func mustDecode(kind string, raw []byte) types.Object {
	obj, err := types.New(kind)
	if err != nil {
		panic(fmt.Sprintf("clienttest: %v", err))
	}
	if err := json.Unmarshal(raw, obj); err != nil {
		panic(fmt.Sprintf("clienttest: decode %s: %v", kind, err))
	}
	types.Upgrade(obj)
	return obj
}
