package openapi

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// proxiedHeader marks a request one node passed to another, which then
// answers it itself.
const proxiedHeader = "X-Hf-Proxied"

// maxLogTail bounds ?tail.
const maxLogTail = 100000

// ErrLogsNotHere and ErrNoLogs are what Config.MachineLogs returns for a
// machine this node does not hold and one whose driver keeps no output.
var (
	ErrLogsNotHere = errors.New("machine is not on this node")
	ErrNoLogs      = errors.New("the machine's driver keeps no output")
)

// machineLogs answers GET /api/v1/machines/{name}/logs?tail=N&follow=true:
// the machine's output as text, served by the node that holds it (another
// node passes the request on, with the caller's token). A user gets the
// logs of their own machines only.
func (s *Server) machineLogs(c *gin.Context) {
	m, ok := s.callersMachine(c)
	if !ok {
		return
	}
	var opts drivers.LogOptions
	if v := c.Query("tail"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxLogTail {
			s.writeErr(c, badRequest("tail", "must be 0 to %d lines, got %q", maxLogTail, v))
			return
		}
		opts.Tail = n
	}
	if v := c.Query("follow"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			s.writeErr(c, badRequest("follow", "must be true or false, got %q", v))
			return
		}
		opts.Follow = b
	}
	if m.Spec.Node != s.cfg.NodeName && c.GetHeader(proxiedHeader) == "" {
		s.proxyLogs(c, m)
		return
	}
	if s.cfg.MachineLogs == nil {
		s.writeErr(c, newErr(http.StatusServiceUnavailable, CodeUnavailable, "", "this node serves no machine logs"))
		return
	}
	w := &flushWriter{c: c}
	err := s.cfg.MachineLogs(c.Request.Context(), m.Metadata.Name, opts, w)
	switch {
	case err == nil:
		if !w.started {
			w.begin()
		}
	case w.started:
		s.log.Warn("machine logs cut short", "machine", m.Metadata.Name, "err", err)
	case errors.Is(err, ErrNoLogs):
		s.writeErr(c, newErr(http.StatusConflict, CodeConflict, "", "%v", err))
	case errors.Is(err, ErrLogsNotHere), errors.Is(err, drivers.ErrNotFound):
		s.writeErr(c, newErr(http.StatusNotFound, CodeNotFound, "", "machine %q: its node holds no output of it (it is gone or moving)", m.Metadata.Name))
	default:
		s.writeErr(c, err)
	}
}

// callersMachine loads the machine of the path as the caller may use it:
// an admin or operator any, a user only one a claim of theirs is Bound to
// now (404 otherwise, as for an object they cannot see); and one a node of
// hf holds, which serves its logs and shells (409 for an external machine,
// which names no node: it was a 503 saying that node "" could not be
// reached, as if it might be later).
func (s *Server) callersMachine(c *gin.Context) (*types.Machine, bool) {
	p := principal(c)
	_, obj, err := kindRoutes{s: s, kind: types.KindMachine}.load(p, c.Param("name"))
	if err != nil {
		s.writeErr(c, err)
		return nil, false
	}
	m := obj.(*types.Machine)
	if !s.sight(p).boundTo(m.Metadata.Name) {
		s.writeErr(c, notFound(types.KindMachine, m.Metadata.Name))
		return nil, false
	}
	if m.Spec.Node == "" {
		s.writeErr(c, newErr(http.StatusConflict, CodeConflict, "",
			"machine %s is an external machine: it names no node, and only the node that holds a machine serves its logs and shells", m.Metadata.Name))
		return nil, false
	}
	return m, true
}

// toMachineNode sends the request on to the node that holds m, with the
// caller's token and more headers (pairs), and returns the answer; on an
// error it has answered the client.
func (s *Server) toMachineNode(c *gin.Context, m *types.Machine, ctx context.Context, hdr ...string) (*http.Response, bool) {
	req, ok := s.machineNodeRequest(c, m, ctx, hdr...)
	if !ok {
		return nil, false
	}
	res, err := s.cfg.PeerClient.Do(req)
	if err != nil {
		s.writeErr(c, newErr(http.StatusServiceUnavailable, CodeUnavailable, "", "node %s: %v", m.Spec.Node, err))
		return nil, false
	}
	return res, true
}

// machineNodeRequest is c's request as passed on to m's node, with hdr
// (name, value, ...) set; it answers c itself when the node is out of reach.
func (s *Server) machineNodeRequest(c *gin.Context, m *types.Machine, ctx context.Context, hdr ...string) (*http.Request, bool) {
	node, err := store.Get[types.Node](s.st, types.KindNode, m.Spec.Node)
	if err != nil || node.Spec.APIAddress == "" || node.Status.Phase == types.NodeDown || s.cfg.PeerClient == nil {
		s.writeErr(c, newErr(http.StatusServiceUnavailable, CodeUnavailable, "", "machine %q is on node %s, which cannot be reached from here", m.Metadata.Name, m.Spec.Node))
		return nil, false
	}
	u := url.URL{Scheme: s.cfg.PeerScheme, Host: node.Spec.APIAddress, Path: c.Request.URL.Path, RawQuery: c.Request.URL.RawQuery}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		s.writeErr(c, err)
		return nil, false
	}
	req.Header.Set("Authorization", c.GetHeader("Authorization"))
	req.Header.Set(proxiedHeader, s.cfg.NodeName)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	return req, true
}

// proxyLogs passes the request to the node that holds m.
func (s *Server) proxyLogs(c *gin.Context, m *types.Machine) {
	res, ok := s.toMachineNode(c, m, c.Request.Context())
	if !ok {
		return
	}
	defer res.Body.Close()
	for _, h := range []string{"Content-Type", "X-Content-Type-Options"} {
		if v := res.Header.Get(h); v != "" {
			c.Header(h, v)
		}
	}
	c.Status(res.StatusCode)
	w := &flushWriter{c: c, started: true}
	_, _ = io.Copy(w, res.Body)
}

// flushWriter writes a text answer as it comes.
type flushWriter struct {
	c       *gin.Context
	started bool
}

func (w *flushWriter) begin() {
	w.started = true
	w.c.Header("Content-Type", "text/plain; charset=utf-8")
	w.c.Header("X-Content-Type-Options", "nosniff")
	w.c.Status(http.StatusOK)
	w.c.Writer.WriteHeaderNow()
}

func (w *flushWriter) Write(p []byte) (int, error) {
	if !w.started {
		w.begin()
	}
	n, err := w.c.Writer.Write(p)
	w.c.Writer.Flush()
	return n, err
}
