package upgrade

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// upgraded serves upgrades over TLS and hands each server side to the test.
func upgraded(t *testing.T) (*httptest.Server, chan Stream) {
	t.Helper()
	return serveUpgrades(t, httptest.NewTLSServer)
}

// serveUpgrades serves upgrades on the server newServer starts and hands
// each server side to the test.
func serveUpgrades(t *testing.T, newServer func(http.Handler) *httptest.Server) (*httptest.Server, chan Stream) {
	t.Helper()
	streams := make(chan Stream, 1)
	srv := newServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := accept(w)
		if !ok {
			return
		}
		streams <- s
	}))
	t.Cleanup(srv.Close)
	return srv, streams
}

// serverSide opens an upgrade to srv and returns both ends.
func serverSide(t *testing.T, srv *httptest.Server, streams chan Stream) (client, server Stream) {
	t.Helper()
	client, _, err := Do(srv.Client(), request(t, t.Context(), srv.URL, true))
	require.NoError(t, err)
	t.Cleanup(func() { _ = client.Close() })
	select {
	case server = <-streams:
	case <-time.After(10 * time.Second):
		t.Fatal("no upgrade reached the server")
	}
	t.Cleanup(func() { _ = server.Close() })
	return client, server
}

// KeepAlive reaches the TCP connection under TLS; a stream over anything
// else cannot have it.
func TestKeepAlive(t *testing.T) {
	srv, streams := upgraded(t)
	client, server := serverSide(t, srv, streams)
	assert.NoError(t, KeepAlive(server, time.Second))
	assert.NoError(t, KeepAlive(client, time.Second))
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	assert.ErrorIs(t, KeepAlive(bothWays{a}, time.Second), errors.ErrUnsupported)
}

// An aborted stream resets its connection: the other side's read fails,
// where a close reads as the end of the input.
func TestAbort(t *testing.T) {
	srv, streams := upgraded(t)
	client, server := serverSide(t, srv, streams)
	Abort(client)
	_, err := io.ReadAll(server)
	assert.Error(t, err, "a reset, not the end of the input")

	client, server = serverSide(t, srv, streams)
	require.NoError(t, client.Close())
	_, err = io.ReadAll(server)
	assert.NoError(t, err, "a close is the end of the input")
}

// The end of Do's context resets the connection under the stream.
func TestDoContextResets(t *testing.T) {
	srv, streams := upgraded(t)
	ctx, cancel := context.WithCancel(t.Context())
	client, _, err := Do(srv.Client(), request(t, ctx, srv.URL, true))
	require.NoError(t, err)
	defer client.Close()
	server := <-streams
	defer server.Close()
	cancel()
	_, err = io.ReadAll(server)
	assert.Error(t, err, "a reset, not the end of the input")
}

// The end of Splice's context resets both sides; so does a side that
// fails, for the other.
func TestSpliceGivesUp(t *testing.T) {
	srv, streams := upgraded(t)
	for _, how := range []string{"context", "near reset", "far reset"} {
		t.Run(how, func(t *testing.T) {
			nearClient, near := serverSide(t, srv, streams)
			far, farServer := serverSide(t, srv, streams)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			spliced := make(chan struct{})
			go func() {
				defer close(spliced)
				Splice(ctx, near, far)
			}()
			_, err := io.WriteString(nearClient, "ping")
			require.NoError(t, err)
			buf := make([]byte, 4)
			_, err = io.ReadFull(farServer, buf)
			require.NoError(t, err)
			var left []Stream
			switch how {
			case "context":
				cancel()
				left = []Stream{nearClient, farServer}
			case "near reset":
				Abort(nearClient)
				left = []Stream{farServer}
			case "far reset":
				Abort(farServer)
				left = []Stream{nearClient}
			}
			for _, s := range left {
				_, err := io.ReadAll(s)
				assert.Error(t, err, "a reset, not the end of the input")
			}
			select {
			case <-spliced:
			case <-time.After(10 * time.Second):
				t.Fatal("Splice did not return")
			}
		})
	}
}

// A watch's judgement over successive checks: a connection reset or timed
// out is gone at once, one that ended both ways is not; data outstanding is gone once no acknowledgement at all came
// for longer than the stall, counted from the first check that saw it
// outstanding (a quiet connection's last acknowledgement, long ago, does
// not count), and any acknowledgement between checks starts the count
// again. A full window (nothing in flight) is a peer that is there.
func TestPeerWatchJudgement(t *testing.T) {
	const stall = 20 * time.Second
	type check struct {
		at       time.Duration // since the start
		view     tcpView
		wantGone bool
	}
	for _, tc := range []struct {
		name   string
		checks []check
	}{
		{"reset", []check{{0, tcpView{closed: true, err: syscall.ECONNRESET}, true}}},
		{"timed out", []check{{0, tcpView{closed: true, err: syscall.ETIMEDOUT}, true}}},
		{"ended both ways", []check{{0, tcpView{closed: true}, false}, {time.Minute, tcpView{closed: true, sinceAck: time.Hour}, false}}},
		{"idle", []check{{0, tcpView{sinceAck: time.Hour}, false}, {time.Hour, tcpView{sinceAck: 2 * time.Hour}, false}}},
		{"sent after a long quiet, acknowledged", []check{
			{0, tcpView{unacked: 1, sinceAck: time.Hour}, false},
			{2 * time.Second, tcpView{sinceAck: time.Second}, false},
		}},
		{"unacknowledged past the stall", []check{
			{0, tcpView{unacked: 1, sinceAck: time.Hour}, false},
			{10 * time.Second, tcpView{unacked: 2, sinceAck: time.Hour}, false},
			{21 * time.Second, tcpView{unacked: 2, sinceAck: time.Hour}, true},
		}},
		{"busy and acknowledged all along", []check{
			{0, tcpView{unacked: 9, sinceAck: 0}, false},
			{15 * time.Second, tcpView{unacked: 9, sinceAck: time.Second}, false},
			{30 * time.Second, tcpView{unacked: 9, sinceAck: time.Second}, false},
			{45 * time.Second, tcpView{unacked: 9, sinceAck: 2 * time.Second}, false},
		}},
		{"an acknowledgement starts the count again", []check{
			{0, tcpView{unacked: 1, sinceAck: time.Hour}, false},
			{15 * time.Second, tcpView{unacked: 1, sinceAck: time.Second}, false},
			{30 * time.Second, tcpView{unacked: 1, sinceAck: 16 * time.Second}, false},
			{46 * time.Second, tcpView{unacked: 1, sinceAck: 32 * time.Second}, false},
			{51 * time.Second, tcpView{unacked: 1, sinceAck: 37 * time.Second}, true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := &PeerWatch{stall: stall}
			start := time.Unix(1700000000, 0)
			for i, c := range tc.checks {
				err := w.judge(c.view, start.Add(c.at))
				if c.wantGone {
					assert.ErrorIs(t, err, ErrGone, "check %d", i)
				} else {
					assert.NoError(t, err, "check %d", i)
				}
			}
		})
	}
}
