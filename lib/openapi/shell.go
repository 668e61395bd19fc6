package openapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

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
	if !s.shells.add() {
		s.writeErr(c, newErr(http.StatusServiceUnavailable, CodeUnavailable, "", "node %s is stopping", s.cfg.NodeName))
		return
	}
	defer s.shells.done()
	// The request's context goes on after the upgrade until the handler
	// returns: the shell's ends when its client is gone or the node stops
	// (see shellhangup.go).
	ctx, hangUp := s.shellContext(c.Request.Context())
	defer hangUp(nil)
	var conn upgrade.Stream
	var framed *shellframe.Writer
	stopWatch := func() {}
	exit, err := s.cfg.MachineShell(ctx, m.Metadata.Name, opts, func() (io.ReadWriter, error) {
		var err error
		if conn, err = hijack(c, proto); err != nil {
			return nil, err
		}
		sc := &shellConn{in: conn, out: conn, gone: clientGone(hangUp)}
		if proto == ShellProtocol {
			framed = shellframe.NewWriter(conn)
			sc.out = framed
		}
		stopWatch = s.watchConns(ctx, framed, []upgrade.Stream{conn}, []func(error){sc.gone})
		return sc, nil
	})
	hungUp := context.Cause(ctx)
	if hungUp != nil && conn != nil {
		// A client that reads nothing must not hold up the end.
		if d, ok := conn.(interface{ SetWriteDeadline(time.Time) error }); ok {
			_ = d.SetWriteDeadline(time.Now().Add(upgrade.Linger))
		}
	}
	stopWatch()
	if framed != nil {
		switch {
		case hungUp != nil:
			// The shell's status is the hang-up's: say why instead.
			_ = framed.Fail(fmt.Sprintf("the shell was hung up: %v", hungUp))
		case err == nil:
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
	if hungUp != nil {
		log = append(log, "hangup", hungUp.Error())
	}
	s.log.Info("machine shell ended", append(log, "err", err)...)
	switch {
	case conn != nil && errors.Is(hungUp, errClientGone):
		upgrade.Abort(conn)
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
// When either side goes, or this node stops, both connections are reset:
// the machine's node then hangs the shell up, and the client learns that
// the connection ended before the shell's status.
func (s *Server) proxyShell(c *gin.Context, m *types.Machine, proto string) {
	if !s.shells.add() {
		s.writeErr(c, newErr(http.StatusServiceUnavailable, CodeUnavailable, "", "node %s is stopping", s.cfg.NodeName))
		return
	}
	defer s.shells.done()
	ctx, hangUp := s.shellContext(context.WithoutCancel(c.Request.Context()))
	defer hangUp(nil)
	req, ok := s.machineNodeRequest(c, m, ctx, "Connection", "Upgrade", "Upgrade", proto)
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
	farGone := func(err error) { hangUp(fmt.Errorf("node %s is gone: %w", m.Spec.Node, err)) }
	stopWatch := s.watchConns(ctx, nil, []upgrade.Stream{near, far}, []func(error){clientGone(hangUp), farGone})
	upgrade.Splice(ctx, near, far)
	stopWatch()
	if cause := context.Cause(ctx); cause != nil {
		s.log.Info("machine shell given up", "machine", m.Metadata.Name, "node", m.Spec.Node, "protocol", proto, "hangup", cause.Error())
	}
}
