package member

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// links are this member's outgoing links (linkframe.go), one per peer,
// dialled on the first message to it and dropped when a send fails or the
// peer leaves, dies or comes back; the next message dials again.
type links struct {
	self    string
	label   string
	keys    *memberlist.Keyring
	tr      *linkTransport
	timeout time.Duration

	mu     sync.Mutex
	closed bool
	byPeer map[string]*link
	// dialing serialises the dials to one peer.
	dialing map[string]*sync.Mutex
}

func newLinks(self, label string, keys *memberlist.Keyring, tr *linkTransport, timeout time.Duration) *links {
	return &links{self: self, label: label, keys: keys, tr: tr, timeout: timeout,
		byPeer: map[string]*link{}, dialing: map[string]*sync.Mutex{}}
}

// send writes msg to peer at addr over its link, dialling one when there is
// none. It returns once msg is written to the connection: like a reliable
// send, not a receipt.
func (ls *links) send(peer, addr string, msg []byte) error {
	l, err := ls.get(peer, addr)
	if err != nil {
		return err
	}
	if err := l.send(msg); err != nil {
		ls.drop(peer, l)
		return err
	}
	return nil
}

// get returns the open link to peer at addr, dialling it when needed.
func (ls *links) get(peer, addr string) (*link, error) {
	ls.mu.Lock()
	if ls.closed {
		ls.mu.Unlock()
		return nil, ErrNotRunning
	}
	if l := ls.byPeer[peer]; l != nil && l.addr == addr {
		ls.mu.Unlock()
		return l, nil
	}
	dm := ls.dialing[peer]
	if dm == nil {
		dm = &sync.Mutex{}
		ls.dialing[peer] = dm
	}
	ls.mu.Unlock()

	dm.Lock()
	defer dm.Unlock()
	ls.mu.Lock()
	if l := ls.byPeer[peer]; l != nil && l.addr == addr {
		ls.mu.Unlock()
		return l, nil // dialled meanwhile
	}
	ls.mu.Unlock()
	l, err := ls.dial(peer, addr)
	if err != nil {
		return nil, err
	}
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		l.close()
		return nil, ErrNotRunning
	}
	if old := ls.byPeer[peer]; old != nil {
		old.close()
	}
	ls.byPeer[peer] = l
	return l, nil
}

// dial opens a link to peer at addr through the transport and writes its
// preamble.
func (ls *links) dial(peer, addr string) (*link, error) {
	conn, err := ls.tr.DialAddressTimeout(memberlist.Address{Addr: addr, Name: peer}, ls.timeout)
	if err != nil {
		return nil, fmt.Errorf("link to %s: %w", peer, err)
	}
	s, err := newSealer(ls.keys, ls.label)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	pre, err := preamble(ls.self, ls.label, ls.keys != nil)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	hello, err := s.appendFrame(pre, []byte(ls.self))
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	l := &link{addr: addr, conn: conn, w: bufio.NewWriterSize(conn, 64<<10), seal: s, timeout: ls.timeout, lead: make(chan struct{}, 1)}
	if _, err := l.w.Write(hello); err != nil { // flushed with the first message
		_ = conn.Close()
		return nil, fmt.Errorf("link to %s: %w", peer, err)
	}
	return l, nil
}

// drop forgets l, peer's link, and closes it.
func (ls *links) drop(peer string, l *link) {
	ls.mu.Lock()
	if ls.byPeer[peer] == l {
		delete(ls.byPeer, peer)
	}
	ls.mu.Unlock()
	l.close()
}

// reset closes the link to peer, which left or died: a message for it
// fails at once instead of filling a connection nobody reads, and a peer
// that comes back gets a new link. (Its links to this member end when its
// process does, or when TCP's keepalive finds them dead; a link that comes
// back after a partition may still bring late frames, which apply as any
// late message does.)
func (ls *links) reset(peer string) {
	ls.mu.Lock()
	l := ls.byPeer[peer]
	delete(ls.byPeer, peer)
	ls.mu.Unlock()
	if l != nil {
		l.close()
	}
}

// close closes every outgoing link; sends fail from then on.
func (ls *links) close() {
	ls.mu.Lock()
	ls.closed = true
	all := ls.byPeer
	ls.byPeer = map[string]*link{}
	ls.mu.Unlock()
	for _, l := range all {
		l.close()
	}
}

// link is one open outgoing link. Messages sent at once share a write: the
// first sender to take the lead writes every message queued by then and
// flushes, and wakes the others (as the store's group commit does).
type link struct {
	addr    string
	conn    net.Conn
	w       *bufio.Writer
	seal    *sealer
	timeout time.Duration

	qmu    sync.Mutex
	queue  []*linkSend
	failed error // set once a write failed; every later send fails

	lead chan struct{} // capacity 1: held by the writer
	buf  []byte        // frames being written, reused; under lead
}

type linkSend struct {
	msg  []byte
	done chan error
}

// send queues msg and returns once it is written or the write failed.
func (l *link) send(msg []byte) error {
	s := &linkSend{msg: msg, done: make(chan error, 1)}
	l.qmu.Lock()
	if l.failed != nil {
		err := l.failed
		l.qmu.Unlock()
		return err
	}
	l.queue = append(l.queue, s)
	l.qmu.Unlock()
	for {
		select {
		case err := <-s.done:
			return err
		case l.lead <- struct{}{}:
			l.writeQueued()
		}
	}
}

// writeQueued writes what is queued, in one flush. The caller holds the
// lead, which it gives back.
func (l *link) writeQueued() {
	defer func() { <-l.lead }()
	l.qmu.Lock()
	batch := l.queue
	l.queue = nil
	failed := l.failed
	l.qmu.Unlock()
	if len(batch) == 0 {
		return
	}
	err := failed
	if err == nil {
		err = l.write(batch)
	}
	if err != nil {
		l.qmu.Lock()
		if l.failed == nil {
			l.failed = err
		}
		l.qmu.Unlock()
		_ = l.conn.Close()
	}
	for _, s := range batch {
		s.done <- err
	}
}

// write frames batch and flushes it within the timeout.
func (l *link) write(batch []*linkSend) error {
	buf := l.buf[:0]
	for _, s := range batch {
		var err error
		if buf, err = l.seal.appendFrame(buf, s.msg); err != nil {
			return err
		}
	}
	l.buf = buf
	if cap(l.buf) > 1<<20 {
		l.buf = nil // a large batch's buffer is not kept
	}
	_ = l.conn.SetWriteDeadline(time.Now().Add(l.timeout))
	if _, err := l.w.Write(buf); err != nil {
		return err
	}
	return l.w.Flush()
}

// close closes the connection; queued and later sends fail.
func (l *link) close() {
	l.qmu.Lock()
	if l.failed == nil {
		l.failed = errLinkClosed
	}
	l.qmu.Unlock()
	_ = l.conn.Close()
}

// serveLink reads an incoming link's preamble, checks it and hands each of
// its messages to dispatch until it ends. The transport calls it from its
// first accept on, which can come before Start has finished (a peer dialling
// a member that restarts): it reads nothing Start sets but under m.mu.
func (m *Member) serveLink(c net.Conn, br *bufio.Reader, timeout time.Duration) {
	// The preamble and the hello must come within the timeout: until they
	// have, the link is nobody's.
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	hello, err := readPreamble(br)
	if err != nil {
		m.log.Debug("link refused", "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	keys := m.Keyring()
	switch {
	case hello.label != m.cfg.Label:
		err = fmt.Errorf("label %q, want %q", hello.label, m.cfg.Label)
	case keys != nil && !hello.sealed:
		err = errors.New("frames in the clear, this member has a key")
	case keys == nil && hello.sealed:
		err = errors.New("sealed frames, this member has no key")
	}
	if err != nil {
		m.log.Warn("link refused", "from", hello.from, "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	o := &opener{reader: br, aad: linkAAD(m.cfg.Label)}
	if hello.sealed {
		o.keys = keys
	}
	if err := o.hello(hello.from); err != nil {
		m.log.Warn("link refused", "from", hello.from, "remote", c.RemoteAddr().String(), "err", err)
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	for {
		msg, err := o.next()
		if err != nil {
			m.log.Debug("link ended", "from", hello.from, "err", err)
			return
		}
		m.dispatch(msg)
	}
}
