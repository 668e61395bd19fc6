package cache

import (
	"bytes"
	"sync"

	"github.com/hf-fleet/hf/lib/internal/intern"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

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

// Compact copies what the cache keeps per object afresh (see package
// intern): the maps of names, the indexes' keys and buckets, with their
// names from tab. A burst makes them among its garbage, and once that is
// collected they hold half-empty spans. The objects the cache holds decoded
// are kept as they are (readers share them). Call it once the node is idle,
// after Cool.
func (c *Cache) Compact(tab *intern.Table) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for kind, objs := range c.objs {
		c.objs[kind] = copyKeys(objs, tab)
	}
	for _, p := range c.packed {
		p.recs = copyKeys(p.recs, tab)
		p.pinned = copyKeys(p.pinned, tab)
	}
	var bs intern.Slab[bucket]
	var ns intern.Slab[named]
	for _, ix := range c.indexes {
		byKey := make(map[string]*bucket, len(ix.byKey))
		for k, b := range ix.byKey {
			byKey[tab.String(k)] = b.copy(tab, &bs, &ns)
		}
		ix.byKey = byKey
	}
}

// copyKeys returns a new map of m's entries, its keys from tab.
func copyKeys[V any](m map[string]V, tab *intern.Table) map[string]V {
	out := make(map[string]V, len(m))
	for k, v := range m {
		out[tab.String(k)] = v
	}
	return out
}
