// Package cache is the node's in-memory, indexed copy of the store: every live
// object decoded once, indexes kept as objects change, and change handlers
// that hand work to the reconcilers. It is fed by the store's watch, so it
// follows every local write and every replicated one; a watch that falls
// behind (EventResync) makes it list the store again.
//
// Readers get shared objects: they must not change them.
package cache

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// IndexFunc returns the keys an object is indexed under (none: not indexed).
// It must depend on the object alone: the cache calls it again on the object
// it holds to find the keys to drop.
type IndexFunc func(o types.Object) []string

// Handler is told of every change, old or new nil for a creation or a
// deletion. Handlers run one at a time on the cache's goroutine, in commit
// order, after the cache holds the new state: they must not block (hand work
// to a queue) and must not change the objects.
type Handler func(kind, name string, old, new types.Object)

// An object's keys are not kept: they are fn of the object the cache holds,
// which never changes (10,000 claims and machines saved ~6 MB so).
type index struct {
	kind  string
	fn    IndexFunc
	byKey map[string]*bucket // key -> the objects under it
	// packed is the kind's, when it is packed: the buckets hold names alone
	// (holding the decoded objects would keep them all in memory), and a
	// lookup reads each object from it.
	packed *packed
}

// fewMax is how many objects a bucket holds in a slice before it needs a
// map. Most keys hold one object (a claim's machine, a template's claims):
// a map each would cost ~300 bytes more per key than a one-element slice.
const fewMax = 8

// bucket is the objects under one key of an index.
type bucket struct {
	few  []named
	many map[string]types.Object
}

type named struct {
	name string
	obj  types.Object
}

func (b *bucket) put(name string, obj types.Object) {
	if b.many != nil {
		b.many[name] = obj
		return
	}
	for i := range b.few {
		if b.few[i].name == name {
			b.few[i].obj = obj
			return
		}
	}
	if len(b.few) < fewMax {
		b.few = append(b.few, named{name, obj})
		return
	}
	b.many = make(map[string]types.Object, 2*fewMax)
	for _, n := range b.few {
		b.many[n.name] = n.obj
	}
	b.few = nil
	b.many[name] = obj
}

func (b *bucket) del(name string) {
	if b.many != nil {
		delete(b.many, name)
		return
	}
	for i := range b.few {
		if b.few[i].name == name {
			b.few = slices.Delete(b.few, i, i+1)
			return
		}
	}
}

func (b *bucket) len() int {
	if b.many != nil {
		return len(b.many)
	}
	return len(b.few)
}

// has reports whether name is under the key.
func (b *bucket) has(name string) bool {
	if b.many != nil {
		_, ok := b.many[name]
		return ok
	}
	return slices.ContainsFunc(b.few, func(n named) bool { return n.name == name })
}

// names returns the names under the key, in no order.
func (b *bucket) names() []string {
	out := make([]string, 0, b.len())
	for _, n := range b.few {
		out = append(out, n.name)
	}
	for name := range b.many {
		out = append(out, name)
	}
	return out
}

func (b *bucket) objects() []types.Object {
	out := make([]types.Object, 0, b.len())
	for _, n := range b.few {
		out = append(out, n.obj)
	}
	for _, o := range b.many {
		out = append(out, o)
	}
	return out
}

// PinFunc says whether an object of a packed kind stays decoded whatever is
// read (see Pack). It is asked at each change of the object; pinned says
// whether another packed object is pinned (as the cache holds it then: an
// object that comes later does not change the answer given), and may be
// called only during the call.
type PinFunc func(o types.Object, pinned func(kind, name string) bool) bool

// packed holds the objects of a kind kept in the store's binary form (see
// Pack): a quarter of a decoded object's memory or less.
type packed struct {
	recs  map[string]loc // name -> where store.Pack of the record is in arena
	arena arena
	// sq squeezes the kind's records at Cool, once it holds squeezeMin of
	// them; nil until then. Guarded by Cache.mu.
	sq *squeezer
	// hot are objects decoded by reads or written lately, at most keep;
	// dropped all at once when full. Guarded by Cache.mu held for writing,
	// or by mu with Cache.mu held for reading.
	mu   sync.Mutex
	hot  map[string]types.Object
	keep int
	// pinned are the objects pin holds decoded whatever is read: those the
	// reconcilers read many at a time, over and over. Guarded by Cache.mu.
	pin    PinFunc
	pinned map[string]types.Object
}

// decoded returns name's object when it is held decoded. The caller holds
// Cache.mu for writing, or p.mu with Cache.mu for reading.
func (p *packed) decoded(name string) (types.Object, bool) {
	if o, ok := p.pinned[name]; ok {
		return o, true
	}
	o, ok := p.hot[name]
	return o, ok
}

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

// Pack keeps the objects of kind packed, in the store's binary form, and
// decodes one when it is read; the keep most recently read or written stay
// decoded as well. For kinds that are many and read a few at a time, by name
// or by index (templates: a million of them take ~250 MB packed where
// decoded they took ~750 MB; a bound claim and its machine 1.4 KB where
// decoded they took ~4.5 KB, in ~50 small allocations that fragment the
// heap). List of such a kind decodes every object. Objects for which pin
// (when not nil) is true stay decoded too: those read many at a time and
// often (a pool's machines, read for each claim routed to the pool). Call
// Pack before Index.
func (c *Cache) Pack(kind string, keep int, pin PinFunc) {
	if len(c.byKind[kind]) > 0 {
		panic("cache: Pack " + kind + " before its indexes")
	}
	c.packed[kind] = &packed{recs: map[string]loc{}, hot: map[string]types.Object{}, keep: max(1, keep),
		pin: pin, pinned: map[string]types.Object{}}
}

// remember keeps o decoded (nil: forgets name). The caller holds c.mu for
// writing, or p.mu with c.mu for reading.
func (p *packed) remember(name string, o types.Object) {
	if o == nil {
		delete(p.hot, name)
		return
	}
	if len(p.hot) >= p.keep {
		clear(p.hot)
	}
	p.hot[name] = o
}

// Index adds an index named name over the objects of kind.
func (c *Cache) Index(name, kind string, fn IndexFunc) {
	ix := &index{kind: kind, fn: fn, byKey: map[string]*bucket{}, packed: c.packed[kind]}
	c.indexes[name] = ix
	c.byKind[kind] = append(c.byKind[kind], ix)
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

// ByIndexNow is ByIndex once the cache holds every write the store had
// when it was called (read-your-writes), or ctx's error.
func (c *Cache) ByIndexNow(ctx context.Context, name, key string) ([]types.Object, error) {
	if err := c.WaitSeq(ctx, c.st.Seq()); err != nil {
		return nil, err
	}
	return c.ByIndex(name, key), nil
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

// setPacked is set for a packed kind.
func (c *Cache) setPacked(p *packed, kind, name string, obj types.Object, pack []byte) {
	c.mu.Lock()
	at, had := p.recs[name]
	var prev []byte
	var prevOwn bool
	if had {
		prev, prevOwn = c.record(p, kind, name, at) // nil: old is not known
	}
	switch {
	case obj == nil && !had:
		c.mu.Unlock()
		return
	case had && obj != nil && bytes.Equal(prev, pack):
		c.mu.Unlock()
		return // a record seen twice (load and watch overlap)
	case obj == nil:
		delete(p.recs, name)
	default:
		p.recs[name] = p.arena.put(pack)
	}
	if had {
		p.arena.free(at)
	}
	// The object it was: decoded still (a burst's claims are written
	// again while they are), or decoded now.
	var old types.Object
	if had && (len(c.handlers) > 0 || len(c.byKind[kind]) > 0) {
		var ok bool
		if old, ok = p.decoded(name); !ok {
			old = c.unpack(kind, name, prev, prevOwn)
		}
	}
	for _, ix := range c.byKind[kind] {
		if had && old == nil {
			ix.drop(name) // its keys are not known: look for it everywhere
			ix.set(name, nil, obj)
			continue
		}
		ix.set(name, old, obj)
	}
	if obj != nil && p.pin != nil && p.pin(obj, c.pinnedLocked) {
		p.pinned[name] = obj
		p.remember(name, nil)
	} else {
		delete(p.pinned, name)
		p.remember(name, obj)
	}
	if p.arena.due(false) {
		p.arena.compact(p.recs, nil)
	}
	c.mu.Unlock()
	for _, h := range c.handlers {
		h(kind, name, old, obj)
	}
}

// pinnedLocked reports whether kind/name is pinned; the caller holds c.mu
// for writing.
func (c *Cache) pinnedLocked(kind, name string) bool {
	p := c.packed[kind]
	if p == nil {
		return false
	}
	_, ok := p.pinned[name]
	return ok
}

// Cool drops the decoded copies the packed kinds keep of the objects read
// or written last (not the pinned ones): the decoding of 1,000 claims and
// 1,000 machines is ~5 MB of heap an idle node need not hold. They are
// decoded again when read. It compacts the packed kinds' arenas too, and
// squeezes the records written since the last time (see squeezer): 10,000
// claims, machines and templates took 15 MB packed, ~4 MB squeezed. It
// returns about how many bytes it dropped: the arenas' chunks, and the
// decoded objects counted at their records' size (they take more).
func (c *Cache) Cool() (dropped int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for kind, p := range c.packed {
		for name := range p.hot {
			if _, pinned := p.pinned[name]; !pinned {
				dropped += int64(p.recs[name].n)
			}
		}
		clear(p.hot)
		squeeze := c.squeezeFunc(kind, p)
		if p.arena.due(true) || squeeze != nil {
			before := p.arena.size()
			p.arena.compact(p.recs, squeeze)
			dropped += before - p.arena.size()
		}
	}
	return dropped
}

// squeezeFunc returns what squeezes kind's plain records for a compaction,
// making its squeezer first if it has none; nil when there is nothing to
// squeeze or the kind holds too few records. The caller holds c.mu for
// writing.
func (c *Cache) squeezeFunc(kind string, p *packed) func([]byte) []byte {
	if p.arena.unsqueezed == 0 {
		return nil
	}
	if p.sq == nil {
		if len(p.recs) < squeezeMin {
			return nil
		}
		var sample [][]byte
		for _, at := range p.recs {
			if len(sample) == squeezeSample {
				break
			}
			sample = append(sample, p.arena.get(at)) // all plain: nothing was squeezed yet
		}
		sq, err := newSqueezer(sample)
		if err != nil {
			c.log.Warn("cache: no squeezer", "kind", kind, "err", err)
			return nil
		}
		p.sq = sq
	}
	enc, err := p.sq.encoder()
	if err != nil {
		c.log.Warn("cache: no squeezer", "kind", kind, "err", err)
		return nil
	}
	var buf []byte
	return func(b []byte) []byte {
		buf = enc.EncodeAll(b, buf[:0])
		return buf
	}
}

// record returns the record at l of kind's p as store.Pack made it: the
// arena's bytes (own false: they must not be kept), or a squeezed record
// restored into a buffer of its own. Nil (logged) when it cannot be
// restored.
func (c *Cache) record(p *packed, kind, name string, l loc) (b []byte, own bool) {
	b = p.arena.get(l)
	if l.form != squeezed {
		return b, false
	}
	b, err := p.sq.restore(b)
	if err != nil {
		c.log.Warn("cache: unrestorable squeezed record", "kind", kind, "name", name, "err", err)
		return nil, false
	}
	return b, true
}

// Decodes is how many times an object of a packed kind was decoded to be
// read (a loop that reads packed objects over and over shows here).
func (c *Cache) Decodes() uint64 { return c.decodes.Load() }

// unpack decodes a packed record; nil (logged) when it cannot. Unless b is
// the caller's own (own), it decodes a copy: what a decoded object shares
// with its record must not keep a chunk of the arena alive once the arena
// is compacted.
func (c *Cache) unpack(kind, name string, b []byte, own bool) types.Object {
	if b == nil {
		return nil
	}
	c.decodes.Add(1)
	if !own {
		b = bytes.Clone(b)
	}
	r, err := store.Unpack(kind, name, b)
	var o types.Object
	if err == nil {
		o, err = store.Decode(r)
	}
	if err != nil {
		c.log.Warn("cache: undecodable packed record", "kind", kind, "name", name, "err", err)
		return nil
	}
	return o
}

// getPackedLocked reads kind/name of a packed kind; the caller holds c.mu
// for reading.
func (c *Cache) getPackedLocked(p *packed, kind, name string) (types.Object, bool) {
	at, ok := p.recs[name]
	if !ok {
		return nil, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if o, ok := p.decoded(name); ok {
		return o, true
	}
	b, own := c.record(p, kind, name, at)
	o := c.unpack(kind, name, b, own)
	if o == nil {
		return nil, false
	}
	p.remember(name, o)
	return o, true
}

func sameFacets(a, b types.Object) bool { return a.Meta().Facets.Equal(b.Meta().Facets) }

// set files obj (nil: nothing) under its keys in place of old (nil: none),
// the object name had: most writes leave an object's keys as they were, and
// then only the buckets' objects change.
func (ix *index) set(name string, old, obj types.Object) {
	var was, keys []string
	if old != nil {
		was = ix.fn(old)
	}
	if obj != nil {
		keys = ix.fn(obj)
	}
	held := obj
	if ix.packed != nil {
		held = nil
	}
	if old != nil && obj != nil && slices.Equal(was, keys) {
		if ix.packed == nil { // (names alone stay as they are)
			for _, k := range keys {
				ix.byKey[k].put(name, obj)
			}
		}
		return
	}
	for _, k := range was {
		if b := ix.byKey[k]; b != nil {
			b.del(name)
			if b.len() == 0 {
				delete(ix.byKey, k)
			}
		}
	}
	for _, k := range keys {
		b := ix.byKey[k]
		if b == nil {
			b = &bucket{}
			ix.byKey[k] = b
		}
		b.put(name, held)
	}
}

// drop removes name from every key of the index.
func (ix *index) drop(name string) {
	for k, b := range ix.byKey {
		b.del(name)
		if b.len() == 0 {
			delete(ix.byKey, k)
		}
	}
}

// Record returns the record of a packed kind's object, as the store has
// it (facets and versions), without decoding it: to send it on. Its facets
// are shared: they must not change. False for a kind that is not packed.
func (c *Cache) Record(kind, name string) (store.Record, bool) {
	c.mu.RLock()
	p := c.packed[kind]
	var b []byte
	if p != nil {
		if at, ok := p.recs[name]; ok {
			b, _ = c.record(p, kind, name, at)
		}
	}
	c.mu.RUnlock()
	if b == nil {
		return store.Record{}, false
	}
	r, err := store.Unpack(kind, name, b)
	return r, err == nil
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

// ByIndex returns the objects under key in the named index, in no order.
func (c *Cache) ByIndex(name, key string) []types.Object {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ix := c.indexes[name]
	if ix == nil {
		return nil
	}
	b := ix.byKey[key]
	if b == nil {
		return nil
	}
	if ix.packed == nil {
		return b.objects()
	}
	out := make([]types.Object, 0, b.len())
	for _, name := range b.names() {
		if o, ok := c.getPackedLocked(ix.packed, ix.kind, name); ok {
			out = append(out, o)
		}
	}
	return out
}

// Names returns the names under key in the named index, in no order: whose
// objects ByIndex returns, without reading (for a packed kind, decoding)
// them.
func (c *Cache) Names(name, key string) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if ix := c.indexes[name]; ix != nil {
		if b := ix.byKey[key]; b != nil {
			return b.names()
		}
	}
	return nil
}

// Intersect returns the names under key in the named index that are also
// under one of otherKeys in the index other (a user's claims that are
// Requested or Bound, say), in no order, without reading the objects.
func (c *Cache) Intersect(name, key, other string, otherKeys ...string) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	ix, ox := c.indexes[name], c.indexes[other]
	if ix == nil || ox == nil || ix.byKey[key] == nil {
		return nil
	}
	var in []*bucket
	for _, k := range otherKeys {
		if b := ox.byKey[k]; b != nil {
			in = append(in, b)
		}
	}
	var out []string
	for _, n := range ix.byKey[key].names() {
		if slices.ContainsFunc(in, func(b *bucket) bool { return b.has(n) }) {
			out = append(out, n)
		}
	}
	return out
}

// Indexed reports whether the object named obj is under key in the named
// index.
func (c *Cache) Indexed(name, key, obj string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if ix := c.indexes[name]; ix != nil {
		if b := ix.byKey[key]; b != nil {
			return b.has(obj)
		}
	}
	return false
}

// Count is the number of objects under key in the named index.
func (c *Cache) Count(name, key string) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if ix := c.indexes[name]; ix != nil {
		if b := ix.byKey[key]; b != nil {
			return b.len()
		}
	}
	return 0
}

// Keys returns every key of the named index with its count.
func (c *Cache) Keys(name string) map[string]int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := map[string]int{}
	if ix := c.indexes[name]; ix != nil {
		for k, b := range ix.byKey {
			out[k] = b.len()
		}
	}
	return out
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

// TypedIndex returns the objects under key in the named index as T.
func TypedIndex[T any, PT interface {
	*T
	types.Object
}](c *Cache, name, key string) []PT {
	return types.Cast[PT](c.ByIndex(name, key))
}

// TypedList returns every live object of kind as T.
func TypedList[T any, PT interface {
	*T
	types.Object
}](c *Cache, kind string) []PT {
	return types.Cast[PT](c.List(kind))
}
