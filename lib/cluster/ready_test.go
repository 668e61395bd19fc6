package cluster

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/store"
)

// joiningPeers runs alone and says it has not joined until told.
type joiningPeers struct {
	*localPeers
	err atomic.Pointer[error]
}

var _ Joiner = (*joiningPeers)(nil)

func (p *joiningPeers) Joined() error {
	if e := p.err.Load(); e != nil {
		return *e
	}
	return nil
}

// TestReady: a node is not ready before it has started (drivers prepared,
// holdings reconciled), nor while its peers have not joined the cluster it
// was told to join; then it is.
func TestReady(t *testing.T) {
	log := testLogger()
	dir := t.TempDir()
	st, err := store.Open(store.Config{Dir: filepath.Join(dir, "store"), NodeID: "n1"}, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	drv := testdriver.New(drivers.Env{Instance: "test", DataDir: filepath.Join(dir, "test"), NodeName: "n1", Log: log})
	require.NoError(t, drv.Prepare(context.Background(), []byte(`{}`)))
	peers := &joiningPeers{localPeers: &localPeers{self: "n1"}}
	notYet := errors.New("not joined: no member at 10.0.0.1:7701 has answered yet")
	peers.err.Store(&notYet)
	n, err := New(Config{Name: "n1", OfferTimeout: time.Second, ResyncInterval: time.Second}, log, st,
		[]Instance{{Name: "test", Type: "test", Driver: drv}}, peers)
	require.NoError(t, err)
	peers.deliver = n.Deliver

	assert.ErrorContains(t, n.Ready(), "node is starting")
	require.NoError(t, n.Start(context.Background()))
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		assert.NoError(t, n.Stop(ctx))
	})
	assert.Equal(t, notYet, n.Ready(), "started, but not joined")
	peers.err.Store(nil)
	assert.NoError(t, n.Ready())
}
