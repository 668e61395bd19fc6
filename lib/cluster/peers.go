package cluster

import (
	"context"
	"fmt"

	"github.com/hf-fleet/hf/lib/internal/intern"
)

// Peers is the node's view of the cluster: who is alive and how to reach them.
// Implementations must be safe for concurrent use. Send must not call the local
// handler synchronously (it may be called from the handler's own goroutine).
type Peers interface {
	// Self is this node's name.
	Self() string
	// Members returns the names of live members, this node included, sorted;
	// the slice may be shared: callers must not modify it.
	Members() []string
	// Known returns every member seen lately, live or not, sorted.
	Known() []string
	// Ping checks that a live member answers now; nil means it did.
	Ping(ctx context.Context, name string) error
	// Send delivers m to m.To reliably or returns an error.
	Send(ctx context.Context, m Message) error
}

// Cooler is implemented by Peers that keep something for each object
// (member.Member: anti-entropy's tree). The node's Cool calls Cool, once
// the node is idle, to copy it out of the burst's heap with its names from
// tab, the table the node's own copies take theirs from: one copy of each
// name for both.
type Cooler interface {
	Cool(tab *intern.Table)
}

// Joiner is implemented by Peers that were told to join a cluster and know
// whether they have (member.Member): Joined returns nil once they have, or
// why not yet. It must not block.
type Joiner interface {
	Joined() error
}

// localPeers is the membership of a node that runs alone: itself.
type localPeers struct {
	self    string
	deliver func(Message)
}

var _ Peers = (*localPeers)(nil)

func (p *localPeers) Self() string      { return p.self }
func (p *localPeers) Members() []string { return []string{p.self} }

func (p *localPeers) Known() []string { return []string{p.self} }

func (p *localPeers) Ping(_ context.Context, name string) error {
	if name == p.self {
		return nil
	}
	return fmt.Errorf("ping %s: not a member", name)
}

// Send hands m to the node on another goroutine, as a network would.
func (p *localPeers) Send(_ context.Context, m Message) error {
	if m.To != p.self {
		return fmt.Errorf("send to %s: not a member", m.To)
	}
	go p.deliver(m)
	return nil
}
