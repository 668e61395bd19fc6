package openapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/internal/shellframe"
	"github.com/hf-fleet/hf/lib/internal/upgrade"
)

// A shell's context ends, and the driver hangs the shell up, when its
// client is gone or its node stops. The request's context cannot say
// either: after the upgrade nothing reads the connection for the server,
// and the end of the client's input (a half-close) is no disconnect. So:
//
//   - Serve's end ends Server.life, from which every shell's context ends;
//   - a read of the connection that fails (other than at the end of the
//     input) or a write that fails says the client is gone;
//   - while the shell is quiet, every ShellKeepalive an empty output frame
//     goes out (hf-shell.v2): once the client is gone its host answers it
//     with a reset, and the next write fails;
//   - five times as often the kernel is asked about the connection
//     (upgrade.PeerWatch, Linux): reset, timed out under TCP keep-alive,
//     or what was sent unacknowledged for two intervals, 10 s at least
//     (the client's host vanished). This is all a raw hf-shell connection has once its input
//     ended: a killed client's host resets the connection only when the
//     connection's last traces there are gone, a minute or so later.
//
// A node that splices a shell through watches both of its connections in
// the same way, and resets both when either goes (upgrade.Splice), so the
// machine's node finds its client gone at once.

// errClientGone is the cause of a shell's end when its client is gone.
var errClientGone = errors.New("the client is gone")

// shellStall is how many keep-alive intervals what was sent on a shell's
// connection may go unacknowledged before the client counts as gone, and
// minShellStall the least time: well above any round trip and delayed
// acknowledgement.
const (
	shellStall    = 2
	minShellStall = 10 * time.Second
)

// shellChecks is how many times per keep-alive interval the kernel is
// asked about a shell's connections: a getsockopt, cheap, that finds
// sooner a reset drawn by a keep-alive (one written here, or through a
// node between: that node resets its connection to this one in turn).
const shellChecks = 5

// shellSet counts the shells a server runs or splices through, so that
// Serve, stopping, waits for them once it hung them up. Safe for
// concurrent use.
type shellSet struct {
	mu      sync.Mutex
	n       int
	stopped bool
	idle    chan struct{} // closed once stopped with no shell
}

func newShellSet() *shellSet { return &shellSet{idle: make(chan struct{})} }

// add counts a shell in; false once the set stopped: no new shell then.
func (s *shellSet) add() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.n++
	return true
}

// done counts a shell out.
func (s *shellSet) done() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n--
	if s.stopped && s.n == 0 {
		close(s.idle)
	}
}

// stop refuses new shells and returns a channel closed once none runs.
func (s *shellSet) stop() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.stopped {
		s.stopped = true
		if s.n == 0 {
			close(s.idle)
		}
	}
	return s.idle
}

// count is how many shells run.
func (s *shellSet) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// shellContext returns the context of a shell served from parent's
// request: it ends, with the cause, when hangUp is called or when the
// server stops. The caller calls hangUp(nil) when the shell is over.
func (s *Server) shellContext(parent context.Context) (ctx context.Context, hangUp context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	stop := context.AfterFunc(s.life, func() { cancel(context.Cause(s.life)) })
	return ctx, func(cause error) {
		stop()
		cancel(cause)
	}
}

// clientGone returns what a failure of the client's connection hangs up
// with.
func clientGone(hangUp context.CancelCauseFunc) func(error) {
	return func(err error) { hangUp(fmt.Errorf("%w: %w", errClientGone, err)) }
}

// shellConn is a shell's connection as its driver sees it: the client's
// input, and the shell's output to the client (in frames under
// hf-shell.v2). A read or write that fails means the client is gone; the
// end of the input does not.
type shellConn struct {
	in   io.Reader
	out  io.Writer
	gone func(error)
}

func (c *shellConn) Read(p []byte) (int, error) {
	n, err := c.in.Read(p)
	if err != nil && err != io.EOF {
		c.gone(fmt.Errorf("read: %w", err))
	}
	return n, err
}

func (c *shellConn) Write(p []byte) (int, error) {
	n, err := c.out.Write(p)
	if err != nil && !errors.Is(err, shellframe.ErrFinished) {
		c.gone(fmt.Errorf("write: %w", err))
	}
	return n, err
}

// watchConns checks conns until ctx ends or the returned stop is called,
// which waits for it: every ShellKeepalive under hf-shell.v2 (framed set)
// it sends a keep-alive while the shell is quiet, and shellChecks times as
// often it asks the kernel whether each conn's peer is still there. It
// calls gone[i] with why conns[i]'s peer is gone, once, and stops. conns
// get TCP keep-alive at ShellKeepalive.
func (s *Server) watchConns(ctx context.Context, framed *shellframe.Writer, conns []upgrade.Stream, gone []func(error)) (stop func()) {
	every := s.cfg.ShellKeepalive
	stall := max(shellStall*every, minShellStall)
	watches := make([]*upgrade.PeerWatch, len(conns))
	for i, c := range conns {
		_ = upgrade.KeepAlive(c, every) // where it cannot, the watch cannot tell either
		watches[i] = upgrade.NewPeerWatch(c, stall)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(max(every/shellChecks, time.Millisecond))
		defer t.Stop()
		for n := 1; ; n++ {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if framed != nil && n%shellChecks == 0 {
				if err := framed.KeepAlive(); err != nil {
					if !errors.Is(err, shellframe.ErrFinished) {
						gone[0](fmt.Errorf("keep-alive: %w", err))
					}
					return
				}
			}
			for i, w := range watches {
				if err := w.Gone(time.Now()); err != nil {
					gone[i](err)
					return
				}
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}
