package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hf-fleet/hf/lib/cluster/wire"
)

// ErrNotDecided is returned by Ask when the owner of the key did not take
// the ask: it could not be reached, it does not see itself as the owner
// (membership is moving), it does not reach a majority of the nodes it
// knows, or it became the owner too lately. Nothing was done; the caller
// may ask again.
var ErrNotDecided = errors.New("not decided")

// ErrNoAnswer is returned by Ask when the ask went out but no answer came
// back in time: the owner may or may not have carried it out.
var ErrNoAnswer = errors.New("no answer")

// AskHandler decides one ask on the owner of its key and returns the
// answer. It runs on a goroutine of its own; asks of one key may run side
// by side, so a handler serializes what it must itself. ctx ends when the
// asker stops waiting or the node stops.
type AskHandler func(ctx context.Context, body []byte) []byte

// asks carries the decisions one node makes for the whole cluster: each key
// has one owner, the rendezvous owner among the live members (as a claim
// has one elector), and Ask takes a request to it wherever it is made. The
// owner decides on its own store, so what it decided before is in what it
// decides next, however slowly its writes reach the others.
//
// Ownership moves with membership. A new owner may not hold yet what the
// last one wrote (a node that joined, a side of a partition that healed),
// so it decides only once it has owned the key for Config.OwnerSettle and
// only while it reaches a majority of the nodes it knows: two sides of a
// partition never both decide. What is left is a last owner that dies
// before its write left it.
type asks struct {
	n    *Node
	next atomic.Uint64

	mu       sync.Mutex
	handlers map[string]AskHandler
	// owners are, per handled key, its owner as this node last saw it and
	// since when.
	owners  map[string]keyOwner
	pending map[uint64]chan Message
}

// keyOwner is who owns a key, as this node sees it, since when.
type keyOwner struct {
	node  string
	since time.Time
}

func newAsks(n *Node) *asks {
	a := &asks{n: n, handlers: map[string]AskHandler{}, owners: map[string]keyOwner{}, pending: map[uint64]chan Message{}}
	// Ask numbers of a node restarted under its name are not those of
	// its last run, whose answers may still be on their way.
	a.next.Store(uint64(n.cfg.Now().UnixNano()))
	return a
}

// HandleAsks has this node decide key's asks with h whenever it owns key.
// Every node of a cluster registers the same handlers. An ask that comes
// before its handler is registered is not decided.
func (n *Node) HandleAsks(key string, h AskHandler) {
	a := n.asks
	a.mu.Lock()
	defer a.mu.Unlock()
	a.handlers[key] = h
	a.owners[key] = keyOwner{node: n.view.owner(key), since: n.cfg.Now()}
}

// Ask has the owner of key decide body with its handler (HandleAsks) and
// returns the answer: on this node when it owns key, else by a direct
// message to the owner. It waits at most Config.AskTimeout. ErrNotDecided:
// nothing was done; ErrNoAnswer: the owner may have done it.
func (n *Node) Ask(ctx context.Context, key string, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.AskTimeout)
	defer cancel()
	owner := n.view.owner(key)
	if owner == n.cfg.Name {
		out, why := n.asks.decide(ctx, key, body)
		if why != "" {
			return nil, fmt.Errorf("%w: %s", ErrNotDecided, why)
		}
		return out, nil
	}
	if owner == "" {
		return nil, fmt.Errorf("%w: node %s sees no live member to own %s", ErrNotDecided, n.cfg.Name, key)
	}
	a := n.asks
	id := a.next.Add(1)
	answer := make(chan Message, 1)
	a.mu.Lock()
	a.pending[id] = answer
	a.mu.Unlock()
	defer func() {
		a.mu.Lock()
		delete(a.pending, id)
		a.mu.Unlock()
	}()
	err := n.peers.Send(ctx, Message{Type: wire.MsgAsk, From: n.cfg.Name, To: owner, Key: key, Ask: id, Body: body})
	switch {
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		// A send still under way goes on in the background: it may arrive.
		return nil, fmt.Errorf("%w from %s, the owner of %s, within %s: it may yet have been carried out", ErrNoAnswer, owner, key, n.cfg.AskTimeout)
	case err != nil:
		return nil, fmt.Errorf("%w: %s, the owner of %s, cannot be reached: %v", ErrNotDecided, owner, key, err)
	}
	select {
	case m := <-answer:
		if m.Reason != "" {
			return nil, fmt.Errorf("%w: %s", ErrNotDecided, m.Reason)
		}
		return m.Body, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%w from %s, the owner of %s, within %s: it may have been carried out", ErrNoAnswer, owner, key, n.cfg.AskTimeout)
	}
}

// received decides an ask from another node and answers it. It never
// blocks.
func (a *asks) received(m Message) {
	n := a.n
	if !n.ready.Load() {
		// Not started, or stopping: the asker's wait ends unanswered.
		n.log.Debug("ask dropped", "from", m.From, "key", m.Key, "reason", "node not running")
		return
	}
	n.spawn(func() {
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.AskTimeout)
		defer cancel()
		out := Message{Type: wire.MsgAnswer, From: n.cfg.Name, To: m.From, Key: m.Key, Ask: m.Ask}
		out.Body, out.Reason = a.decide(ctx, m.Key, m.Body)
		if err := n.peers.Send(ctx, out); err != nil {
			n.log.Warn("ask answer not sent", "to", m.From, "key", m.Key, "err", err)
		}
	})
}

// answered hands an answer to the Ask that waits for it. It never blocks.
func (a *asks) answered(m Message) {
	a.mu.Lock()
	ch, ok := a.pending[m.Ask]
	a.mu.Unlock()
	if !ok {
		a.n.log.Debug("answer dropped", "from", m.From, "key", m.Key, "reason", "nobody waits for it")
		return
	}
	select {
	case ch <- m:
	default:
	}
}

// decide runs key's handler on body, here, if this node may decide for
// key now (see asks); else it says why not.
func (a *asks) decide(ctx context.Context, key string, body []byte) (answer []byte, whyNot string) {
	n := a.n
	if owner := n.view.owner(key); owner != n.cfg.Name {
		return nil, fmt.Sprintf("node %s does not own %s as it sees the members (%s does): membership is moving, ask again", n.cfg.Name, key, owner)
	}
	a.mu.Lock()
	h, owned := a.handlers[key], a.owners[key]
	a.mu.Unlock()
	if h == nil {
		return nil, fmt.Sprintf("node %s does not decide %s yet: it is starting", n.cfg.Name, key)
	}
	quorum := n.quorumWithin(ctx)
	_, known := n.view.members()
	if !quorum {
		return nil, fmt.Sprintf("node %s, the owner of %s, does not reach a majority of the %d nodes it knows: it decides once it does (a node gone for good leaves the count with hf-cli node delete)",
			n.cfg.Name, key, known)
	}
	if wait := owned.since.Add(n.cfg.OwnerSettle).Sub(n.cfg.Now()); known > 1 && wait > 0 {
		return nil, fmt.Sprintf("node %s became the owner of %s %s ago and decides once it has been for %s (what the last owner wrote must reach it first): ask again in %s",
			n.cfg.Name, key, n.cfg.Now().Sub(owned.since).Round(time.Millisecond), n.cfg.OwnerSettle, wait.Round(time.Millisecond))
	}
	return h(ctx, body), ""
}

// membersChanged notes the keys whose owner moved. It never blocks.
func (a *asks) membersChanged() {
	now := a.n.cfg.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, o := range a.owners {
		if owner := a.n.view.owner(key); owner != o.node {
			a.owners[key] = keyOwner{node: owner, since: now}
		}
	}
}

// quorumWithin reports whether this node reaches a majority of the members
// it knows, waiting (until ctx ends) for the probe that says so when a
// member is absent: the view calls lookAgain when it has answered.
func (n *Node) quorumWithin(ctx context.Context) bool {
	for {
		// Taken before asking, so an answer that comes in between wakes it.
		looked := n.quorumNotice.wait()
		if q, answered := n.view.quorumAnswered(); answered {
			return q
		}
		select {
		case <-ctx.Done():
			return false
		case <-looked:
		}
	}
}
