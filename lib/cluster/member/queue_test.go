package member

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// A peer's queue keeps one record per object: a newer write replaces the
// queued older one in place, so a hot object is sent once per batch.
func TestPeerQueueCoalescesByKey(t *testing.T) {
	q := newPeerQueue()
	s := &senders{byPeer: map[string]*peerQueue{"p": q}, running: 1, idle: make(chan struct{})}
	rec := func(name string, hlc uint64) store.Record {
		v := types.Version{HLC: hlc, Node: "n1"}
		return store.Record{Kind: types.KindMachineClaim, Name: name, Version: v,
			Facets: []store.FacetRecord{{Name: "spec", Version: v, Data: []byte(`{}`)}}}
	}
	for i := uint64(1); i <= 100; i++ {
		q.Add(rec("hot", i))
		q.Add(rec(fmt.Sprintf("c%d", i%3), i))
	}
	got := s.next(context.Background(), "p", q)
	require.Len(t, got, 4, "hot, c1, c2, c0: one each")
	assert.Equal(t, "hot", got[0].Name, "in the order first queued")
	assert.Equal(t, uint64(100), got[0].Version.HLC, "the newest write")
	q.Add(rec("hot", 101))
	q.Add(rec("hot", 102))
	got = s.next(context.Background(), "p", q)
	require.Len(t, got, 1, "a write after the batch was taken is queued again, once")
	assert.Equal(t, uint64(102), got[0].Version.HLC)
	assert.Zero(t, q.Bytes())
}

// Each pushed version is relayed once; the oldest are forgotten past
// relayedKeep.
func TestRelayedVersionsOnce(t *testing.T) {
	var r relayedVersions
	v := types.Version{HLC: 1, Node: "a"}
	assert.True(t, r.first("K", "x", v))
	assert.False(t, r.first("K", "x", v), "the same version again")
	assert.True(t, r.first("K", "x", types.Version{HLC: 2, Node: "a"}), "a newer version")
	assert.True(t, r.first("K", "y", v), "another object")
	for i := range relayedKeep {
		r.first("K", fmt.Sprint("fill", i), v)
	}
	assert.True(t, r.first("K", "x", v), "forgotten past relayedKeep")
	assert.LessOrEqual(t, len(r.seen), relayedKeep)
}
