package member

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/internal/intern"
	"github.com/hf-fleet/hf/lib/store"
)

// keeper keeps anti-entropy's hash tree up to date with the store by
// following its watch: a build replays the whole store into a new tree
// (WatchSnapshot from 0) and publishes it once the replay is done; after
// that every commit updates one leaf and its ancestors. A watch that falls
// behind (EventResync) is resumed after the last Seq applied, which replays
// only what changed meanwhile. Tombstone collection sends no event, so the
// keeper compares the store's Collected count every check interval and,
// when it moved, builds a new tree while rounds go on with the old one.
//
// Every check interval the published tree also hands the collector the
// tombstones every member has been shown to hold (tombstones.go): those it
// removes from the store it removes from the tree too, and counts into the
// tree's collected, so they cost no rebuild.
//
// Rounds read the published tree (ready waits for the first); only run
// writes to it.
type keeper struct {
	st       *store.Store
	log      *slog.Logger
	interval time.Duration
	// collect, when set, is run with the published tree every interval.
	collect func(*hashTree) (int, error)
	// checks asks for a check now (tests); the answer is the collect's.
	checks chan chan collected

	mu    sync.Mutex
	tree  *hashTree
	ready chan struct{} // closed once a tree is published
}

func newKeeper(st *store.Store, log *slog.Logger, interval time.Duration) *keeper {
	return &keeper{st: st, log: log, interval: interval, ready: make(chan struct{}), checks: make(chan chan collected)}
}

// collected is what one check's collection did.
type collected struct {
	n   int
	err error
}

// checkNow runs a check on the keeper's goroutine at once and returns what
// its collection did; false when ctx ended or the tree is being built.
func (k *keeper) checkNow(ctx context.Context) (collected, bool) {
	reply := make(chan collected, 1)
	select {
	case k.checks <- reply:
	case <-ctx.Done():
		return collected{}, false
	}
	select {
	case c, ok := <-reply:
		return c, ok
	case <-ctx.Done():
		return collected{}, false
	}
}

// current waits for the published tree; nil when ctx ends first.
func (k *keeper) current(ctx context.Context) *hashTree {
	select {
	case <-k.ready:
	case <-ctx.Done():
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.tree
}

// trim trims the published tree, if any (see hashTree.trim).
func (k *keeper) trim(tab *intern.Table) {
	k.mu.Lock()
	t := k.tree
	k.mu.Unlock()
	if t != nil {
		t.trim(tab)
	}
}

func (k *keeper) publish(t *hashTree) {
	k.mu.Lock()
	defer k.mu.Unlock()
	first := k.tree == nil
	k.tree = t
	if first {
		close(k.ready)
	}
}

// collectFrom runs the collection on the published tree t.
func (k *keeper) collectFrom(t *hashTree, published bool) collected {
	if !published || k.collect == nil {
		return collected{}
	}
	n, err := k.collect(t)
	switch {
	case errors.Is(err, store.ErrClosed):
	case err != nil:
		k.log.Warn("collect tombstones", "err", err)
	case n > 0:
		k.log.Debug("tombstones collected every member has", "count", n)
	}
	return collected{n, err}
}

// outcome is why follow returned.
type outcome int

const (
	stop    outcome = iota // ctx ended or the store closed
	resume                 // the watch fell behind: resume after the last Seq
	rebuild                // build the tree again from the whole store
)

// run keeps the tree until ctx ends or the store closes.
func (k *keeper) run(ctx context.Context) {
	tick := time.NewTicker(k.interval)
	defer tick.Stop()
	var (
		t         *hashTree
		published bool
	)
	for ctx.Err() == nil {
		var from uint64
		if t == nil {
			t, published = newHashTree(), false
			t.collected = k.st.Collected()
		} else {
			from = t.lastSeq()
		}
		wctx, cancel := context.WithCancel(ctx)
		events := k.st.WatchSnapshot(wctx, from)
		out := k.follow(ctx, t, events, from, &published, tick.C)
		cancel()
		for range events { // closed by the store once wctx is done
		}
		switch out {
		case stop:
			return
		case rebuild:
			t = nil
			k.log.Debug("anti-entropy tree rebuilt")
		case resume:
			k.log.Debug("anti-entropy tree resumed", "after", t.lastSeq())
		}
	}
}

// follow applies events to t, publishes t at the end of its first replay,
// and says what to do next.
func (k *keeper) follow(ctx context.Context, t *hashTree, events <-chan store.Event, from uint64, published *bool, check <-chan time.Time) outcome {
	first := true
	for {
		select {
		case <-ctx.Done():
			return stop
		case <-check:
			if k.st.Collected() != t.collected {
				return rebuild
			}
			k.collectFrom(t, *published)
		case reply := <-k.checks:
			switch {
			case k.st.Collected() != t.collected:
				close(reply)
				return rebuild
			case !*published:
				close(reply)
			default:
				reply <- k.collectFrom(t, true)
			}
		case ev, ok := <-events:
			if !ok {
				return stop
			}
			switch ev.Type {
			case store.EventPut, store.EventDelete:
				t.apply(&ev.Record)
			case store.EventSynced:
				if !*published {
					k.publish(t)
					*published = true
				}
			case store.EventResync:
				if first && from > 0 {
					return rebuild // from cannot be replayed
				}
				return resume
			}
			first = false
		}
	}
}
