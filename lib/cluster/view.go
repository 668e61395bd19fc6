package cluster

import (
	"slices"

	"github.com/hf-fleet/hf/lib/cluster/cache"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/types"
)

// view is the node's reading of membership: who is alive (memberlist), who
// is known (every Node object in the store, stopped ones included), whether
// this node reaches a majority of the known members, and who owns a key by
// rendezvous. Safe for concurrent use.
type view struct {
	self  string
	peers Peers
	cache *cache.Cache
}

// live returns the live members, sorted.
func (v *view) live() []string { return v.peers.Members() }

// alive reports whether node is a live member.
func (v *view) alive(node string) bool {
	_, ok := slices.BinarySearch(v.live(), node)
	return ok
}

// quorum reports whether the live members are a majority of the members this
// node knows: every node with a Node object, and every live member. A node
// cut off from the others (or on the smaller side of a partition) has none:
// it passes no verdict on the nodes it cannot see, whose machines may run
// fine on the other side. Known members are forgotten only when their Node
// object is deleted (hf-cli node delete).
func (v *view) quorum() bool {
	live := v.live()
	known := map[string]bool{}
	for _, m := range live {
		known[m] = true
	}
	for _, o := range v.cache.List(types.KindNode) {
		known[o.Meta().Name] = true
	}
	return 2*len(live) > len(known)
}

// owner is the rendezvous owner of key among the live members.
func (v *view) owner(key string) string { return scheduler.Owner(key, v.live()) }

// mine reports whether this node owns key.
func (v *view) mine(key string) bool { return v.owner(key) == v.self }
