package member

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/wire"
	"github.com/hf-fleet/hf/lib/store"
)

// Frames come out as they went in, sealed or not; a sealed frame opens with
// any installed key (a rotation), not with another cluster's key or label.
func TestLinkFrames(t *testing.T) {
	k1, k2 := []byte("0123456789abcdef"), []byte("fedcba9876543210")
	ring := func(primary []byte, others ...[]byte) *memberlist.Keyring {
		kr, err := memberlist.NewKeyring(others, primary)
		require.NoError(t, err)
		return kr
	}
	// The first message is long enough never to turn up in 300 KB of
	// ciphertext by chance ("one" did, in ~2 % of runs).
	msgs := [][]byte{[]byte("the first message, readable in the clear only"), bytes.Repeat([]byte{7}, 300<<10), {}}
	frames := func(keys *memberlist.Keyring, label string) []byte {
		s, err := newSealer(keys, label)
		require.NoError(t, err)
		var out []byte
		for _, m := range msgs {
			out, err = s.appendFrame(out, m)
			require.NoError(t, err)
		}
		return out
	}
	read := func(b []byte, keys *memberlist.Keyring, label string) ([][]byte, error) {
		o := &opener{keys: keys, aad: linkAAD(label), reader: bufio.NewReader(bytes.NewReader(b))}
		var got [][]byte
		for range msgs {
			m, err := o.next()
			if err != nil {
				return got, err
			}
			got = append(got, bytes.Clone(m))
		}
		return got, nil
	}

	got, err := read(frames(nil, ""), nil, "")
	require.NoError(t, err)
	assert.Equal(t, msgs, got, "in the clear")

	sealed := frames(ring(k1), "lab")
	assert.NotContains(t, string(sealed), string(msgs[0]), "sealed")
	assert.NotContains(t, string(sealed), string(msgs[1][:64]), "sealed")
	got, err = read(sealed, ring(k2, k1), "lab")
	require.NoError(t, err)
	assert.Equal(t, msgs, got, "opened with a key of the ring")
	_, err = read(sealed, ring(k2), "lab")
	assert.ErrorContains(t, err, "no installed key")
	_, err = read(sealed, ring(k1), "other")
	assert.ErrorContains(t, err, "no installed key", "another label")

	huge := []byte{0x7f, 0xff, 0xff, 0xff}
	_, err = read(huge, nil, "")
	assert.ErrorContains(t, err, "more than")

	// The hello must open, name the preamble's member and be small.
	hello := func(b []byte, keys *memberlist.Keyring) error {
		o := &opener{keys: keys, aad: linkAAD("lab"), reader: bufio.NewReader(bytes.NewReader(b))}
		return o.hello("n1")
	}
	s, err := newSealer(ring(k1), "lab")
	require.NoError(t, err)
	good, err := s.appendFrame(nil, []byte("n1"))
	require.NoError(t, err)
	require.NoError(t, hello(good, ring(k1)))
	wrong, err := s.appendFrame(nil, []byte("n2"))
	require.NoError(t, err)
	assert.ErrorContains(t, hello(wrong, ring(k1)), "names")
	assert.ErrorContains(t, hello(good, ring(k2)), "no installed key")
	big, err := s.appendFrame(nil, bytes.Repeat([]byte("n"), helloMax))
	require.NoError(t, err)
	assert.ErrorContains(t, hello(big, ring(k1)), "more than 1024", "nothing large before the hello")

	var b bytes.Buffer
	pre, err := preamble("n1", "lab", true)
	require.NoError(t, err)
	b.Write(pre)
	h, err := readPreamble(bufio.NewReader(&b))
	require.NoError(t, err)
	assert.Equal(t, linkHello{from: "n1", label: "lab", sealed: true}, h)
}

// linkPair starts two members on 127.0.0.1 with a key and a label, b joined
// to a; old makes b a member of an earlier release, which serves no links.
func linkPair(t *testing.T, old bool) (a, b *Member, got func() []wire.Message) {
	t.Helper()
	var mu sync.Mutex
	var msgs []wire.Message
	start := func(name string, old bool, join ...string) *Member {
		st, err := store.Open(store.Config{InMemory: true, NodeID: name, GCInterval: -1}, slog.New(slog.DiscardHandler))
		require.NoError(t, err)
		t.Cleanup(func() { _ = st.Close() })
		cfg := Config{Name: name, Bind: "127.0.0.1:0", Join: join, Key: []byte("0123456789abcdef"), Label: "lab",
			OnMessage: func(m wire.Message) { mu.Lock(); msgs = append(msgs, m); mu.Unlock() }}
		m, err := New(cfg, slog.New(slog.DiscardHandler), st)
		require.NoError(t, err)
		m.noLinks = old
		require.NoError(t, m.Start(t.Context()))
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_ = m.Stop(ctx)
		})
		return m
	}
	a = start("a", false)
	b = start("b", old, a.Addr())
	require.Eventually(t, func() bool { return len(a.Members()) == 2 && len(b.Members()) == 2 }, 10*time.Second, 10*time.Millisecond)
	return a, b, func() []wire.Message {
		mu.Lock()
		defer mu.Unlock()
		return append([]wire.Message(nil), msgs...)
	}
}

func (m *Member) linkCounts() (out, in int) {
	m.links.mu.Lock()
	out = len(m.links.byPeer)
	m.links.mu.Unlock()
	m.tr.mu.Lock()
	in = len(m.tr.accepted)
	m.tr.mu.Unlock()
	return out, in
}

// A member's messages to a peer share one link, whatever their number and
// however many are sent at once.
func TestMessagesShareALink(t *testing.T) {
	a, b, got := linkPair(t, false)
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Go(func() {
			assert.NoError(t, a.Send(t.Context(), wire.Message{Type: wire.MsgOffer, From: "a", To: "b", Claim: fmt.Sprintf("c%d", i), Round: 1}))
		})
	}
	wg.Wait()
	require.Eventually(t, func() bool { return len(got()) == 200 }, 5*time.Second, 10*time.Millisecond)
	out, _ := a.linkCounts()
	_, in := b.linkCounts()
	assert.Equal(t, 1, out, "a holds one link, to b")
	assert.Equal(t, 1, in, "b serves one link, from a")

	// A link that breaks is dialled again by the next message.
	a.links.mu.Lock()
	l := a.links.byPeer["b"]
	a.links.mu.Unlock()
	_ = l.conn.Close()
	var sendErr error
	for i := range 3 { // the first may fail on the closed connection
		if sendErr = a.Send(t.Context(), wire.Message{Type: wire.MsgOffer, From: "a", To: "b", Claim: fmt.Sprintf("again%d", i), Round: 1}); sendErr == nil {
			break
		}
	}
	require.NoError(t, sendErr)
	require.Eventually(t, func() bool { return got()[len(got())-1].Claim != "c199" }, 5*time.Second, 10*time.Millisecond)
}

// A peer of an earlier release, which says nothing of links in its
// metadata, gets its messages by memberlist's reliable send, and sends its
// own so.
func TestOlderPeerGetsReliableSends(t *testing.T) {
	a, b, got := linkPair(t, true)
	require.NoError(t, a.Send(t.Context(), wire.Message{Type: wire.MsgOffer, From: "a", To: "b", Claim: "to-old", Round: 1}))
	require.NoError(t, b.Send(t.Context(), wire.Message{Type: wire.MsgOffer, From: "b", To: "a", Claim: "from-old", Round: 1}))
	require.Eventually(t, func() bool { return len(got()) == 2 }, 5*time.Second, 10*time.Millisecond)
	outA, inA := a.linkCounts()
	outB, inB := b.linkCounts()
	assert.Equal(t, [4]int{0, 0, 0, 0}, [4]int{outA, inA, outB, inB}, "no link either way")
}

// A stranger that connects to the gossip port and starts a link without
// the key is dropped before it can make the member hold a large frame,
// and one that says nothing is dropped at the timeout.
func TestLinkStrangerDropped(t *testing.T) {
	a, _, got := linkPair(t, false)
	conn, err := net.Dial("tcp", a.Addr())
	require.NoError(t, err)
	defer conn.Close()
	pre, err := preamble("b", "lab", true)
	require.NoError(t, err)
	huge := []byte{0x00, 0x3f, 0xff, 0xff} // a 4 MB frame to come
	_, err = conn.Write(append(pre, huge...))
	require.NoError(t, err)
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(5*time.Second)))
	_, err = conn.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the member closed the link")
	assert.Empty(t, got(), "nothing was delivered")
}

// acceptingTransport is an inner transport whose listener, like
// memberlist's NetTransport's, hands on a stream it accepted as the shutdown
// began, blocking until someone takes it.
type acceptingTransport struct {
	memberlist.Transport
	streams chan net.Conn
	closed  chan net.Conn
}

func (a *acceptingTransport) StreamCh() <-chan net.Conn { return a.streams }

func (a *acceptingTransport) Shutdown() error {
	c1, c2 := net.Pipe()
	a.streams <- c1 // accepted just now: blocks until it is taken
	a.closed <- c2
	return nil
}

// A stream the inner transport accepts while the transport shuts down is
// taken and closed, so the shutdown ends (it hung a member's Kill for ever
// in a -race run of the package).
func TestLinkTransportShutdownDrainsAccepts(t *testing.T) {
	inner := &acceptingTransport{streams: make(chan net.Conn), closed: make(chan net.Conn, 1)}
	tr := newLinkTransport(inner, slog.New(slog.DiscardHandler), time.Second, func(net.Conn, *bufio.Reader, time.Duration) {})
	done := make(chan error, 1)
	go func() { done <- tr.Shutdown() }()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown hangs on a stream accepted as it began")
	}
	peer := <-inner.closed
	_ = peer.SetReadDeadline(time.Now().Add(time.Second))
	_, err := peer.Read(make([]byte, 1))
	assert.ErrorIs(t, err, io.EOF, "the late stream was closed")
}
