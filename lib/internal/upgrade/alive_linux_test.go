package upgrade

import (
	"io"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// A watch tells a peer that reset the connection, not one that only ended
// its input.
func TestPeerWatchReset(t *testing.T) {
	srv, streams := upgraded(t)
	client, server := serverSide(t, srv, streams)
	w := NewPeerWatch(server, time.Minute)
	assert.NoError(t, w.Gone(time.Now()))
	require.NoError(t, client.CloseWrite())
	assert.NoError(t, w.Gone(time.Now()), "the end of the input is not the peer gone")
	Abort(client)
	var err error
	require.Eventually(t, func() bool {
		err = w.Gone(time.Now())
		return err != nil
	}, 10*time.Second, 10*time.Millisecond, "the reset reaches the server's socket")
	assert.ErrorIs(t, err, ErrGone)
	assert.ErrorIs(t, err, syscall.ECONNRESET)
}

// A connection that ended both ways is over, not a peer gone. (Over TCP:
// TLS's CloseWrite sends its close_notify but leaves the TCP connection
// open.)
func TestPeerWatchEnded(t *testing.T) {
	srv, streams := serveUpgrades(t, httptest.NewServer)
	client, server := serverSide(t, srv, streams)
	w := NewPeerWatch(server, time.Minute)
	require.NoError(t, client.CloseWrite())
	require.NoError(t, server.CloseWrite())
	_, err := io.ReadAll(server)
	require.NoError(t, err)
	_, err = io.ReadAll(client)
	require.NoError(t, err)
	require.NoError(t, client.Close())
	require.Eventually(t, func() bool { return tcpState(t, server) == tcpClose }, 10*time.Second, 10*time.Millisecond)
	assert.NoError(t, w.Gone(time.Now()))
}

// tcpState is the state of s's TCP connection.
func tcpState(t *testing.T, s Stream) uint8 {
	rc, err := tcpConn(s).SyscallConn()
	require.NoError(t, err)
	var info *unix.TCPInfo
	require.NoError(t, rc.Control(func(fd uintptr) {
		info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
	}))
	require.NoError(t, err)
	return info.State
}
