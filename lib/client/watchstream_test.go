package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/client/clienttest"
	"github.com/hf-fleet/hf/lib/types"
)

// next receives one event or fails the test after a generous deadline.
func next(t *testing.T, ch <-chan client.WatchEvent) client.WatchEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "watch channel closed early")
		return ev
	case <-time.After(5 * time.Second):
		require.FailNow(t, "no watch event within 5s")
	}
	return client.WatchEvent{}
}

func TestWatch(t *testing.T) {
	srv := clienttest.New(t)
	c := newClient(t, srv, clienttest.Token)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	ch, err := c.Watch(ctx, []string{"machineclaims"}, 0)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return srv.Watchers() == 1 }, 5*time.Second, 5*time.Millisecond)

	// A node write is filtered out by the kinds.
	srv.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "n1"}})
	_, err = c.Create(ctx, claim("c1", "small", nil))
	require.NoError(t, err)

	ev := next(t, ch)
	assert.Equal(t, client.EventPut, ev.Type)
	assert.Equal(t, types.KindMachineClaim, ev.Kind)
	assert.Equal(t, "c1", ev.Name)
	assert.Equal(t, uint64(2), ev.Seq)
	require.IsType(t, &types.MachineClaim{}, ev.Object)

	require.NoError(t, c.Delete(ctx, types.KindMachineClaim, "c1"))
	ev = next(t, ch)
	assert.Equal(t, client.EventDelete, ev.Type)
	assert.Equal(t, "c1", ev.Name)

	reqs := srv.Requests()
	assert.Equal(t, "kinds=MachineClaim", reqs[0].Query)

	cancel()
	require.Eventually(t, func() bool {
		select {
		case _, ok := <-ch:
			return !ok
		default:
			return false
		}
	}, 5*time.Second, 5*time.Millisecond, "channel closes after ctx ends, with no error event")
}

func TestWatchSinceReplays(t *testing.T) {
	srv := clienttest.New(t)
	c := newClient(t, srv, clienttest.Token)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	for _, n := range []string{"a", "b", "c"} {
		srv.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: n}})
	}
	ch, err := c.Watch(ctx, nil, 1)
	require.NoError(t, err)
	assert.Equal(t, "b", next(t, ch).Name)
	assert.Equal(t, "c", next(t, ch).Name)
}

func TestWatchWithoutSinceStartsWithCurrentObjects(t *testing.T) {
	srv := clienttest.New(t)
	c := newClient(t, srv, clienttest.Token)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	srv.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "a"}})
	srv.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "gone"}})
	srv.Remove(types.KindNode, "gone")
	ch, err := c.Watch(ctx, []string{"nodes"}, 0)
	require.NoError(t, err)
	ev := next(t, ch)
	assert.Equal(t, "a", ev.Name)
	assert.Equal(t, uint64(1), ev.Seq)
	srv.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "b"}})
	assert.Equal(t, "b", next(t, ch).Name, "then live changes")
}

func TestWatchStreamEnds(t *testing.T) {
	srv := clienttest.New(t)
	c := newClient(t, srv, clienttest.Token)
	ch, err := c.Watch(context.Background(), []string{types.KindMachine}, 0)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return srv.Watchers() == 1 }, 5*time.Second, 5*time.Millisecond)
	srv.CloseWatches()
	ev := next(t, ch)
	assert.Equal(t, client.EventError, ev.Type)
	assert.ErrorIs(t, ev.Err, client.ErrStreamClosed)
	_, ok := <-ch
	assert.False(t, ok)
}

func TestWatchErrors(t *testing.T) {
	srv := clienttest.New(t)
	ctx := context.Background()

	_, err := newClient(t, srv, "bad").Watch(ctx, nil, 0)
	assert.True(t, client.IsUnauthorized(err), "%v", err)

	_, err = newClient(t, srv, clienttest.Token).Watch(ctx, []string{"gadgets"}, 0)
	assert.ErrorIs(t, err, client.ErrUnknownKind)

	srv.DisableWatch(true)
	_, err = newClient(t, srv, clienttest.Token).Watch(ctx, nil, 0)
	assert.True(t, client.IsNotFound(err), "%v", err)
}
