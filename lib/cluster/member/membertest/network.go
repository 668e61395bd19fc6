// Package membertest helps test code that runs on a cluster of members: a
// Network whose transports can cut links and drop packets, and a harness
// that starts members in one process on 127.0.0.1.
package membertest

import (
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// ErrCut is returned when dialling across a cut link.
var ErrCut = errors.New("link cut")

// Network decides which members may talk. Every member of a test must use a
// transport from the same Network: a link is cut on the sending side (packets
// dropped, dials refused) and both ends see each other's sends blocked, so
// both directions are cut. All methods are safe for concurrent use.
type Network struct {
	mu     sync.Mutex
	byAddr map[string]string // advertised host:port -> member name
	cut    map[[2]string]bool
	drop   float64
}

// NewNetwork returns a network where every link works.
func NewNetwork() *Network {
	return &Network{byAddr: map[string]string{}, cut: map[[2]string]bool{}}
}

func pair(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// Cut cuts the link between members a and b, both ways, packets and streams.
func (n *Network) Cut(a, b string) {
	n.mu.Lock()
	n.cut[pair(a, b)] = true
	n.mu.Unlock()
}

// Partition cuts every link between members of different groups.
func (n *Network) Partition(groups ...[]string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for i, g := range groups {
		for _, h := range groups[i+1:] {
			for _, a := range g {
				for _, b := range h {
					n.cut[pair(a, b)] = true
				}
			}
		}
	}
}

// Heal restores every link and stops dropping packets.
func (n *Network) Heal() {
	n.mu.Lock()
	clear(n.cut)
	n.drop = 0
	n.mu.Unlock()
}

// SetDrop makes every transport drop this share (0..1) of the UDP packets it
// sends. Streams (TCP) are reliable and never dropped, only cut.
func (n *Network) SetDrop(share float64) {
	n.mu.Lock()
	n.drop = share
	n.mu.Unlock()
}

// blocked reports whether a packet or dial from member from to address to
// must fail.
func (n *Network) blocked(from, to string, packet bool) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if name, ok := n.byAddr[to]; ok && n.cut[pair(from, name)] {
		return true
	}
	return packet && n.drop > 0 && rand.Float64() < n.drop
}

// Transport is a memberlist.Transport over memberlist's NetTransport that
// obeys its Network. It only ever filters what it sends: received packets
// and streams pass straight through, since their senders' transports already
// applied the cuts.
type Transport struct {
	net   *Network
	name  string
	inner *memberlist.NetTransport
}

var _ memberlist.NodeAwareTransport = (*Transport)(nil)

// Transport binds a NetTransport for member name on host:port (port 0 picks
// a free one) and registers its address. A transport serves one memberlist:
// a restarted member needs a new one.
func (n *Network) Transport(name, bind string) (*Transport, error) {
	host, p, err := net.SplitHostPort(bind)
	if err != nil {
		return nil, fmt.Errorf("transport %s: %w", name, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return nil, fmt.Errorf("transport %s: bad port %q", name, p)
	}
	inner, err := memberlist.NewNetTransport(&memberlist.NetTransportConfig{
		BindAddrs: []string{host},
		BindPort:  port,
		Logger:    log.New(io.Discard, "", 0),
	})
	if err != nil {
		return nil, fmt.Errorf("transport %s: %w", name, err)
	}
	t := &Transport{net: n, name: name, inner: inner}
	n.mu.Lock()
	n.byAddr[net.JoinHostPort(host, strconv.Itoa(inner.GetAutoBindPort()))] = name
	n.mu.Unlock()
	return t, nil
}

// Addr is the transport's host:port.
func (t *Transport) Addr() string {
	ip, port, err := t.inner.FinalAdvertiseAddr("", 0)
	if err != nil {
		return ""
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(port))
}

// FinalAdvertiseAddr implements memberlist.Transport.
func (t *Transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	return t.inner.FinalAdvertiseAddr(ip, port)
}

// WriteTo implements memberlist.Transport.
func (t *Transport) WriteTo(b []byte, addr string) (time.Time, error) {
	if t.net.blocked(t.name, addr, true) {
		return time.Now(), nil
	}
	return t.inner.WriteTo(b, addr)
}

// WriteToAddress implements memberlist.NodeAwareTransport.
func (t *Transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if t.net.blocked(t.name, a.Addr, true) {
		return time.Now(), nil
	}
	return t.inner.WriteToAddress(b, a)
}

// PacketCh implements memberlist.Transport.
func (t *Transport) PacketCh() <-chan *memberlist.Packet { return t.inner.PacketCh() }

// DialTimeout implements memberlist.Transport.
func (t *Transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if t.net.blocked(t.name, addr, false) {
		return nil, fmt.Errorf("dial %s: %w", addr, ErrCut)
	}
	c, err := t.inner.DialTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return &cutConn{Conn: c, t: t, to: addr}, nil
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (t *Transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if t.net.blocked(t.name, a.Addr, false) {
		return nil, fmt.Errorf("dial %s: %w", a.Addr, ErrCut)
	}
	c, err := t.inner.DialAddressTimeout(a, timeout)
	if err != nil {
		return nil, err
	}
	return &cutConn{Conn: c, t: t, to: a.Addr}, nil
}

// cutConn is a dialled stream that obeys its Network for as long as it is
// open: a write across a cut link closes it and fails, as a long-lived
// connection does when its network breaks. (A stream opened per message
// would be refused at its dial; a member's links are opened once.)
type cutConn struct {
	net.Conn
	t  *Transport
	to string
}

func (c *cutConn) Write(b []byte) (int, error) {
	if c.t.net.blocked(c.t.name, c.to, false) {
		_ = c.Conn.Close()
		return 0, fmt.Errorf("write to %s: %w", c.to, ErrCut)
	}
	return c.Conn.Write(b)
}

// StreamCh implements memberlist.Transport.
func (t *Transport) StreamCh() <-chan net.Conn { return t.inner.StreamCh() }

// Shutdown implements memberlist.Transport: it closes the listeners.
func (t *Transport) Shutdown() error { return t.inner.Shutdown() }
