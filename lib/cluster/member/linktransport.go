package member

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// linkTransport is the memberlist transport of a Member: memberlist's own
// (NetTransport on Bind, or the one configured), which it wraps so that
// links (linkframe.go) share its listener. Every stream it accepts starts
// with a byte that tells a link from one of memberlist's streams: links go
// to the link server, the rest to memberlist, the byte put back.
//
// Concurrency: memberlist calls every method concurrently; StreamCh's
// consumer is memberlist's stream loop, which must not be held up, so each
// accepted stream is sorted on a goroutine of its own.
type linkTransport struct {
	inner   memberlist.Transport
	log     *slog.Logger
	timeout time.Duration
	// serve runs an accepted link until it ends.
	serve func(c net.Conn, br *bufio.Reader, timeout time.Duration)

	streams chan net.Conn
	done    chan struct{}
	// innerDown is closed once the inner transport has shut down: demux
	// drains its streams until then, since the inner transport's listener
	// blocks handing on a stream it accepted as the shutdown began.
	innerDown chan struct{}
	wg        sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	accepted map[net.Conn]bool // open incoming links
}

var _ memberlist.NodeAwareTransport = (*linkTransport)(nil)

func newLinkTransport(inner memberlist.Transport, log *slog.Logger, timeout time.Duration, serve func(net.Conn, *bufio.Reader, time.Duration)) *linkTransport {
	t := &linkTransport{
		inner: inner, log: log, timeout: timeout, serve: serve,
		streams: make(chan net.Conn), done: make(chan struct{}), innerDown: make(chan struct{}),
		accepted: map[net.Conn]bool{},
	}
	t.wg.Add(1)
	go t.demux()
	return t
}

// netTransport binds memberlist's NetTransport on host:port, trying again
// (as memberlist does) when a free port picked for port 0 is taken by the
// time the second protocol binds it.
func netTransport(host string, port int, log *slog.Logger) (*memberlist.NetTransport, error) {
	tries := 1
	if port == 0 {
		tries = 10
	}
	var err error
	for range tries {
		var nt *memberlist.NetTransport
		nt, err = memberlist.NewNetTransport(&memberlist.NetTransportConfig{
			BindAddrs: []string{host}, BindPort: port, Logger: newMemberlistLogger(log),
		})
		if err == nil {
			return nt, nil
		}
	}
	return nil, fmt.Errorf("bind %s: %w", net.JoinHostPort(host, fmt.Sprint(port)), err)
}

// FinalAdvertiseAddr implements memberlist.Transport.
func (t *linkTransport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	return t.inner.FinalAdvertiseAddr(ip, port)
}

// WriteTo implements memberlist.Transport.
func (t *linkTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.inner.WriteTo(b, addr)
}

// WriteToAddress implements memberlist.NodeAwareTransport.
func (t *linkTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if na, ok := t.inner.(memberlist.NodeAwareTransport); ok {
		return na.WriteToAddress(b, a)
	}
	return t.inner.WriteTo(b, a.Addr)
}

// PacketCh implements memberlist.Transport.
func (t *linkTransport) PacketCh() <-chan *memberlist.Packet { return t.inner.PacketCh() }

// DialTimeout implements memberlist.Transport.
func (t *linkTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.inner.DialTimeout(addr, timeout)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (t *linkTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if na, ok := t.inner.(memberlist.NodeAwareTransport); ok {
		return na.DialAddressTimeout(a, timeout)
	}
	return t.inner.DialTimeout(a.Addr, timeout)
}

// StreamCh implements memberlist.Transport: the accepted streams that are
// memberlist's.
func (t *linkTransport) StreamCh() <-chan net.Conn { return t.streams }

// Shutdown implements memberlist.Transport: it closes the incoming links and
// the inner transport and waits for the goroutines it started.
func (t *linkTransport) Shutdown() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	for c := range t.accepted {
		_ = c.Close()
	}
	t.mu.Unlock()
	close(t.done)
	err := t.inner.Shutdown()
	close(t.innerDown)
	t.wg.Wait()
	return err
}

// demux sorts the inner transport's accepted streams; once the transport
// shuts down it closes them, until the inner transport is down.
func (t *linkTransport) demux() {
	defer t.wg.Done()
	for {
		select {
		case <-t.innerDown:
			return
		case c, ok := <-t.inner.StreamCh():
			if !ok {
				return // (a transport that closes it has no more)
			}
			select {
			case <-t.done:
				_ = c.Close()
			default:
				t.wg.Add(1)
				go t.sort(c)
			}
		}
	}
}

// sort reads an accepted stream's first byte and hands the stream on.
func (t *linkTransport) sort(c net.Conn) {
	defer t.wg.Done()
	_ = c.SetReadDeadline(time.Now().Add(t.timeout))
	br := bufio.NewReaderSize(c, 4<<10)
	first, err := br.Peek(1)
	_ = c.SetReadDeadline(time.Time{})
	if err != nil {
		_ = c.Close()
		return
	}
	if first[0] == linkMagic {
		t.serveLink(c, br)
		return
	}
	select {
	case t.streams <- &peekedConn{Conn: c, r: br}:
	case <-t.done:
		_ = c.Close()
	}
}

// serveLink runs an incoming link until it ends or the transport shuts
// down.
func (t *linkTransport) serveLink(c net.Conn, br *bufio.Reader) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		_ = c.Close()
		return
	}
	t.accepted[c] = true
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.accepted, c)
		t.mu.Unlock()
		_ = c.Close()
	}()
	t.serve(c, br, t.timeout)
}

// peekedConn is an accepted stream whose first bytes were read into r.
type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (p *peekedConn) Read(b []byte) (int, error) { return p.r.Read(b) }

// errLinkClosed is the error of a send on a link that was closed.
var errLinkClosed = errors.New("link closed")
