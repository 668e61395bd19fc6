// Package cache is the node's in-memory, indexed copy of the store: every live
// object decoded once, indexes kept as objects change, and change handlers
// that hand work to the reconcilers. It is fed by the store's watch, so it
// follows every local write and every replicated one; a watch that falls
// behind (EventResync) makes it list the store again.
//
// Readers get shared objects: they must not change them.
package cache

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// Handler is told of every change, old or new nil for a creation or a
// deletion. Handlers run one at a time on the cache's goroutine, in commit
// order, after the cache holds the new state: they must not block (hand work
// to a queue) and must not change the objects.
type Handler func(kind, name string, old, new types.Object)

// Cache is the indexed copy. Configure it (Index, Pack, OnChange) before
// Start.
type Cache struct {
	st  *store.Store
	log *slog.Logger

	mu       sync.RWMutex
	objs     map[string]map[string]types.Object // kind -> name -> object
	packed   map[string]*packed                 // kinds kept packed (Pack)
	indexes  map[string]*index
	byKind   map[string][]*index
	handlers []Handler

	// decodes counts the packed objects decoded to be read (Decodes).
	decodes atomic.Uint64

	wg sync.WaitGroup

	// seq is the store sequence the cache holds every write up to; seqCh,
	// when someone waits (WaitSeq), is closed at the next advance.
	seqMu sync.Mutex
	seq   uint64
	seqCh chan struct{}
}

// New returns an empty cache of st.
func New(st *store.Store, log *slog.Logger) *Cache {
	return &Cache{st: st, log: log, objs: map[string]map[string]types.Object{}, packed: map[string]*packed{}, indexes: map[string]*index{}, byKind: map[string][]*index{}}
}

// OnChange adds a handler.
func (c *Cache) OnChange(h Handler) { c.handlers = append(c.handlers, h) }

// Start loads every live object (telling the handlers of each), then follows
// the store's watch until ctx ends. It returns once the load is done.
func (c *Cache) Start(ctx context.Context) error {
	from := c.st.Seq()
	if err := c.load(); err != nil {
		return err
	}
	c.advance(from)
	events := c.st.Watch(ctx, from)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for ev := range events {
			c.apply(ev)
		}
	}()
	return nil
}

// Wait returns once the watch goroutine has ended (its ctx is done).
func (c *Cache) Wait() { c.wg.Wait() }

// load lists every kind into the cache, telling the handlers what changed.
func (c *Cache) load() error {
	for _, kind := range types.Kinds() {
		// Only a reload (after a resync) can find objects gone from the
		// store; the first load of a kind need not remember what it saw.
		var seen map[string]bool
		if c.Len(kind) > 0 {
			seen = map[string]bool{}
		}
		err := c.st.Each(kind, func(r store.Record) error {
			if seen != nil {
				seen[r.Name] = true
			}
			c.put(store.Event{Type: store.EventPut, Record: r})
			return nil
		})
		if err != nil {
			return fmt.Errorf("cache: list %s: %w", kind, err)
		}
		if seen == nil {
			continue
		}
		c.mu.RLock()
		var gone []string
		for name := range c.objs[kind] {
			if !seen[name] {
				gone = append(gone, name)
			}
		}
		if p := c.packed[kind]; p != nil {
			for name := range p.recs {
				if !seen[name] {
					gone = append(gone, name)
				}
			}
		}
		c.mu.RUnlock()
		for _, name := range gone {
			c.set(kind, name, nil, nil)
		}
	}
	return nil
}

func (c *Cache) apply(ev store.Event) {
	switch ev.Type {
	case store.EventResync:
		c.log.Info("cache watch fell behind, listing the store again")
		at := c.st.Seq()
		if err := c.load(); err != nil {
			c.log.Warn("cache reload", "err", err)
			return
		}
		c.advance(at)
	case store.EventDelete:
		c.set(ev.Record.Kind, ev.Record.Name, nil, nil)
		c.advance(ev.Record.Seq)
	case store.EventPut:
		c.put(ev)
		c.advance(ev.Record.Seq)
	}
}

// advance records that the cache holds every write up to seq.
func (c *Cache) advance(seq uint64) {
	c.seqMu.Lock()
	defer c.seqMu.Unlock()
	c.seq = max(c.seq, seq)
	if c.seqCh != nil {
		close(c.seqCh)
		c.seqCh = nil
	}
}

// WaitSeq returns once the cache holds every write of the store up to seq
// (the store's Seq when the caller read it: read-your-writes), or ctx's
// error.
func (c *Cache) WaitSeq(ctx context.Context, seq uint64) error {
	for {
		c.seqMu.Lock()
		if c.seq >= seq {
			c.seqMu.Unlock()
			return nil
		}
		if c.seqCh == nil {
			c.seqCh = make(chan struct{})
		}
		ch := c.seqCh
		c.seqMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// put keeps a put event's object: the decoding the event's watchers share
// (cached objects never change, so the cache may hold it).
func (c *Cache) put(ev store.Event) {
	r := ev.Record
	obj, err := ev.View()
	if err != nil {
		c.log.Warn("cache: undecodable record", "kind", r.Kind, "name", r.Name, "err", err)
		return
	}
	var pack []byte
	if c.packed[r.Kind] != nil {
		pack = store.Pack(r)
	}
	c.set(r.Kind, r.Name, obj, pack)
}

func sameFacets(a, b types.Object) bool { return a.Meta().Facets.Equal(b.Meta().Facets) }

// set stores obj (nil: removes), packed as pack for a packed kind, and
// tells the handlers.
func (c *Cache) set(kind, name string, obj types.Object, pack []byte) {
	if p := c.packed[kind]; p != nil {
		c.setPacked(p, kind, name, obj, pack)
		return
	}
	c.mu.Lock()
	byName := c.objs[kind]
	if byName == nil {
		byName = map[string]types.Object{}
		c.objs[kind] = byName
	}
	old, had := byName[name]
	if obj == nil {
		if !had {
			c.mu.Unlock()
			return
		}
		delete(byName, name)
	} else {
		if had && old.Meta().Version == obj.Meta().Version && sameFacets(old, obj) {
			c.mu.Unlock()
			return // a record seen twice (load and watch overlap)
		}
		byName[name] = obj
	}
	if !had {
		old = nil
	}
	for _, ix := range c.byKind[kind] {
		ix.set(name, old, obj)
	}
	c.mu.Unlock()
	for _, h := range c.handlers {
		h(kind, name, old, obj)
	}
}

// Get returns the live object kind/name.
func (c *Cache) Get(kind, name string) (types.Object, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if p := c.packed[kind]; p != nil {
		return c.getPackedLocked(p, kind, name)
	}
	o, ok := c.objs[kind][name]
	return o, ok
}

// List returns every live object of kind, in no order. For a packed kind it
// decodes each one.
func (c *Cache) List(kind string) []types.Object {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if p := c.packed[kind]; p != nil {
		out := make([]types.Object, 0, len(p.recs))
		for name, at := range p.recs {
			b, own := c.record(p, kind, name, at)
			if o := c.unpack(kind, name, b, own); o != nil {
				out = append(out, o)
			}
		}
		return out
	}
	out := make([]types.Object, 0, len(c.objs[kind]))
	for _, o := range c.objs[kind] {
		out = append(out, o)
	}
	return out
}

// Len is the number of live objects of kind.
func (c *Cache) Len(kind string) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if p := c.packed[kind]; p != nil {
		return len(p.recs)
	}
	return len(c.objs[kind])
}

// Typed returns the object kind/name as T when it is one.
func Typed[T any, PT interface {
	*T
	types.Object
}](c *Cache, kind, name string) (PT, bool) {
	o, ok := c.Get(kind, name)
	if !ok {
		return nil, false
	}
	t, ok := o.(PT)
	return t, ok
}

// TypedList returns every live object of kind as T.
func TypedList[T any, PT interface {
	*T
	types.Object
}](c *Cache, kind string) []PT {
	return types.Cast[PT](c.List(kind))
}
