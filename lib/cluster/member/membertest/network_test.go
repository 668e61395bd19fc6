package membertest

import (
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// delivered reports whether a packet from one transport reaches the other.
func delivered(t *testing.T, from, to *Transport) bool {
	t.Helper()
	_, err := from.WriteTo([]byte("ping"), to.Addr())
	require.NoError(t, err)
	select {
	case p := <-to.PacketCh():
		assert.Equal(t, "ping", string(p.Buf))
		return true
	case <-time.After(200 * time.Millisecond):
		return false
	}
}

// dials reports whether a stream from one transport to the other opens.
func dials(t *testing.T, from, to *Transport) bool {
	t.Helper()
	conn, err := from.DialTimeout(to.Addr(), time.Second)
	if err != nil {
		assert.ErrorIs(t, err, ErrCut)
		return false
	}
	_ = conn.Close()
	select {
	case c := <-to.StreamCh():
		_ = c.Close()
	case <-time.After(time.Second):
		t.Fatal("accepted stream not handed over")
	}
	return true
}

// transports makes a transport on n for each name, shut down by the test's
// cleanup.
func transports(t *testing.T, n *Network, names ...string) []*Transport {
	t.Helper()
	out := make([]*Transport, len(names))
	for i, name := range names {
		tr, err := n.Transport(name, "127.0.0.1:0")
		require.NoError(t, err)
		t.Cleanup(func() { _ = tr.Shutdown() })
		out[i] = tr
	}
	return out
}

func TestNetwork(t *testing.T) {
	n := NewNetwork()
	trs := transports(t, n, "a", "b", "c")
	a, b, c := trs[0], trs[1], trs[2]

	assert.True(t, delivered(t, a, b))
	assert.True(t, dials(t, a, b))

	n.Cut("a", "b")
	assert.False(t, delivered(t, a, b))
	assert.False(t, delivered(t, b, a))
	assert.False(t, dials(t, a, b))
	assert.False(t, dials(t, b, a))
	assert.True(t, delivered(t, a, c), "other links stay")
	assert.True(t, dials(t, c, b))

	n.Heal()
	assert.True(t, delivered(t, b, a))
	assert.True(t, dials(t, b, a))

	n.Partition([]string{"a"}, []string{"b", "c"})
	assert.False(t, delivered(t, c, a))
	assert.False(t, dials(t, a, c))
	assert.True(t, delivered(t, b, c), "inside a group")
	n.Heal()

	n.SetDrop(1)
	assert.False(t, delivered(t, a, b), "packets dropped")
	assert.True(t, dials(t, a, b), "streams are never dropped")
	n.SetDrop(0)
	assert.True(t, delivered(t, a, b))
}

// A stream dialled before a cut breaks at its next write across it.
func TestNetworkCutsOpenStreams(t *testing.T) {
	n := NewNetwork()
	trs := transports(t, n, "a", "b")
	a, b := trs[0], trs[1]

	conn, err := a.DialTimeout(b.Addr(), time.Second)
	require.NoError(t, err)
	defer conn.Close()
	var in net.Conn
	select {
	case in = <-b.StreamCh():
		defer in.Close()
	case <-time.After(time.Second):
		t.Fatal("accepted stream not handed over")
	}
	_, err = conn.Write([]byte("x"))
	require.NoError(t, err)
	n.Cut("a", "b")
	_, err = conn.Write([]byte("y"))
	assert.ErrorIs(t, err, ErrCut)
	buf := make([]byte, 4)
	k, _ := in.Read(buf)
	assert.Equal(t, "x", string(buf[:k]), "what was written before the cut arrives")
}
