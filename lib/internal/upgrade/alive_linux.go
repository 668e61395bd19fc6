package upgrade

import (
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// tcpClose is the state (TCP_CLOSE) of a connection the peer reset, or
// whose keep-alive or retransmissions went unanswered.
const tcpClose = 7

// Gone reports, from the kernel's state of s's TCP connection, whether its
// peer is gone: the connection was reset or timed out (its keep-alive
// went unanswered, see KeepAlive), or what was sent on it has gone
// unacknowledged for longer than stall, the peer's host having vanished
// (a peer that is there but reads nothing acknowledges, advertising a
// full window, and is not gone). nil when it cannot tell: not over TCP,
// or not on Linux.
func Gone(s Stream, stall time.Duration) error {
	c := tcpConn(s)
	if c == nil {
		return nil
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return nil
	}
	var info *unix.TCPInfo
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}); err != nil || ierr != nil {
		return nil
	}
	return gone(info.State, info.Unacked, time.Duration(info.Last_ack_recv)*time.Millisecond, stall)
}

// gone is Gone's judgement of a connection in state with unacked segments
// in flight, the last acknowledgement sinceAck ago.
func gone(state uint8, unacked uint32, sinceAck, stall time.Duration) error {
	switch {
	case state == tcpClose:
		return fmt.Errorf("%w: the connection was reset or timed out", ErrGone)
	case unacked > 0 && sinceAck > stall:
		return fmt.Errorf("%w: nothing sent acknowledged for %s", ErrGone, sinceAck.Truncate(time.Second))
	}
	return nil
}
