package member

import (
	"github.com/hf-fleet/hf/lib/cluster/member/internal/fanout"
	"github.com/hf-fleet/hf/lib/store"
)

// DefaultFanout is how many peers a write is sent to by its writer and by
// each member that relays it: at most 3 sends per write per member, and a
// write reaches 200 members in 5 hops.
const DefaultFanout = 3

// writerOf is a record's writer: the root of its dissemination tree.
func writerOf(r *store.Record) string { return r.Version.Node }

// peerQueue is what waits to be sent to one peer, coalesced by key
// (fanout.Queue).
type peerQueue = fanout.Queue[Key, store.Record]

func newPeerQueue() *peerQueue {
	return fanout.NewQueue(func(r *store.Record) Key { return Key{Kind: r.Kind, Name: r.Name} }, recordSize)
}
