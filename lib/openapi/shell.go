package openapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/internal/upgrade"
	"github.com/hf-fleet/hf/lib/types"
)

// ShellProtocol is the Upgrade token of a machine shell: after the 101
// answer the connection carries the shell's input and output as raw bytes.
const ShellProtocol = "hf-shell"

// ErrNoShell is what Config.MachineShell returns when the machine's driver
// runs no shells.
var ErrNoShell = errors.New("the machine's driver runs no shells")

// machineShell answers GET /api/v1/machines/{name}/shell with "Upgrade:
// hf-shell" (?tty=true&rows=&cols=): a shell in the machine as its own
// user, over the upgraded connection, from the node that holds it (another
// node splices the connection through). Only an admin or a user the
// machine is bound to for may open one.
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
	if c.GetHeader("Upgrade") != ShellProtocol {
		s.writeErr(c, badRequest("Upgrade", "a shell needs the headers Connection: Upgrade and Upgrade: %s (hf-cli machine shell)", ShellProtocol))
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
		s.proxyShell(c, m)
		return
	}
	if s.cfg.MachineShell == nil {
		s.writeErr(c, newErr(http.StatusServiceUnavailable, CodeUnavailable, "", "this node runs no machine shells"))
		return
	}
	upgraded := false
	err = s.cfg.MachineShell(c.Request.Context(), m.Metadata.Name, opts, func() (io.ReadWriteCloser, error) {
		rw, err := hijack(c)
		if err != nil {
			return nil, err
		}
		upgraded = true
		return rw, nil
	})
	s.log.Info("machine shell ended", "machine", m.Metadata.Name, "user", p.User, "token", p.Name, "err", err)
	switch {
	case upgraded:
	case errors.Is(err, ErrNoShell):
		s.writeErr(c, newErr(http.StatusConflict, CodeConflict, "", "%v", err))
	case errors.Is(err, ErrLogsNotHere), errors.Is(err, drivers.ErrNotFound):
		s.writeErr(c, newErr(http.StatusConflict, CodeConflict, "", "machine %q is not running on its node", m.Metadata.Name))
	case err != nil:
		s.writeErr(c, err)
	}
}

// hijack answers 101 and returns the upgraded connection.
func hijack(c *gin.Context) (upgrade.Stream, error) {
	conn, buf, err := c.Writer.Hijack()
	if err != nil {
		return nil, fmt.Errorf("upgrade: %w", err)
	}
	return upgrade.Accept(conn, buf, ShellProtocol)
}

// proxyShell opens the shell on the machine's node and splices the two
// connections; the end of the client's input reaches the shell.
func (s *Server) proxyShell(c *gin.Context, m *types.Machine) {
	req, ok := s.machineNodeRequest(c, m, context.WithoutCancel(c.Request.Context()), "Connection", "Upgrade", "Upgrade", ShellProtocol)
	if !ok {
		return
	}
	far, res, err := upgrade.Do(s.cfg.PeerClient, req)
	if err != nil {
		s.writeErr(c, newErr(http.StatusServiceUnavailable, CodeUnavailable, "", "node %s: %v", m.Spec.Node, err))
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
	near, err := hijack(c)
	if err != nil {
		_ = far.Close()
		return
	}
	upgrade.Splice(near, far)
}
