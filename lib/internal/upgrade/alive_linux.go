package upgrade

import (
	"time"

	"golang.org/x/sys/unix"
)

// tcpClose is the state (TCP_CLOSE) of a connection that is over: reset
// by the peer, timed out (its keep-alive or retransmissions went
// unanswered), or ended both ways.
const tcpClose = 7

// Gone reports, as of now, whether the peer is gone (see PeerWatch); nil
// also when it cannot tell (not over TCP).
func (w *PeerWatch) Gone(now time.Time) error {
	if w.conn == nil {
		return nil
	}
	rc, err := w.conn.SyscallConn()
	if err != nil {
		return nil
	}
	var info *unix.TCPInfo
	var soErr int
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if ierr == nil && info.State == tcpClose {
			// Why it closed, which a read or write would return next
			// (and this takes instead): a reset, a timeout, or nothing
			// for a connection that ended both ways.
			soErr, ierr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_ERROR)
		}
	}); err != nil || ierr != nil {
		return nil
	}
	v := tcpView{
		closed:   info.State == tcpClose,
		unacked:  info.Unacked,
		sinceAck: time.Duration(info.Last_ack_recv) * time.Millisecond,
	}
	if soErr != 0 {
		v.err = unix.Errno(soErr)
	}
	return w.judge(v, now)
}
