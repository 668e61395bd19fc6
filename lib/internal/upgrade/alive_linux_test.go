package upgrade

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Gone tells a peer that reset the connection, not one that only ended its
// input.
func TestGone(t *testing.T) {
	srv, streams := upgraded(t)
	client, server := serverSide(t, srv, streams)
	assert.NoError(t, Gone(server, time.Minute))
	require.NoError(t, client.CloseWrite())
	assert.NoError(t, Gone(server, time.Minute), "the end of the input is not the peer gone")
	Abort(client)
	// The reset reaches the server's socket asynchronously; writing draws
	// it when the peer's close went out as a FIN instead.
	assert.Eventually(t, func() bool {
		_, _ = server.Write([]byte("x"))
		return Gone(server, time.Minute) != nil
	}, 10*time.Second, 10*time.Millisecond)
	assert.ErrorIs(t, Gone(server, time.Minute), ErrGone)
}

// gone's judgement: a closed connection, or data unacknowledged for longer
// than the stall; a peer that acknowledges (a full window included) is
// there.
func TestGoneJudgement(t *testing.T) {
	const stall = 20 * time.Second
	for _, tc := range []struct {
		name     string
		state    uint8
		unacked  uint32
		sinceAck time.Duration
		gone     bool
	}{
		{"established, idle", 1, 0, time.Hour, false},
		{"half-closed by the peer", 8, 0, time.Hour, false},
		{"in flight, acknowledged lately", 1, 3, time.Second, false},
		{"in flight, unacknowledged past the stall", 1, 1, stall + time.Second, true},
		{"reset or timed out", tcpClose, 0, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := gone(tc.state, tc.unacked, tc.sinceAck, stall)
			if tc.gone {
				assert.ErrorIs(t, err, ErrGone)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}
