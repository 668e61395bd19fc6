package upgrade

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// ErrGone is wrapped by what Gone returns: the kernel says the peer of a
// connection is gone.
var ErrGone = errors.New("the peer is gone")

// keepAliveProbes is how many TCP keep-alive probes go unanswered before
// the kernel gives a connection up.
const keepAliveProbes = 3

// KeepAlive sets TCP keep-alive on s's connection: after every without
// traffic a probe, every every, and the connection fails (Gone says so)
// after keepAliveProbes unanswered, so a peer whose host vanished from an
// idle connection is found out. The kernel counts whole seconds.
// errors.ErrUnsupported where s is not over TCP.
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
