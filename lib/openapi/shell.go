package openapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/internal/shellframe"
	"github.com/hf-fleet/hf/lib/internal/upgrade"
	"github.com/hf-fleet/hf/lib/types"
)

// Upgrade tokens of a machine shell. After the 101 answer the connection
// carries the shell's input as raw bytes (a half-close ends it) and its
// output: under ShellProtocol in frames that end with the shell's exit
// status (see lib/internal/shellframe), under RawShellProtocol as raw bytes
// with no status, for clients from before ShellProtocol.
const (
	ShellProtocol    = shellframe.Protocol
	RawShellProtocol = shellframe.RawProtocol
)

// ErrNoShell is what Config.MachineShell returns when the machine's driver
// runs no shells.
var ErrNoShell = errors.New("the machine's driver runs no shells")

// machineShell answers GET /api/v1/machines/{name}/shell with "Upgrade:
// hf-shell.v2" or "Upgrade: hf-shell" (?tty=true&rows=&cols=): a shell in
// the machine as its own user, over the upgraded connection, from the node
// that holds it (another node splices the connection through). Only an
// admin or a user the machine is bound to for may open one.
func (s *Server) machineShell(c *gin.Context) {
	p := principal(c)
	if p.Role == RoleOperator {
		s.writeErr(c, forbidden("", "shells are for the machine's user or an admin"))
		return
	}
	m, ok := s.callersMachine(c)
	if !ok {
		return
	}
	proto := c.GetHeader("Upgrade")
	if proto != ShellProtocol && proto != RawShellProtocol {
		s.writeErr(c, badRequest("Upgrade", "a shell needs the headers Connection: Upgrade and Upgrade: %s (or %s, without the exit status) (hf-cli machine shell)", ShellProtocol, RawShellProtocol))
		return
	}
	var opts drivers.ShellOptions
	var err error
	if v := c.Query("tty"); v != "" {
		if opts.TTY, err = strconv.ParseBool(v); err != nil {
			s.writeErr(c, badRequest("tty", "must be true or false, got %q", v))
			return
		}
	}
	for _, q := range []struct {
		name string
		to   *uint16
	}{{"rows", &opts.Rows}, {"cols", &opts.Cols}} {
		if v := c.Query(q.name); v != "" {
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil || n == 0 || n > 1000 {
				s.writeErr(c, badRequest(q.name, "must be 1 to 1000, got %q", v))
				return
			}
			*q.to = uint16(n)
		}
	}
	if m.Status.Paused {
		// Its processes are stopped: a shell would hang (native) or fail
		// after the upgrade, where only an empty session tells.
		s.writeErr(c, newErr(http.StatusConflict, CodeConflict, "", "machine %s is paused (its session ended with onEnd Pause): a keepalive of the session resumes it", m.Metadata.Name))
		return
	}
	if m.Spec.Node != s.cfg.NodeName && c.GetHeader(proxiedHeader) == "" {
		s.proxyShell(c, m, proto)
		return
	}
	if s.cfg.MachineShell == nil {
		s.writeErr(c, newErr(http.StatusServiceUnavailable, CodeUnavailable, "", "this node runs no machine shells"))
		return
	}
	var conn upgrade.Stream
	var framed *shellframe.Writer
	exit, err := s.cfg.MachineShell(c.Request.Context(), m.Metadata.Name, opts, func() (io.ReadWriter, error) {
		var err error
		if conn, err = hijack(c, proto); err != nil {
			return nil, err
		}
		if proto == RawShellProtocol {
			return conn, nil
		}
		framed = shellframe.NewWriter(conn)
		return struct {
			io.Reader
			io.Writer
		}{conn, framed}, nil
	})
	if framed != nil {
		if err == nil {
			// The frame refuses an exit it cannot carry before sending it.
			err = framed.Exit(exit)
		}
		if err != nil {
			// As for an internal error's answer, the error itself is only
			// in this node's log.
			_ = framed.Fail(fmt.Sprintf("the shell failed on node %s, whose log says why", s.cfg.NodeName))
		}
	}
	log := []any{"machine", m.Metadata.Name, "user", p.User, "token", p.Name, "protocol", proto}
	if conn != nil && err == nil {
		log = append(log, "exit", exit.Code)
		if exit.Signal != "" {
			log = append(log, "signal", exit.Signal)
		}
	}
	s.log.Info("machine shell ended", append(log, "err", err)...)
	switch {
	case conn != nil:
		upgrade.CloseLingering(conn)
	case errors.Is(err, ErrNoShell):
		s.writeErr(c, newErr(http.StatusConflict, CodeConflict, "", "%v", err))
	case errors.Is(err, ErrLogsNotHere), errors.Is(err, drivers.ErrNotFound):
		s.writeErr(c, newErr(http.StatusConflict, CodeConflict, "", "machine %q is not running on its node", m.Metadata.Name))
	case err != nil:
		s.writeErr(c, err)
	}
}

// hijack answers 101 with proto and returns the upgraded connection.
func hijack(c *gin.Context, proto string) (upgrade.Stream, error) {
	conn, buf, err := c.Writer.Hijack()
	if err != nil {
		return nil, fmt.Errorf("upgrade: %w", err)
	}
	return upgrade.Accept(conn, buf, proto)
}

// proxyShell opens the shell on the machine's node, with the client's
// Upgrade token proto, and splices the two connections: the end of the
// client's input reaches the shell, and the shell's frames the client.
func (s *Server) proxyShell(c *gin.Context, m *types.Machine, proto string) {
	req, ok := s.machineNodeRequest(c, m, context.WithoutCancel(c.Request.Context()), "Connection", "Upgrade", "Upgrade", proto)
	if !ok {
		return
	}
	far, res, err := upgrade.Do(s.cfg.PeerClient, req)
	if err != nil {
		s.writeErr(c, newErr(http.StatusServiceUnavailable, CodeUnavailable, "", "node %s: %v", m.Spec.Node, err))
		return
	}
	if far != nil && !strings.EqualFold(res.Header.Get("Upgrade"), proto) {
		_ = far.Close()
		s.writeErr(c, newErr(http.StatusServiceUnavailable, CodeUnavailable, "", "node %s: upgraded to %q, not %q", m.Spec.Node, res.Header.Get("Upgrade"), proto))
		return
	}
	if far == nil {
		defer res.Body.Close()
		for _, h := range []string{"Content-Type"} {
			c.Header(h, res.Header.Get(h))
		}
		c.Status(res.StatusCode)
		_, _ = io.Copy(c.Writer, io.LimitReader(res.Body, 1<<20))
		return
	}
	near, err := hijack(c, proto)
	if err != nil {
		_ = far.Close()
		return
	}
	upgrade.Splice(c.Request.Context(), near, far)
}
