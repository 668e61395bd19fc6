package upgrade

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// ErrGone is wrapped by what PeerWatch.Gone returns: the kernel says the
// peer of a connection is gone.
var ErrGone = errors.New("the peer is gone")

// PeerWatch tells whether the peer of a stream's TCP connection is gone,
// from what the kernel knows of the connection (on Linux; elsewhere it
// cannot tell): the connection was reset, or timed out (its keep-alive
// went unanswered, see KeepAlive), and no read or write of it has said so
// yet (a connection that ended both ways is not a peer gone), or what was
// sent on it has been
// outstanding, with no acknowledgement at all coming back, for longer
// than stall (the peer's host vanished). A peer that is there but reads
// nothing still acknowledges, advertising a full window: it is not gone.
// One goroutine checks it.
type PeerWatch struct {
	conn    *net.TCPConn
	stall   time.Duration
	checked time.Time // the last check
	since   time.Time // since when data was outstanding, unacknowledged; zero: none
}

// NewPeerWatch watches s's connection; stall is how long what was sent
// may go unacknowledged.
func NewPeerWatch(s Stream, stall time.Duration) *PeerWatch {
	return &PeerWatch{conn: tcpConn(s), stall: stall}
}

// tcpView is what a check reads of a connection.
type tcpView struct {
	// closed: the connection is over. err says why when it was reset or
	// timed out, and is nil when it ended both ways, or when a read or
	// write of it took the error first.
	closed   bool
	err      error
	unacked  uint32        // segments sent and not yet acknowledged
	sinceAck time.Duration // since the last acknowledgement came
}

// judge is the check at now of a connection seen as v.
func (w *PeerWatch) judge(v tcpView, now time.Time) error {
	ackedSince := !w.checked.IsZero() && v.sinceAck < now.Sub(w.checked)
	w.checked = now
	switch {
	case v.closed && v.err != nil:
		return fmt.Errorf("%w: %w", ErrGone, v.err)
	case v.unacked == 0 || ackedSince || v.closed:
		w.since = time.Time{}
	case w.since.IsZero():
		w.since = now
	case now.Sub(w.since) > w.stall:
		return fmt.Errorf("%w: what was sent went unacknowledged for %s", ErrGone, now.Sub(w.since).Truncate(time.Second))
	}
	return nil
}

// keepAliveProbes is how many TCP keep-alive probes go unanswered before
// the kernel gives a connection up.
const keepAliveProbes = 3

// KeepAlive sets TCP keep-alive on s's connection: after every without
// traffic a probe, every every, and the connection fails after
// keepAliveProbes unanswered (PeerWatch says so), so a peer whose host
// vanished from an idle connection is found out. The kernel counts whole
// seconds. errors.ErrUnsupported where s is not over TCP.
func KeepAlive(s Stream, every time.Duration) error {
	c := tcpConn(s)
	if c == nil {
		return fmt.Errorf("keep-alive: %w", errors.ErrUnsupported)
	}
	return c.SetKeepAliveConfig(net.KeepAliveConfig{Enable: true, Idle: every, Interval: every, Count: keepAliveProbes})
}

// Abort closes s with a reset where it is over TCP: the other side's reads
// and writes fail at once, where a close could read as the end of the
// input.
func Abort(s Stream) {
	if s == nil {
		return
	}
	abort(s)
	_ = s.Close()
}

// abort resets the TCP connection under c, or closes c when there is none.
func abort(c any) {
	if tc := tcpConn(c); tc != nil {
		_ = tc.SetLinger(0)
		_ = tc.Close()
		return
	}
	if cl, ok := c.(interface{ Close() error }); ok {
		_ = cl.Close()
	}
}

// tcpConn returns the TCP connection under c (a Stream of this package, a
// *tls.Conn, a *net.TCPConn), or nil.
func tcpConn(c any) *net.TCPConn {
	for range 4 {
		switch v := c.(type) {
		case *net.TCPConn:
			return v
		case *ownConn:
			c = v.Conn
		case *tls.Conn:
			c = v.NetConn()
		default:
			return nil
		}
	}
	return nil
}
