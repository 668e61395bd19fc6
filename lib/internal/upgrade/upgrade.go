// Package upgrade opens an HTTP/1.1 connection upgrade (101 Switching
// Protocols) on a connection of its own, so that the side that asked can end
// what it sends and still read what comes back (CloseWrite). net/http hands
// an upgraded connection over as a body that can only close both ways, and a
// shell reading commands from a pipe never learns that they ended.
package upgrade

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// Stream is an upgraded connection: raw bytes both ways.
type Stream interface {
	io.ReadWriteCloser
	// CloseWrite ends what this side sends: the other reads EOF and can
	// still answer. errors.ErrUnsupported where the connection cannot.
	CloseWrite() error
}

// Do sends req, which asks for an upgrade (its Connection and Upgrade
// headers set), and returns the connection once the server answers 101.
// Any other answer is returned as res, whose body the caller closes. The
// connection is dialled as hc's transport would (its dialer and TLS
// settings) and is reset (Abort) when req's context ends: the other side
// learns that the exchange was given up, not that its input ended.
// Through a proxy, or with a transport of another type, the request goes
// through hc and the stream cannot CloseWrite.
func Do(hc *http.Client, req *http.Request) (Stream, *http.Response, error) {
	t, ok := hc.Transport.(*http.Transport)
	if hc.Transport == nil {
		t, ok = http.DefaultTransport.(*http.Transport)
	}
	if ok && t.Proxy != nil {
		if u, err := t.Proxy(req); err != nil || u != nil {
			ok = false
		}
	}
	if !ok {
		return viaClient(hc, req)
	}
	ctx := req.Context()
	conn, err := dial(ctx, t, req)
	if err != nil {
		return nil, nil, err
	}
	// Closing the connection is what ends a read or a write in flight when
	// the context ends, during the exchange and after it.
	stop := context.AfterFunc(ctx, func() { abort(conn) })
	fail := func(err error) (Stream, *http.Response, error) {
		stop()
		_ = conn.Close()
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return nil, nil, err
	}
	if err := req.Write(conn); err != nil {
		return fail(err)
	}
	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, req)
	if err != nil {
		return fail(err)
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		res.Body = &closeBoth{ReadCloser: res.Body, close: func() { stop(); _ = conn.Close() }}
		return nil, res, nil
	}
	return &ownConn{Conn: conn, r: br, stop: stop}, res, nil
}

// dial opens a connection to req's host as t would.
func dial(ctx context.Context, t *http.Transport, req *http.Request) (net.Conn, error) {
	host, port := req.URL.Hostname(), req.URL.Port()
	dialer := t.DialContext
	if dialer == nil {
		dialer = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	switch req.URL.Scheme {
	case "http":
		if port == "" {
			port = "80"
		}
		return dialer(ctx, "tcp", net.JoinHostPort(host, port))
	case "https":
	default:
		return nil, fmt.Errorf("upgrade: unsupported scheme %q", req.URL.Scheme)
	}
	if port == "" {
		port = "443"
	}
	addr := net.JoinHostPort(host, port)
	if t.DialTLSContext != nil {
		return t.DialTLSContext(ctx, "tcp", addr)
	}
	raw, err := dialer(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{}
	if t.TLSClientConfig != nil {
		cfg = t.TLSClientConfig.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName = host
	}
	cfg.NextProtos = []string{"http/1.1"} // an upgrade is HTTP/1.1's
	tc := tls.Client(raw, cfg)
	hctx := ctx
	if t.TLSHandshakeTimeout > 0 {
		var cancel context.CancelFunc
		hctx, cancel = context.WithTimeout(ctx, t.TLSHandshakeTimeout)
		defer cancel()
	}
	if err := tc.HandshakeContext(hctx); err != nil {
		_ = raw.Close()
		return nil, err
	}
	return tc, nil
}

// ownConn is an upgraded connection of its own: it reads first what was
// buffered with the exchange. Its reads are safe for concurrent use where
// the connection's are (Accept's; Do's go through a bufio.Reader).
type ownConn struct {
	net.Conn
	r    io.Reader   // Do's: the reader of the answer; nil: mu, ahead, then Conn
	stop func() bool // nil: nothing to stop

	mu    sync.Mutex
	ahead []byte // Accept's: what the server had read ahead
}

func (c *ownConn) Read(p []byte) (int, error) {
	if c.r != nil {
		return c.r.Read(p)
	}
	c.mu.Lock()
	if len(c.ahead) > 0 {
		n := copy(p, c.ahead)
		c.ahead = c.ahead[n:]
		c.mu.Unlock()
		return n, nil
	}
	c.mu.Unlock()
	return c.Conn.Read(p)
}

func (c *ownConn) Close() error {
	if c.stop != nil {
		c.stop()
	}
	return c.Conn.Close()
}

// CloseWrite sends a TLS connection's close_notify, or a TCP connection's
// FIN.
func (c *ownConn) CloseWrite() error { return CloseWrite(c.Conn) }

// errNoHalfClose is what CloseWrite says where a connection cannot end one
// way alone.
var errNoHalfClose = fmt.Errorf("close write: %w", errors.ErrUnsupported)

// CloseWrite half-closes conn (a *tls.Conn, a *net.TCPConn) where it can.
func CloseWrite(conn any) error {
	if cw, ok := conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errNoHalfClose
}

// Accept answers an upgrade to proto with 101 on conn and buf, hijacked
// from the request's handler, and returns the stream. It reads what the
// server had read ahead, then conn itself: reading on through the server's
// reader would cancel the request's context at the end of the client's
// input (its CloseWrite), which is not the end of the exchange. Its reads
// are safe for concurrent use (see CloseLingering).
func Accept(conn net.Conn, buf *bufio.ReadWriter, proto string) (Stream, error) {
	if _, err := io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+proto+"\r\n\r\n"); err != nil {
		_ = conn.Close()
		return nil, err
	}
	c := &ownConn{Conn: conn}
	if n := buf.Reader.Buffered(); n > 0 {
		ahead, _ := buf.Reader.Peek(n)
		c.ahead = bytes.Clone(ahead)
	}
	return c, nil
}

// Linger is how long CloseLingering and Splice wait for the other side to
// end its input once this side's output has ended.
const Linger = 5 * time.Second

// CloseLingering closes s after the end of its output has reached the
// other side: it ends the output (CloseWrite), then reads and drops what
// the other side still sends until it ends its input too, for Linger at
// most, and closes s. Closing a TCP connection with input unread resets
// it, and a reset throws away what the other side has yet to receive (the
// end of a shell's output, its exit status). Something else may still be
// reading s (a copy of the input that has nowhere to go now): s's reads
// must be safe for concurrent use, as Accept's are.
func CloseLingering(s Stream) {
	d, ok := s.(interface{ SetReadDeadline(time.Time) error })
	if ok && s.CloseWrite() == nil && d.SetReadDeadline(time.Now().Add(Linger)) == nil {
		_, _ = io.Copy(io.Discard, s)
	}
	_ = s.Close()
}

// closeBoth closes the connection under an answer's body with the body.
type closeBoth struct {
	io.ReadCloser
	close func()
}

func (b *closeBoth) Close() error {
	err := b.ReadCloser.Close()
	b.close()
	return err
}

// viaClient upgrades through hc: the stream closes both ways only.
func viaClient(hc *http.Client, req *http.Request) (Stream, *http.Response, error) {
	res, err := hc.Do(req)
	if err != nil {
		return nil, nil, err
	}
	if res.StatusCode != http.StatusSwitchingProtocols {
		return nil, res, nil
	}
	rwc, ok := res.Body.(io.ReadWriteCloser)
	if !ok {
		_ = res.Body.Close()
		return nil, nil, errors.New("upgrade: the server upgraded without a stream")
	}
	return bothWays{rwc}, res, nil
}

// bothWays is a stream that cannot end one way alone.
type bothWays struct{ io.ReadWriteCloser }

func (s bothWays) CloseWrite() error { return errNoHalfClose }

// Splice copies a and b into each other until b, the side that answers,
// is done, or until ctx ends. The end of a's input is passed on to b
// (CloseWrite), so b can still answer; a failure of either side, and the
// end of ctx, reset both (Abort), so the other side learns at once that
// the stream was given up, not ended. When b is done, so is a's output
// (CloseWrite), and a has up to Linger to end its input too before both
// are closed (see CloseLingering). Splice returns once both copies have.
func Splice(ctx context.Context, a, b Stream) {
	giveUp := func() {
		Abort(a)
		Abort(b)
	}
	stop := context.AfterFunc(ctx, giveUp)
	defer stop()
	in := make(chan struct{})
	go func() {
		defer close(in)
		_, err := io.Copy(b, a)
		if err == nil && b.CloseWrite() == nil {
			return
		}
		giveUp()
	}()
	_, err := io.Copy(a, b)
	if err != nil || a.CloseWrite() != nil {
		giveUp()
		<-in
		return
	}
	linger := time.NewTimer(Linger)
	select {
	case <-in:
	case <-linger.C:
	}
	linger.Stop()
	_ = a.Close()
	_ = b.Close()
	<-in
}
