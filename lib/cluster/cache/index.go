package cache

import (
	"context"
	"slices"

	"github.com/hf-fleet/hf/lib/internal/intern"
	"github.com/hf-fleet/hf/lib/types"
)

// IndexFunc returns the keys an object is indexed under (none: not indexed).
// It must depend on the object alone: the cache calls it again on the object
// it holds to find the keys to drop.
type IndexFunc func(o types.Object) []string

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

// bucket is the objects under one key of an index. A packed kind's index
// holds names alone (index.set puts them with a nil object; an unpacked
// kind's never does): past fewMax, in a set, whose slots are half a map of
// objects' (10,000 bound claims are under one key of several indexes: ~2 MB
// of an idle node's heap).
type bucket struct {
	few  []named
	many map[string]types.Object
	set  map[string]struct{}
}

type named struct {
	name string
	obj  types.Object
}

func (b *bucket) put(name string, obj types.Object) {
	switch {
	case b.many != nil:
		b.many[name] = obj
		return
	case b.set != nil:
		b.set[name] = struct{}{}
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
	if obj == nil {
		b.set = make(map[string]struct{}, 2*fewMax)
		for _, n := range b.few {
			b.set[n.name] = struct{}{}
		}
		b.few = nil
		b.set[name] = struct{}{}
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
	switch {
	case b.many != nil:
		delete(b.many, name)
		return
	case b.set != nil:
		delete(b.set, name)
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
	return len(b.few) + len(b.many) + len(b.set)
}

// has reports whether name is under the key.
func (b *bucket) has(name string) bool {
	switch {
	case b.many != nil:
		_, ok := b.many[name]
		return ok
	case b.set != nil:
		_, ok := b.set[name]
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
	for name := range b.set {
		out = append(out, name)
	}
	return out
}

// objects returns the objects under the key, in no order: for an
// unpacked kind's index (a packed kind's holds names alone).
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

// Index adds an index named name over the objects of kind.
func (c *Cache) Index(name, kind string, fn IndexFunc) {
	ix := &index{kind: kind, fn: fn, byKey: map[string]*bucket{}, packed: c.packed[kind]}
	c.indexes[name] = ix
	c.byKind[kind] = append(c.byKind[kind], ix)
}

// ByIndexNow is ByIndex once the cache holds every write the store had
// when it was called (read-your-writes), or ctx's error.
func (c *Cache) ByIndexNow(ctx context.Context, name, key string) ([]types.Object, error) {
	if err := c.WaitSeq(ctx, c.st.Seq()); err != nil {
		return nil, err
	}
	return c.ByIndex(name, key), nil
}

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

// TypedIndex returns the objects under key in the named index as T.
func TypedIndex[T any, PT interface {
	*T
	types.Object
}](c *Cache, name, key string) []PT {
	return types.Cast[PT](c.ByIndex(name, key))
}

// copy returns a new bucket of b's objects, their names from tab, the
// bucket and its list from slabs (see package intern).
func (b *bucket) copy(tab *intern.Table, bs *intern.Slab[bucket], ns *intern.Slab[named]) *bucket {
	c := bs.New()
	switch {
	case b.many != nil:
		c.many = copyKeys(b.many, tab)
		return c
	case b.set != nil:
		c.set = copyKeys(b.set, tab)
		return c
	}
	c.few = ns.Make(len(b.few))
	for i, n := range b.few {
		c.few[i] = named{tab.String(n.name), n.obj}
	}
	return c
}
