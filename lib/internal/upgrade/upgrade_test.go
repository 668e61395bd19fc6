package upgrade

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// echoAll answers an upgrade: it reads until the client's end of input,
// then says what it read (and whether the request's context ended).
func echoAll(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Upgrade") != "test" {
		http.Error(w, "no upgrade", http.StatusBadRequest)
		return
	}
	s, ok := accept(w)
	if !ok {
		return
	}
	defer s.Close()
	in, err := io.ReadAll(s)
	if err != nil {
		return
	}
	if err := r.Context().Err(); err != nil {
		// The end of the client's input must not end the exchange.
		_, _ = fmt.Fprintf(s, "read %q, then the request's context ended: %v", in, err)
		return
	}
	_, _ = fmt.Fprintf(s, "read %q", in)
}

// accept hijacks w's connection and answers the upgrade to "test".
func accept(w http.ResponseWriter) (Stream, bool) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return nil, false
	}
	s, err := Accept(conn, buf, "test")
	return s, err == nil
}

func request(t *testing.T, ctx context.Context, u string, upgrade bool) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	require.NoError(t, err)
	if upgrade {
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "test")
	}
	return req
}

// Over TLS and plain TCP the end of what the client sends reaches the
// server, whose answer still comes back.
func TestDoCloseWrite(t *testing.T) {
	for _, srv := range []*httptest.Server{httptest.NewTLSServer(http.HandlerFunc(echoAll)), httptest.NewServer(http.HandlerFunc(echoAll))} {
		t.Cleanup(srv.Close)
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		s, res, err := Do(srv.Client(), request(t, ctx, srv.URL, true))
		require.NoError(t, err, srv.URL)
		require.NotNil(t, s, srv.URL)
		assert.Equal(t, http.StatusSwitchingProtocols, res.StatusCode)
		_, err = io.WriteString(s, "one\ntwo\n")
		require.NoError(t, err)
		require.NoError(t, s.CloseWrite())
		out, err := io.ReadAll(s)
		require.NoError(t, err)
		assert.Equal(t, `read "one\ntwo\n"`, string(out), srv.URL)
		require.NoError(t, s.Close())
	}
}

// An answer other than 101 comes back whole, its connection closed with
// its body.
func TestDoRefused(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(echoAll))
	defer srv.Close()
	s, res, err := Do(srv.Client(), request(t, t.Context(), srv.URL, false))
	require.NoError(t, err)
	assert.Nil(t, s)
	assert.Equal(t, http.StatusBadRequest, res.StatusCode)
	body, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Equal(t, "no upgrade\n", string(body))
	require.NoError(t, res.Body.Close())
}

// The end of the request's context ends a wait for the answer and closes
// an upgraded stream.
func TestDoContext(t *testing.T) {
	hold := make(chan struct{})
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hold }))
	defer slow.Close()
	defer close(hold)
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	_, _, err := Do(slow.Client(), request(t, ctx, slow.URL, true))
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	srv := httptest.NewServer(http.HandlerFunc(echoAll))
	defer srv.Close()
	ctx, cancel = context.WithCancel(t.Context())
	s, _, err := Do(srv.Client(), request(t, ctx, srv.URL, true))
	require.NoError(t, err)
	cancel()
	_, err = io.ReadAll(s)
	assert.Error(t, err, "a read after the context ended")
}

// Through a proxy the request goes through the client: the stream works
// but cannot end one way.
func TestDoThroughProxy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(echoAll))
	defer srv.Close()
	u, err := url.Parse(srv.URL)
	require.NoError(t, err)
	// The "proxy" is the server itself: a plain-HTTP proxy is sent the
	// request with its absolute URL, which the test server answers too.
	hc := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(u)}}
	s, res, err := Do(hc, request(t, t.Context(), "http://hf.invalid/", true))
	require.NoError(t, err)
	require.NotNil(t, s)
	assert.Equal(t, http.StatusSwitchingProtocols, res.StatusCode)
	assert.True(t, errors.Is(s.CloseWrite(), errors.ErrUnsupported))
	require.NoError(t, s.Close())
}

// Splice passes the end of a's input on to b and b's answer back to a.
func TestSplice(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(echoAll))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		far, _, err := Do(srv.Client(), request(t, ctx, srv.URL, true))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		near, ok := accept(w)
		if !ok {
			_ = far.Close()
			return
		}
		Splice(r.Context(), near, far)
	}))
	defer front.Close()
	s, _, err := Do(front.Client(), request(t, ctx, front.URL, true))
	require.NoError(t, err)
	_, err = io.WriteString(s, "through")
	require.NoError(t, err)
	require.NoError(t, s.CloseWrite())
	out, err := io.ReadAll(s)
	require.NoError(t, err)
	assert.Equal(t, `read "through"`, string(out))
}

// CloseLingering: an answer larger than the connection's buffers, sent
// while the client's input goes unread, reaches the client whole; the
// server is done as soon as the client closes, not after Linger.
func TestCloseLingering(t *testing.T) {
	const answer = 4 << 20
	done := make(chan time.Duration, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := accept(w)
		if !ok {
			return
		}
		_, _ = s.Write(make([]byte, answer))
		start := time.Now()
		CloseLingering(s)
		done <- time.Since(start)
	}))
	t.Cleanup(srv.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, _, err := Do(srv.Client(), request(t, ctx, srv.URL, true))
	require.NoError(t, err)
	_, err = s.Write(make([]byte, 64<<10)) // never read by the server
	require.NoError(t, err)
	n, err := io.Copy(io.Discard, s)
	require.NoError(t, err, "no reset")
	assert.Equal(t, int64(answer), n)
	require.NoError(t, s.Close())
	select {
	case d := <-done:
		assert.Less(t, d, Linger, "the server closed once the client had")
	case <-time.After(2 * Linger):
		t.Fatal("the server never closed")
	}
}

// Accept's stream may be read from two goroutines, what the server read
// ahead with the request too: between them they read every byte once.
func TestAcceptConcurrentReads(t *testing.T) {
	const input = 256 << 10
	got := make(chan int, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := accept(w)
		if !ok {
			return
		}
		defer s.Close()
		counts := make(chan int64, 2)
		for range 2 {
			go func() {
				n, _ := io.Copy(io.Discard, s)
				counts <- n
			}()
		}
		got <- int(<-counts + <-counts)
	}))
	t.Cleanup(srv.Close)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	// The request and the first input in one write: the server reads some
	// of the input ahead with the request.
	req := "GET / HTTP/1.1\r\nHost: test\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n"
	_, err = conn.Write(append([]byte(req), make([]byte, 1024)...))
	require.NoError(t, err)
	_, err = conn.Write(make([]byte, input-1024))
	require.NoError(t, err)
	require.NoError(t, CloseWrite(conn))
	select {
	case n := <-got:
		assert.Equal(t, input, n)
	case <-time.After(10 * time.Second):
		t.Fatal("the server's reads never ended")
	}
}
