package clienttest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/hf-fleet/hf/lib/types"
)

func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	var kinds map[string]bool
	if k := r.URL.Query().Get("kinds"); k != "" {
		kinds = map[string]bool{}
		for _, name := range strings.Split(k, ",") {
			if _, err := types.New(name); err != nil {
				writeError(w, http.StatusBadRequest, "bad_request", fmt.Sprintf("unknown kind %q", name), "kinds")
				return
			}
			kinds[name] = true
		}
	}
	s.stream(w, r, kinds)
}

// stream serves server-sent events of kinds (all when nil).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, kinds map[string]bool) {
	var since uint64
	if v := r.URL.Query().Get("since"); v != "" {
		if _, err := fmt.Sscan(v, &since); err != nil {
			writeError(w, http.StatusBadRequest, "bad_request", "since must be a number", "since")
			return
		}
	}
	match, err := watchSelector(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_request", err.Error(), "fieldSelector")
		return
	}
	s.mu.Lock()
	if s.watchDisabled {
		s.mu.Unlock()
		writeError(w, http.StatusNotFound, "not_found", "watch is disabled", "")
		return
	}
	// Like the real server: a resume point replays what happened after it;
	// without one the stream starts with every current object.
	var backlog []Event
	if since > 0 {
		for _, ev := range s.log {
			if ev.Seq > since {
				backlog = append(backlog, ev)
			}
		}
	} else {
		backlog = s.current()
	}
	ch := make(chan Event, 256)
	id := s.nextWatcher
	s.nextWatcher++
	s.watchers[id] = ch
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if c, ok := s.watchers[id]; ok && c == ch {
			delete(s.watchers, id)
		}
		s.mu.Unlock()
	}()

	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	_, _ = fmt.Fprint(w, ": ok\n\n")
	send := func(ev Event) bool {
		if kinds != nil && !kinds[ev.Kind] {
			return true
		}
		if ev.Type == "put" && !match(ev) {
			return true
		}
		data, _ := json.Marshal(ev)
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev.Type, data); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	if flusher != nil {
		flusher.Flush()
	}
	for _, ev := range backlog {
		if !send(ev) {
			return
		}
	}
	for {
		select {
		case ev, ok := <-ch:
			if !ok {
				return
			}
			if !send(ev) {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		}
	}
}

// watchSelector reads a stream's labelSelector and fieldSelector, as the real
// server applies them to puts; the fake knows the fields metadata.name and
// status.phase.
func watchSelector(r *http.Request) (func(Event) bool, error) {
	ls, err := labels.Parse(r.URL.Query().Get("labelSelector"))
	if err != nil {
		return nil, fmt.Errorf("bad label selector: %w", err)
	}
	fs, err := fields.ParseSelector(r.URL.Query().Get("fieldSelector"))
	if err != nil {
		return nil, fmt.Errorf("bad field selector: %w", err)
	}
	return func(ev Event) bool {
		if ls.Empty() && fs.Empty() {
			return true
		}
		var o struct {
			Metadata struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Status struct {
				Phase string `json:"phase"`
			} `json:"status"`
		}
		if json.Unmarshal(ev.Object, &o) != nil {
			return false
		}
		return ls.Matches(labels.Set(o.Metadata.Labels)) &&
			fs.Matches(fields.Set{"metadata.name": o.Metadata.Name, "status.phase": o.Status.Phase})
	}, nil
}
