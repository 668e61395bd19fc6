// Package wire holds the direct messages of the claim election, and the
// asks a node sends the owner of a key (cluster.Node.Ask), which the node
// loop (lib/cluster) and the membership (lib/cluster/member) exchange: a
// small package of its own so neither imports the other.
package wire

import (
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// MessageType is the kind of a direct message between nodes.
type MessageType byte

// Direct message types of the offer/accept exchange.
const (
	MsgOffer MessageType = iota + 1
	MsgAccept
	MsgDecline
	// MsgTake asks the node hosting a warm pool machine to bind it to a claim.
	MsgTake
	// MsgAsk asks the owner of Key to decide Body for the cluster (see
	// cluster.Node.Ask); MsgAnswer carries its answer (Body), or why it
	// did not decide (Reason), back under the same Ask.
	MsgAsk
	MsgAnswer
)

// Binary reports whether messages of type t may travel in the binary
// encoding, which carries the election's fields only: asks and answers go
// as JSON (they are rare and small, and a node of an earlier release, which
// does not know them, reads the JSON and drops them by their type).
func (t MessageType) Binary() bool { return t >= MsgOffer && t <= MsgTake }

// Message is one direct node-to-node message of the claim election.
type Message struct {
	Type MessageType `json:"type"`
	// From is the sender's node name; To the receiver's.
	From  string `json:"from"`
	To    string `json:"to"`
	Claim string `json:"claim"`
	// Node and Driver name the candidate the offer is for / the answer is from.
	Node   string `json:"node,omitempty"`
	Driver string `json:"driver,omitempty"`
	Round  uint64 `json:"round"`
	// Machine is the pool machine of a take and of its answer.
	Machine string `json:"machine,omitempty"`
	// Set is the OnDemand machine set an offered claim's machine belongs to.
	Set    string `json:"set,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Fresh is the candidate's real capacity for Driver at the time it declined.
	Fresh *types.Capacity `json:"fresh,omitempty"`
	// Records travel with an offer: the elector's copies of the claim and its
	// template, so a candidate that has not had them replicated yet (the offer
	// overtook the push) judges the same claim the elector did. The candidate
	// applies them like any replicated record: newer facets win.
	Records []store.Record `json:"records,omitempty"`
	// Key, Ask and Body are an ask's and its answer's (MsgAsk, MsgAnswer):
	// the key whose owner decides, the asker's number for the ask, and
	// what to decide or the decision, in the asker's and the owner's own
	// encoding.
	Key  string `json:"key,omitempty"`
	Ask  uint64 `json:"ask,omitempty"`
	Body []byte `json:"body,omitempty"`
}
