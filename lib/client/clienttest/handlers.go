package clienttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"k8s.io/apimachinery/pkg/labels"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hf-fleet/hf/lib/types"
)

// auth checks the bearer token and records the request.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		if r.Body != nil {
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(http.MaxBytesReader(w, r.Body, 1<<20))
			body = buf.Bytes()
			r.Body = readCloser{bytes.NewReader(body)}
		}
		s.mu.Lock()
		s.requests = append(s.requests, Request{Method: r.Method, Host: r.Host, Path: r.URL.Path, Query: r.URL.RawQuery, IfMatch: r.Header.Get("If-Match"), Body: body})
		s.mu.Unlock()
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		switch {
		case !ok || (tok != Token && tok != ReadOnlyToken):
			writeError(w, http.StatusUnauthorized, "unauthorized", "missing or unknown bearer token", "")
		case tok == ReadOnlyToken && r.Method != http.MethodGet:
			writeError(w, http.StatusForbidden, "forbidden", "this token may only read", "")
		default:
			next.ServeHTTP(w, r)
		}
	})
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

func (s *Server) kind(w http.ResponseWriter, r *http.Request) (string, bool) {
	plural := r.PathValue("plural")
	for _, k := range types.Kinds() {
		if types.Plural(k) == plural {
			return k, true
		}
	}
	writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("unknown resource %q", plural), "")
	return "", false
}

func (s *Server) whoami(w http.ResponseWriter, r *http.Request) {
	role := "admin"
	if strings.HasSuffix(r.Header.Get("Authorization"), ReadOnlyToken) {
		role = "user"
	}
	writeJSON(w, http.StatusOK, map[string]string{"name": role, "role": role})
}

func (s *Server) list(w http.ResponseWriter, r *http.Request) {
	kind, ok := s.kind(w, r)
	if !ok {
		return
	}
	if r.URL.Query().Get("watch") == "true" {
		s.stream(w, r, map[string]bool{kind: true})
		return
	}
	sel, err := labels.Parse(r.URL.Query().Get("labelSelector"))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("bad label selector: %v", err), "labelSelector")
		return
	}
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit")) // 0: no limit
	after := r.URL.Query().Get("continue")
	s.mu.Lock()
	names := make([]string, 0, len(s.objects[kind]))
	for n := range s.objects[kind] {
		names = append(names, n)
	}
	sort.Strings(names)
	items := make([]json.RawMessage, 0, len(names))
	body := map[string]any{"kind": kind + "List"}
	last := ""
	for _, n := range names {
		if n <= after {
			continue
		}
		if limit > 0 && len(items) == limit {
			body["continue"] = last
			break
		}
		raw := s.objects[kind][n]
		if sel.Matches(labels.Set(mustDecode(kind, raw).Meta().Labels)) {
			items = append(items, raw)
			last = n
		}
	}
	s.mu.Unlock()
	body["items"] = items
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) get(w http.ResponseWriter, r *http.Request) {
	kind, ok := s.kind(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	s.mu.Lock()
	raw, found := s.objects[kind][name]
	s.mu.Unlock()
	if !found {
		writeNotFound(w, kind, name)
		return
	}
	writeRaw(w, http.StatusOK, raw)
}

// decodeBody reads a strict JSON document of kind and validates it.
func decodeBody(w http.ResponseWriter, r *http.Request, kind string) ([]byte, types.Object, bool) {
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(r.Body)
	var peek struct {
		Kind string `json:"kind"`
	}
	if err := json.Unmarshal(buf.Bytes(), &peek); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", "body is not a JSON object: "+err.Error(), "")
		return nil, nil, false
	}
	if peek.Kind != "" && peek.Kind != kind {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("body is a %s, not a %s", peek.Kind, kind), "kind")
		return nil, nil, false
	}
	obj, _ := types.New(kind)
	dec := json.NewDecoder(bytes.NewReader(buf.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(obj); err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error(), "")
		return nil, nil, false
	}
	if obj.GetKind() == "" {
		writeError(w, http.StatusBadRequest, "bad_request", "kind is empty", "kind")
		return nil, nil, false
	}
	types.Upgrade(obj)
	if err := obj.Validate(); err != nil {
		field := ""
		if fe, ok := err.(*types.FieldError); ok {
			field = fe.Field
		}
		writeError(w, http.StatusUnprocessableEntity, "invalid", err.Error(), field)
		return nil, nil, false
	}
	raw, _ := json.Marshal(obj)
	return raw, obj, true
}

func (s *Server) create(w http.ResponseWriter, r *http.Request) {
	kind, ok := s.kind(w, r)
	if !ok {
		return
	}
	raw, obj, ok := decodeBody(w, r, kind)
	if !ok {
		return
	}
	// Like the real server: the server owns versions, times and status, and a
	// new claim starts Requested.
	m := obj.Meta()
	m.Version, m.CreatedAt, m.UpdatedAt = types.Version{}, time.Time{}, time.Time{}
	if cl, ok := obj.(*types.MachineClaim); ok {
		cl.Status = types.MachineClaimStatus{Phase: types.ClaimRequested}
		cl.Status.PhaseTimes.Mark(string(types.ClaimRequested), time.Now())
	}
	raw, _ = json.Marshal(obj)
	name := m.Name
	s.mu.Lock()
	if _, exists := s.objects[kind][name]; exists {
		s.mu.Unlock()
		writeError(w, http.StatusConflict, "conflict", fmt.Sprintf("%s %q already exists", strings.ToLower(kind), name), "metadata.name")
		return
	}
	stored, out := s.store(kind, raw)
	hook := s.onCreate
	s.mu.Unlock()
	if hook != nil {
		go hook(stored)
	}
	if kind == types.KindToken {
		// Like the real server: the bearer is shown once, with the token.
		var o map[string]any
		if json.Unmarshal(out, &o) == nil {
			o["token"] = "bearer-of-" + name
			out, _ = json.Marshal(o)
		}
	}
	writeRaw(w, http.StatusCreated, out)
}

func (s *Server) update(w http.ResponseWriter, r *http.Request) {
	kind, ok := s.kind(w, r)
	if !ok {
		return
	}
	raw, obj, ok := decodeBody(w, r, kind)
	if !ok {
		return
	}
	name := r.PathValue("name")
	if obj.Meta().Name != name {
		writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("metadata.name %q does not match the path", obj.Meta().Name), "metadata.name")
		return
	}
	s.mu.Lock()
	old, exists := s.objects[kind][name]
	if !exists {
		s.mu.Unlock()
		writeNotFound(w, kind, name)
		return
	}
	if im := r.Header.Get("If-Match"); im != "" {
		if cur := mustDecode(kind, old).Meta().Version.String(); cur != im {
			s.mu.Unlock()
			writeError(w, http.StatusConflict, "conflict", fmt.Sprintf("%s %q changed: version is %s, not %s", strings.ToLower(kind), name, cur, im), "metadata.version")
			return
		}
	}
	raw = keepStatus(kind, raw, old)
	_, out := s.store(kind, raw)
	s.mu.Unlock()
	writeRaw(w, http.StatusOK, out)
}

// keepStatus copies the stored status into an update, as the real server does
// for every kind but AccessCode, whose status clients write.
func keepStatus(kind string, raw, stored []byte) []byte {
	if kind == types.KindAccessCode {
		return raw
	}
	var in, old map[string]json.RawMessage
	if json.Unmarshal(raw, &in) != nil || json.Unmarshal(stored, &old) != nil {
		return raw
	}
	if st, ok := old["status"]; ok {
		in["status"] = st
	} else {
		delete(in, "status")
	}
	out, err := json.Marshal(in)
	if err != nil {
		return raw
	}
	return out
}

func (s *Server) delete(w http.ResponseWriter, r *http.Request) {
	kind, ok := s.kind(w, r)
	if !ok {
		return
	}
	name := r.PathValue("name")
	s.mu.Lock()
	found := s.remove(kind, name)
	s.mu.Unlock()
	if !found {
		writeNotFound(w, kind, name)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) nodeAction(w http.ResponseWriter, r *http.Request) {
	name, action := r.PathValue("name"), r.PathValue("action")
	if action != "drain" && action != "undrain" {
		writeError(w, http.StatusNotFound, "not_found", "no route "+r.URL.Path, "")
		return
	}
	s.mu.Lock()
	raw, ok := s.objects[types.KindNode][name]
	if !ok {
		s.mu.Unlock()
		writeNotFound(w, types.KindNode, name)
		return
	}
	n := mustDecode(types.KindNode, raw).(*types.Node)
	n.Spec.Maintenance = action == "drain"
	n.Status.Phase = types.NodeUp
	if n.Spec.Maintenance {
		n.Status.Phase = types.NodeDraining
	}
	raw, _ = json.Marshal(n)
	_, out := s.store(types.KindNode, raw)
	s.mu.Unlock()
	writeRaw(w, http.StatusOK, out)
}

// keepalive stamps the session's keepalive annotation, as lib/openapi's does.
func (s *Server) keepalive(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, ok := s.objects[types.KindSession][name]
	if !ok {
		writeNotFound(w, types.KindSession, name)
		return
	}
	o := mustDecode(types.KindSession, raw).(*types.Session)
	if o.Metadata.Annotations == nil {
		o.Metadata.Annotations = map[string]string{}
	}
	o.Metadata.Annotations[types.AnnotationKeepalive] = time.Now().UTC().Format(time.RFC3339Nano)
	raw, _ = json.Marshal(o)
	_, out := s.store(types.KindSession, raw)
	writeRaw(w, http.StatusOK, out)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	raw, _ := json.Marshal(v)
	writeRaw(w, status, raw)
}

func writeRaw(w http.ResponseWriter, status int, raw []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(raw)
}

func writeError(w http.ResponseWriter, status int, code, msg, field string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": msg, "field": field}})
}

func writeNotFound(w http.ResponseWriter, kind, name string) {
	writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("%s %q not found", strings.ToLower(kind), name), "")
}
