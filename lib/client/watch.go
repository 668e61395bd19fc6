package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	fastjson "github.com/goccy/go-json"

	"github.com/hf-fleet/hf/lib/types"
)

// Watch event types.
const (
	// EventPut is a create or update; Object is the new object.
	EventPut = "put"
	// EventDelete is a delete; Object is the last state when the server sends it.
	EventDelete = "delete"
	// EventResync means the server dropped events for this watcher: list again.
	EventResync = "resync"
	// EventSynced ends the snapshot a stream starts with (every current
	// object, or every change since the resume point); live changes follow.
	EventSynced = "synced"
	// EventError is the last event of a stream that broke or was closed by the
	// server (not sent when the caller's ctx ended); Err says why.
	EventError = "error"
)

// ErrStreamClosed is the Err of the EventError sent when the server ends a
// watch stream.
var ErrStreamClosed = errors.New("watch stream closed by server")

// WatchEvent is one change reported by Watch.
type WatchEvent struct {
	// Type is EventPut, EventDelete, EventResync or EventError.
	Type string
	Kind string
	Name string
	// Seq is the server's sequence number of the change; pass the last one seen
	// as Watch's since to resume.
	Seq    uint64
	Object types.Object
	// Err is set on EventError.
	Err error
}

// Watch streams changes to objects of kinds (every kind when empty) that
// happen after the server's sequence number since, read from the server-sent
// events of GET /api/v1/events. The request is made before Watch returns, so an
// error response (bad token, unknown kind) is returned as an error. The channel
// is closed when ctx ends or the stream ends; a stream that ends for any other
// reason than ctx delivers one EventError first.
func (c *Client) Watch(ctx context.Context, kinds []string, since uint64) (<-chan WatchEvent, error) {
	return c.WatchWith(ctx, WatchOptions{Kinds: kinds, Since: since})
}

// WatchOptions narrow a watch stream.
type WatchOptions struct {
	// Kinds are the kinds to watch (every kind the token may read when empty).
	Kinds []string
	// Since resumes after this server sequence number (0: from now, with a
	// snapshot of every current object first).
	Since uint64
	// LabelSelector and FieldSelector (Kubernetes' syntax) are applied by the
	// server: only matching objects are sent, and one that stops matching is
	// sent as a delete.
	LabelSelector, FieldSelector string
}

// WatchWith is Watch with selectors the server applies, so a client that
// waits for a few objects is not sent (and does not decode) every change of
// the kind.
func (c *Client) WatchWith(ctx context.Context, opts WatchOptions) (<-chan WatchEvent, error) {
	kinds, since := opts.Kinds, opts.Since
	q := url.Values{}
	if len(kinds) > 0 {
		norm := make([]string, 0, len(kinds))
		for _, k := range kinds {
			nk, err := NormalizeKind(k)
			if err != nil {
				return nil, err
			}
			norm = append(norm, nk)
		}
		q.Set("kinds", strings.Join(norm, ","))
	}
	if since > 0 {
		q.Set("since", strconv.FormatUint(since, 10))
	}
	if opts.LabelSelector != "" {
		q.Set("labelSelector", opts.LabelSelector)
	}
	if opts.FieldSelector != "" {
		q.Set("fieldSelector", opts.FieldSelector)
	}
	resp, err := c.send(ctx, request{method: http.MethodGet, path: "/api/v1/events", query: q, accept: "text/event-stream"})
	if err != nil {
		return nil, err
	}
	if ct := resp.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "text/event-stream") {
		resp.Body.Close()
		return nil, fmt.Errorf("watch: server answered %q, not an event stream", ct)
	}
	ch := make(chan WatchEvent, 16)
	go func() {
		defer close(ch)
		defer resp.Body.Close()
		err := readEvents(resp.Body, func(ev WatchEvent) bool {
			select {
			case ch <- ev:
				return true
			case <-ctx.Done():
				return false
			}
		})
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = ErrStreamClosed
		}
		select {
		case ch <- WatchEvent{Type: EventError, Err: err}:
		case <-ctx.Done():
		}
	}()
	return ch, nil
}

// sseData is the JSON in an event's data field.
type sseData struct {
	Type   string          `json:"type"`
	Kind   string          `json:"kind"`
	Name   string          `json:"name"`
	Seq    uint64          `json:"seq"`
	Object json.RawMessage `json:"object"`
}

// readEvents parses a server-sent event stream and hands each event to emit
// until emit returns false (nil error) or the stream ends (nil at EOF). Lines
// starting with ':' are comments (keep-alives); "id" and "retry" are ignored.
func readEvents(r io.Reader, emit func(WatchEvent) bool) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var event string
	var data strings.Builder
	hasData := false
	for {
		line, err := br.ReadString('\n')
		if err != nil && !(errors.Is(err, io.EOF) && line != "") {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("watch: read stream: %w", err)
		}
		line = strings.TrimRight(line, "\r\n")
		if line == "" {
			if hasData {
				ev, perr := parseEvent(event, data.String())
				if perr != nil {
					return perr
				}
				if !emit(ev) {
					return nil
				}
			}
			event, hasData = "", false
			data.Reset()
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			event = value
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.WriteString(value)
			hasData = true
		}
	}
}

// parseEvent builds a WatchEvent from an SSE event name and its data.
func parseEvent(event, data string) (WatchEvent, error) {
	var d sseData
	if err := fastjson.Unmarshal([]byte(data), &d); err != nil {
		return WatchEvent{}, fmt.Errorf("watch: bad event data: %w", err)
	}
	ev := WatchEvent{Type: d.Type, Kind: d.Kind, Name: d.Name, Seq: d.Seq}
	if ev.Type == "" {
		ev.Type = event
	}
	if ev.Type == "" {
		ev.Type = EventPut
	}
	if len(d.Object) > 0 && string(d.Object) != "null" {
		obj, err := DecodeObject(d.Kind, d.Object)
		if err != nil {
			return WatchEvent{}, fmt.Errorf("watch: event %d: %w", d.Seq, err)
		}
		ev.Object = obj
		if ev.Kind == "" {
			ev.Kind = obj.GetKind()
		}
		if ev.Name == "" {
			ev.Name = obj.Meta().Name
		}
	}
	return ev, nil
}
