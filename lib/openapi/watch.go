package openapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-contrib/sse"
	"github.com/gin-gonic/gin"
	fastjson "github.com/goccy/go-json"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// WatchEvent is the data of one server-sent event.
type WatchEvent struct {
	// Type is "put", "delete" or "resync" (also the SSE event name).
	Type string `json:"type"`
	Kind string `json:"kind,omitempty"`
	Name string `json:"name,omitempty"`
	// Seq is the store sequence of the change on the node that sent it; 0
	// for resync and synced. A Node sent again because the sending node's
	// view of it moved (see watchnodes.go) carries its record's Seq and
	// Version again.
	Seq uint64 `json:"seq"`
	// Version is the record's version after the change ("hlc@node", also the
	// SSE id): the same on every node for the same change.
	Version string `json:"version,omitempty"`
	// Object is the object after a put.
	Object json.RawMessage `json:"object,omitempty"`
}

// Watch event types.
const (
	WatchPut    = "put"
	WatchDelete = "delete"
	WatchResync = "resync"
	// WatchSynced ends the snapshot a stream starts with: every current
	// object (or every change since the resume point) has been sent.
	WatchSynced = "synced"
)

// DefaultResumeWindow is how far before a Last-Event-ID version a resumed
// stream replays (Config.ResumeWindow).
const DefaultResumeWindow = time.Minute

// streamRetry is the reconnect delay a stream asks EventSource for.
const streamRetry = 2 * time.Second

func (s *Server) watchEvents(c *gin.Context) {
	p := principal(c)
	var kinds []string
	if q := c.Query("kinds"); strings.TrimSpace(q) != "" {
		for part := range strings.SplitSeq(q, ",") {
			kind, ok := types.KindForPlural(strings.TrimSpace(part))
			if !ok {
				s.writeErr(c, badRequest("kinds", "unknown kind %q; kinds are %s", part, strings.Join(types.Kinds(), ", ")))
				return
			}
			if !canRead(p, kind) {
				s.writeErr(c, forbidden("kinds", "role %s may not read %s", p.Role, types.Plural(kind)))
				return
			}
			if !slices.Contains(kinds, kind) {
				kinds = append(kinds, kind)
			}
		}
	} else {
		for _, kind := range types.Kinds() {
			if canRead(p, kind) {
				kinds = append(kinds, kind)
			}
		}
	}
	sel, err := parseSelectors(c.Query("labelSelector"), c.Query("fieldSelector"), kinds)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	s.stream(c, p, kinds, sel)
}

// resumePoint is where a stream resumes: after a sequence of this node's
// store (?since=, or a Last-Event-ID of an earlier hf), or after a record
// version (a Last-Event-ID this hf sent), which means the same on every node.
type resumePoint struct {
	seq     uint64
	version types.Version
}

func (r resumePoint) isZero() bool { return r.seq == 0 && r.version.IsZero() }

// watchFrom reads the resume point: ?since= or the Last-Event-ID header.
func watchFrom(c *gin.Context) (resumePoint, error) {
	field, v := "since", strings.TrimSpace(c.Query("since"))
	if v == "" {
		field, v = "Last-Event-ID", strings.TrimSpace(c.GetHeader("Last-Event-ID"))
	}
	if v == "" {
		return resumePoint{}, nil
	}
	if field == "Last-Event-ID" && strings.Contains(v, "@") {
		ver, err := types.ParseVersion(v)
		if err != nil {
			return resumePoint{}, badRequest(field, "want a version hlc@node or a sequence number, got %q", v)
		}
		return resumePoint{version: ver}, nil
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		if field == "Last-Event-ID" {
			return resumePoint{}, badRequest(field, "want a version hlc@node (an event's id) or a sequence number, got %q", v)
		}
		return resumePoint{}, badRequest(field, "want a sequence number, got %q", v)
	}
	return resumePoint{seq: n}, nil
}

// stream serves kinds' changes as server-sent events until the client goes away,
// the server shuts down or the store closes. Without a resume point it starts
// with every current object (and recent deletions), from the store's replay;
// every stream sends a synced event when its snapshot is done.
//
// Event ids are record versions, so a client resumes through any node.
// Versions do not arrive in order (a change made elsewhere reaches each
// node after a delay), so "everything after version v" would miss a change
// older than v that had not reached the first node yet. A resumed stream
// therefore replays every record whose version is newer than v less
// ResumeWindow, which covers any replication delay shorter than the
// window; it may repeat changes the client has, which carry the same
// version and replace equal objects. What it can miss is a change the
// client had not seen that was made more than the window before v and
// reached the first node only after the client left (across a partition);
// a stream without a resume point (or after a resync) has it. Resuming by
// version replays from the start of the store, so a resume costs a scan.
func (s *Server) stream(c *gin.Context, p Principal, kinds []string, sel selector) {
	from, err := watchFrom(c)
	if err != nil {
		s.writeErr(c, err)
		return
	}
	f := &streamFilter{p: p, sight: s.sight(p), kinds: map[string]bool{}, st: s.st}
	if !sel.empty() {
		f.sel, f.matched = sel, map[string]bool{}
	}
	for _, k := range kinds {
		f.kinds[k] = true
	}
	if f.kinds[types.KindNode] && s.cfg.NodeView != nil {
		f.view, f.nodes = s.withView, map[string]sentNode{}
	}
	resync, since, after := false, from.seq, uint64(0)
	switch {
	case (f.tracksOwners() || f.filters()) && !from.isZero():
		// Deletions carry no object, so whose they were is known only for objects
		// this stream has seen. A resumed stream cannot tell for older ones: ask
		// the client to list again and go on from now.
		since, resync = s.st.Seq(), true
	case !from.version.IsZero():
		since = 0
		after = store.HLCFromTime(store.HLCTime(from.version.HLC).Add(-s.cfg.ResumeWindow))
	}
	// A stream that starts with the whole snapshot learns the user's objects
	// from it (apply marks each one it sends as known); only one that starts
	// later in the log reads them first. (Each user's stream read and decoded
	// every claim, session and machine of the store here, then again in the
	// replay.)
	if f.tracksOwners() {
		f.known = map[string]bool{}
	}
	// Armed before the first view is read: a change after it wakes the
	// stream.
	var viewChanged <-chan struct{}
	if f.nodes != nil && s.cfg.NodeViewChanged != nil {
		viewChanged = s.cfg.NodeViewChanged()
	}
	if since > 0 || after > 0 {
		if err := f.seed(s.st); err != nil {
			s.writeErr(c, err)
			return
		}
		if err := f.seedNodes(s.st, resync, s.log.Warn); err != nil {
			s.writeErr(c, err)
			return
		}
	}

	if !s.takeStream(p.Name) {
		s.writeErr(c, newErr(http.StatusTooManyRequests, CodeTooMany, "", "token %s holds %d event streams open on node %s, the most it may; close one first",
			p.Name, s.cfg.MaxStreamsPerToken, s.cfg.NodeName))
		return
	}
	defer s.giveStream(p.Name)

	ctx, cancel := context.WithCancel(c.Request.Context())
	defer cancel()
	// The replay reads only the kinds the stream sends (and claims, which
	// tell a user's stream whose machines are hers), and a stream with no
	// resume point no tombstones: it sends no deletion of an object it never
	// sent.
	replay := store.ReplayFilter{Kinds: map[string]bool{}, Live: from.isZero()}
	for k := range f.kinds {
		replay.Kinds[k] = true
	}
	if f.tracksOwners() {
		replay.Kinds[types.KindMachineClaim] = true
	}
	events := s.st.WatchSnapshotOf(ctx, since, replay)

	s.streams.Add(1)
	s.metrics.streams.Inc()
	defer func() {
		s.streams.Add(-1)
		s.metrics.streams.Dec()
	}()

	h := c.Writer.Header()
	h.Set("Content-Type", sse.ContentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	c.Writer.WriteHeaderNow()
	if s.write(c, func() error {
		_, err := io.WriteString(c.Writer, "retry: "+strconv.FormatInt(streamRetry.Milliseconds(), 10)+"\n\n")
		return err
	}) != nil {
		return
	}
	if resync {
		if s.send(c, WatchEvent{Type: WatchResync}) != nil {
			return
		}
	}

	// The token is checked again when a token or user changes and at each
	// heartbeat (expiry): a stream ends with its token's revocation, its
	// user's disabling or a change of its rights, as new requests do.
	token := c.GetString(tokenKey)
	authorized := func() bool {
		if token == "" {
			return true
		}
		if now, err := s.auth.lookup(token); err != nil || now != p {
			s.log.Info("event stream closed: its token no longer holds", "token", p.Name, "user", p.User)
			return false
		}
		return true
	}

	heartbeat := time.NewTicker(s.cfg.Heartbeat)
	defer heartbeat.Stop()
	// unflushed: an event was written for a flush with the next one, and
	// the ones after it may all be filtered out: flush once none wait.
	unflushed := false
	sendAll := func(outs []WatchEvent) error {
		for i, out := range outs {
			// While more events wait, they share one flush (one TLS
			// record, one syscall): a burst costs a flush per batch,
			// not per event; the last of it is flushed at once.
			more := len(events) > 0 || i < len(outs)-1
			if err := s.sendBatched(c, out, more); err != nil {
				return err
			}
			unflushed = more
		}
		return nil
	}
	for {
		if unflushed && len(events) == 0 {
			if s.write(c, func() error { return nil }) != nil {
				return
			}
			unflushed = false
		}
		select {
		case <-ctx.Done():
			return
		case <-s.stop:
			return
		case <-heartbeat.C:
			if !authorized() {
				return
			}
			if s.write(c, func() error {
				_, err := io.WriteString(c.Writer, ": heartbeat\n\n")
				return err
			}) != nil {
				return
			}
		case <-viewChanged:
			viewChanged = s.cfg.NodeViewChanged()
			if sendAll(f.viewChanged(s.log.Warn)) != nil {
				return // the client does not read: drop it
			}
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.Type == store.EventSynced {
				after = 0 // the replay is over: every live change is news
			}
			if k := ev.Record.Kind; (k == types.KindToken || k == types.KindUser || ev.Type == store.EventResync) && !authorized() {
				return
			}
			if after > 0 && ev.Type != store.EventResync && ev.Record.Version.HLC <= after {
				continue // the client had it before it went away
			}
			if ev.Type == store.EventResync {
				if err := f.seed(s.st); err != nil {
					s.log.Warn("watch: reseed after resync", "err", err)
					return
				}
				if err := f.seedNodes(s.st, true, s.log.Warn); err != nil {
					s.log.Warn("watch: reseed after resync", "err", err)
					return
				}
			}
			outs := f.events(ev, s.log.Warn)
			if ev.Type == store.EventSynced {
				// The Nodes a resumed stream's replay did not send, and
				// any view that moved during the replay, belong to the
				// snapshot.
				outs = append(f.viewChanged(s.log.Warn), outs...)
			}
			if sendAll(outs) != nil {
				return // the client does not read: drop it
			}
		}
	}
}

// send writes one event and flushes it; an error ends the stream.
func (s *Server) send(c *gin.Context, ev WatchEvent) error { return s.sendBatched(c, ev, false) }

// sendBatched writes one event, and flushes unless more follows at once
// (the response's buffer still goes out whenever it fills).
func (s *Server) sendBatched(c *gin.Context, ev WatchEvent, more bool) error {
	data, err := fastjson.Marshal(ev) // the same bytes as encoding/json's, in a ninth of the time
	if err != nil {
		s.log.Error("watch: encode event", "kind", ev.Kind, "name", ev.Name, "err", err)
		return nil
	}
	return s.writeMore(c, func() error { return sse.Encode(c.Writer, sse.Event{Event: ev.Type, Id: ev.Version, Data: data}) }, more)
}

// write runs fn, a write to a stream, and flushes, within
// StreamWriteTimeout: a client that stops reading fails the write instead
// of holding the stream (and what it buffers) for ever.
func (s *Server) write(c *gin.Context, fn func() error) error { return s.writeMore(c, fn, false) }

// writeMore is write that leaves the flush to a later write when more.
func (s *Server) writeMore(c *gin.Context, fn func() error, more bool) error {
	_ = conn(c.Request, c.Writer).SetWriteDeadline(time.Now().Add(s.cfg.StreamWriteTimeout))
	if err := fn(); err != nil || more {
		return err
	}
	return http.NewResponseController(c.Writer).Flush()
}

// takeStream counts a stream of token in, unless it holds its most.
func (s *Server) takeStream(token string) bool {
	s.streamsMu.Lock()
	defer s.streamsMu.Unlock()
	if s.tokenStreams == nil {
		s.tokenStreams = map[string]int{}
	}
	if s.tokenStreams[token] >= s.cfg.MaxStreamsPerToken {
		return false
	}
	s.tokenStreams[token]++
	return true
}

// giveStream counts a stream of token out.
func (s *Server) giveStream(token string) {
	s.streamsMu.Lock()
	defer s.streamsMu.Unlock()
	if s.tokenStreams[token]--; s.tokenStreams[token] <= 0 {
		delete(s.tokenStreams, token)
	}
}

// streamFilter decides which store events a stream forwards: only its kinds,
// and for role user only its own claims and sessions. known holds the owned
// objects of the user the stream has seen, since a deletion carries no spec.user.
type streamFilter struct {
	p     Principal
	sight *sight
	kinds map[string]bool
	known map[string]bool // kind/name
	// sel, when set, is the stream's label and field selector; matched are
	// the objects it has sent that matched it (one that stops matching is
	// sent as deleted, as Kubernetes' watch does).
	sel     selector
	matched map[string]bool
	// st, when set, is read for a machine that a claim of the user's comes
	// to name (see events); revealed holds the sequence of the record sent
	// so, and the stream skips that machine's older events still queued.
	st       *store.Store
	revealed map[string]uint64
	// view, when set, adds this node's view to a Node (Server.withView);
	// nodes are then the Nodes the stream sent, with the view each went
	// with (see watchnodes.go).
	view  func(*types.Node) *types.Node
	nodes map[string]sentNode
}

// events maps a store event to what the stream sends: apply's event, and
// when it is a claim of the user's that now names a machine the stream has
// not sent, that machine as it is now. The machine's own events came
// before its claim named it, while it was not the user's to see, so
// without this a user's stream never showed the machine of a claim they
// had just made (until the machine changed again).
func (f *streamFilter) events(ev store.Event, warn func(string, ...any)) []WatchEvent {
	var out []WatchEvent
	if e, ok := f.apply(ev, warn); ok {
		out = append(out, e)
	}
	rec := ev.Record
	if f.st == nil || ev.Type != store.EventPut || rec.Kind != types.KindMachineClaim ||
		!f.tracksOwners() || !f.kinds[types.KindMachine] {
		return out
	}
	obj, err := ev.View()
	if err != nil {
		return out
	}
	c, ok := obj.(*types.MachineClaim)
	if !ok || c.Spec.User != f.p.User || c.Status.Machine == "" || f.known[types.KindMachine+"/"+c.Status.Machine] {
		return out
	}
	mrec, err := f.st.Get(types.KindMachine, c.Status.Machine)
	if err != nil {
		return out
	}
	if e, ok := f.apply(store.Event{Type: store.EventPut, Record: mrec}, warn); ok {
		if f.revealed == nil {
			f.revealed = map[string]uint64{}
		}
		f.revealed[c.Status.Machine] = mrec.Seq
		out = append(out, e)
	}
	return out
}

// filters reports whether the stream has a selector.
func (f *streamFilter) filters() bool { return f.matched != nil }

// tracksOwners reports whether the filter must know whose objects are deleted.
func (f *streamFilter) tracksOwners() bool {
	if f.p.Staff() {
		return false
	}
	return f.kinds[types.KindMachineClaim] || f.kinds[types.KindSession] || f.kinds[types.KindMachine]
}

// seed (re)loads the user's owned objects, and their machines: a stream
// seeds when it starts later in the log and after a resync, having missed
// changes of the user's claims that the sight follows.
func (f *streamFilter) seed(st *store.Store) error {
	if !f.tracksOwners() {
		return nil
	}
	f.sight.forget()
	f.known = map[string]bool{}
	for _, kind := range []string{types.KindMachineClaim, types.KindSession, types.KindMachine} {
		if !f.kinds[kind] {
			continue
		}
		err := st.Each(kind, func(rec store.Record) error {
			if obj, err := store.Decode(rec); err == nil && f.sight.sees(obj) {
				f.known[kind+"/"+rec.Name] = true
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// apply maps a store event to what the stream sends, if anything.
func (f *streamFilter) apply(ev store.Event, warn func(string, ...any)) (WatchEvent, bool) {
	rec := ev.Record
	switch ev.Type {
	case store.EventResync:
		return WatchEvent{Type: WatchResync}, true
	case store.EventSynced:
		return WatchEvent{Type: WatchSynced}, true
	}
	if rec.Kind == types.KindMachineClaim && f.tracksOwners() && f.sight.loaded() {
		// The user's machines change with their claims, whether or not the
		// stream sends claims. (It used to forget them at every claim and
		// list every claim again at the next machine: a user's stream on a
		// node of 40,000 claims did not finish its snapshot in a minute.)
		var c *types.MachineClaim
		if ev.Type == store.EventPut {
			if obj, err := ev.View(); err == nil {
				c, _ = obj.(*types.MachineClaim)
			}
		}
		f.sight.claimChanged(rec.Name, c)
	}
	if !f.kinds[rec.Kind] {
		return WatchEvent{}, false
	}
	if seq, ok := f.revealed[rec.Name]; ok && rec.Kind == types.KindMachine {
		if rec.Seq <= seq {
			return WatchEvent{}, false // sent already, or something newer was
		}
		delete(f.revealed, rec.Name)
	}
	if f.stale(rec) {
		return WatchEvent{}, false // sent already, or something newer was
	}
	out := WatchEvent{Kind: rec.Kind, Name: rec.Name, Seq: rec.Seq, Version: rec.Version.String()}
	owned := f.tracksOwners() && privateKind(rec.Kind)
	key := rec.Kind + "/" + rec.Name
	switch ev.Type {
	case store.EventPut:
		var obj types.Object
		if owned {
			var err error
			obj, err = ev.View()
			if err != nil {
				warn("watch: undecodable record", "kind", rec.Kind, "name", rec.Name, "err", err)
				return WatchEvent{}, false
			}
			if !f.sight.sees(obj) {
				// It was the user's and is not any more: to them it is gone.
				if f.known[key] {
					delete(f.known, key)
					out.Type = WatchDelete
					return out, true
				}
				return WatchEvent{}, false
			}
			f.known[key] = true
		}
		if f.filters() {
			if obj == nil {
				var err error
				if obj, err = ev.View(); err != nil {
					warn("watch: undecodable record", "kind", rec.Kind, "name", rec.Name, "err", err)
					return WatchEvent{}, false
				}
			}
			if !f.sel.matches(obj) {
				if f.matched[key] {
					delete(f.matched, key)
					if rec.Kind == types.KindNode {
						delete(f.nodes, rec.Name)
					}
					out.Type = WatchDelete
					return out, true
				}
				return WatchEvent{}, false
			}
			f.matched[key] = true
		}
		if rec.Kind == types.KindNode && f.nodes != nil {
			if obj == nil {
				var err error
				if obj, err = ev.View(); err != nil {
					warn("watch: undecodable record", "kind", rec.Kind, "name", rec.Name, "err", err)
					return WatchEvent{}, false
				}
			}
			if n, ok := obj.(*types.Node); ok {
				out, err := f.putNode(n, f.view(n), rec.Seq, rec.Version)
				if err != nil {
					warn("watch: unassembled record", "kind", rec.Kind, "name", rec.Name, "err", err)
					return WatchEvent{}, false
				}
				return out, true
			}
		}
		data, err := present(f.p, rec, obj)
		if err != nil {
			warn("watch: unassembled record", "kind", rec.Kind, "name", rec.Name, "err", err)
			return WatchEvent{}, false
		}
		out.Type, out.Object = WatchPut, data
		return out, true
	case store.EventDelete:
		if owned {
			if !f.known[key] {
				return WatchEvent{}, false
			}
			delete(f.known, key)
		}
		if f.filters() {
			if !f.matched[key] {
				return WatchEvent{}, false
			}
			delete(f.matched, key)
		}
		if rec.Kind == types.KindNode {
			delete(f.nodes, rec.Name)
		}
		out.Type = WatchDelete
		return out, true
	}
	return WatchEvent{}, false
}
