package member

import (
	"github.com/hashicorp/memberlist"

	"github.com/hf-fleet/hf/lib/cluster/wire"
)

// delegate is this package's memberlist.Delegate: it receives the user
// messages and contributes nothing to gossip.
//
// Concurrency: memberlist calls NotifyMsg concurrently, from its UDP packet
// loop and from one goroutine per incoming stream, and reuses the buffer
// after the call; it must not block. NotifyMsg copies the message and hands
// it to a queue (or, for the few that only update a table under a mutex,
// handles it at once). The other methods are called concurrently too and
// return constants.
//
// Records never ride on UDP gossip (1,400-byte packets, ~99% reach): they go
// by reliable send, and anti-entropy uses its own paged messages rather than
// memberlist's push/pull state, which would carry a digest on every
// membership sync.
type delegate struct{ m *Member }

var _ memberlist.Delegate = (*delegate)(nil)

// NodeMeta says what this member's transport offers (members are described
// by their Node objects in the store): a version byte and capability bits.
// A member of an earlier release sends none.
func (d *delegate) NodeMeta(limit int) []byte {
	if limit < 2 || d.m.noLinks {
		return nil
	}
	return []byte{metaVersion, capLinks | capElectionBinary}
}

// Member metadata: its version and capability bits.
const (
	metaVersion byte = 1
	// capLinks: the member serves links (linkframe.go).
	capLinks byte = 1 << 0
	// capElectionBinary: the member reads msgElectionBinary.
	capElectionBinary byte = 1 << 1
)

// hasCap reports whether a member's metadata offers capability c.
func hasCap(meta []byte, c byte) bool {
	return len(meta) >= 2 && meta[0] == metaVersion && meta[1]&c != 0
}

// NotifyMsg dispatches one message by its type byte.
func (d *delegate) NotifyMsg(buf []byte) {
	d.m.dispatch(buf)
}

// GetBroadcasts returns nothing: this package never broadcasts by gossip.
func (d *delegate) GetBroadcasts(int, int) [][]byte { return nil }

// LocalState returns nothing; see the type comment.
func (d *delegate) LocalState(bool) []byte { return nil }

// MergeRemoteState ignores the (always empty) remote state.
func (d *delegate) MergeRemoteState([]byte, bool) {}

// dispatch routes one received message. It never blocks.
func (m *Member) dispatch(buf []byte) {
	t, body, err := splitType(buf)
	if err != nil {
		m.log.Debug("message dropped", "err", err)
		return
	}
	switch t {
	case msgElection, msgElectionBinary:
		var msg wire.Message
		if t == msgElection {
			msg, err = decodeElection(body)
		} else {
			// The records alias what they are read from: a copy, since
			// buf is the caller's again when dispatch returns.
			msg, err = decodeElectionBinary(append([]byte(nil), body...))
		}
		if err != nil {
			m.log.Debug("message dropped", "type", t, "err", err)
			return
		}
		m.inbox.Push(msg)
	case msgRecords, msgPush, msgPullResp:
		m.applyQ.Push(append([]byte(nil), buf...))
	case msgTreeReq, msgPullReq:
		m.aeQ.Push(append([]byte(nil), buf...))
	case msgTreeResp:
		resp, err := decodeTreeResp(body)
		if err != nil {
			m.log.Debug("message dropped", "type", t, "err", err)
			return
		}
		m.ae.deliver(resp)
	case msgLeaving:
		lm, err := decodeLeaving(body)
		if err != nil {
			m.log.Debug("message dropped", "type", t, "err", err)
			return
		}
		m.log.Debug("member leaving", "node", lm.From)
		m.table.leavingNote(lm.From)
	default:
		m.log.Debug("message dropped", "type", t, "err", "unknown type")
	}
}
