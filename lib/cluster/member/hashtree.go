package member

import (
	"math"
	"slices"
	"sync"
	"time"

	"github.com/hf-fleet/hf/lib/internal/intern"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// The hash tree anti-entropy compares: NumLeaves leaf buckets (a record's
// bucket is hash(kind/name)), and above them treeDepth levels of treeFanout
// children each, up to one root. Level 0 is the root, level treeDepth the
// leaves; node i of level l has the children treeFanout*i .. treeFanout*i+15
// on level l+1. Numbers are part of the wire format.
const (
	treeFanout = 16
	treeDepth  = 3
	// NumLeaves is how many leaf buckets the hash tree has (treeFanout to
	// the power treeDepth). Exchanging one level under one node costs 128
	// bytes of hashes; a leaf holds 1/4096 of the records (~24 of 100,000).
	NumLeaves = 4096
)

// levelWidth is how many nodes level l has.
func levelWidth(l int) int {
	w := 1
	for range l {
		w *= treeFanout
	}
	return w
}

// entry is one record as the tree sees it: its key, its version (the newest
// of its facets) and its fingerprint (store.Record.Fingerprint: all its facet
// versions), so two copies that differ in an older facet differ here too.
type entry struct {
	Key
	Version types.Version
	Sum     uint64
	// hash is entryHash of the above; seq the store's Seq it came with.
	hash uint64
	seq  uint64
}

// entryHash is what one entry adds to its leaf: FNV-1a over (kind, name,
// version, fingerprint), then mixed so that sums of hashes do not cancel
// by accident (FNV's last bytes barely reach its high bits).
func entryHash(k Key, v types.Version, sum uint64) uint64 {
	e := entry{Key: k, Version: v, Sum: sum}
	return mix64(chainEntry(fnvOffset, &e))
}

// mix64 is the splitmix64 finaliser: every input bit reaches every output bit.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// hashTree is a store's records, tombstones included, in NumLeaves buckets,
// with a hash for every node of the tree over them. A node's hash is the sum
// (mod 2^64) of the entry hashes beneath it, so a write changes one leaf and
// its treeDepth ancestors by the same delta: the tree follows the store one
// record at a time (keeper) and is never recomputed for a round. Two trees
// over the same records are equal node for node; where records differ, the
// nodes above them differ (up to 64-bit collisions), and nothing else does.
//
// A hashTree is safe for concurrent use: one writer (the keeper) and any
// number of readers (rounds), which copy what they take.
type hashTree struct {
	mu sync.RWMutex
	// sums[l][i] and counts[l][i]: node i of level l.
	sums   [treeDepth + 1][]uint64
	counts [treeDepth + 1][]int32
	// leaves hold each bucket's entries in key order.
	leaves [NumLeaves][]entry
	// tombs are the keys among the entries whose records Get does not
	// return (tombstones, facets without their object), with what a
	// collection picks them by; anti-entropy reads the record itself from
	// the store when it sends one (the store holds it until it is
	// collected). A full record each took ~220 bytes of pointerful heap:
	// 100,000 tombstones, five bursts of 10,000 claims deleted within the
	// ten minutes they are kept, made 22 MB the collector scanned over and
	// over, and bursts slowed by a fifth.
	tombs map[Key]tombEntry
	kinds map[string]string // interned kind names
	// seq is the highest store Seq applied: a watch resumes after it.
	seq uint64
	// collected is the store's Collected when the build began.
	collected uint64
}

func newHashTree() *hashTree {
	t := &hashTree{tombs: map[Key]tombEntry{}, kinds: map[string]string{}}
	for l := range t.sums {
		t.sums[l] = make([]uint64, levelWidth(l))
		t.counts[l] = make([]int32, levelWidth(l))
	}
	return t
}

// leafOf is the leaf bucket of k.
func leafOf(k Key) int {
	h := fnvAddString(fnvOffset, k.Kind)
	h = fnvAdd(h, []byte{'/'})
	h = fnvAddString(h, k.Name)
	return int(h % NumLeaves)
}

// apply files rec, replacing the entry of its key unless that came with a
// later Seq (a record without Seq, from a scan of another kind, always
// replaces).
func (t *hashTree) apply(rec *store.Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	kind, ok := t.kinds[rec.Kind]
	if !ok {
		kind = rec.Kind
		t.kinds[kind] = kind
	}
	k := Key{Kind: kind, Name: rec.Name}
	e := entry{Key: k, Version: rec.Version, Sum: rec.Fingerprint(), seq: rec.Seq}
	e.hash = entryHash(k, e.Version, e.Sum)
	b := leafOf(k)
	es := t.leaves[b]
	i, found := slices.BinarySearchFunc(es, k, func(x entry, k Key) int { return compareKeys(x.Key, k) })
	var delta uint64
	if found {
		if rec.Seq != 0 && rec.Seq <= es[i].seq {
			return
		}
		delta = e.hash - es[i].hash
		es[i] = e
	} else {
		delta = e.hash
		t.leaves[b] = slices.Insert(es, i, e)
	}
	for l, n := treeDepth, b; l >= 0; l, n = l-1, n/treeFanout {
		t.sums[l][n] += delta
		if !found {
			t.counts[l][n]++
		}
	}
	if rec.Deleted {
		t.tombs[k] = newTombEntry(rec, e.Version)
	} else {
		delete(t.tombs, k)
	}
	t.seq = max(t.seq, rec.Seq)
}

// trim gives each leaf's entries a slice of their own size, carved from
// chunks (see package intern), and their keys their names from tab. A leaf
// grows by doubling as records come: over 30,000 records the tree held
// ~2.5 MB of room that an idle node does not fill; and the names were the
// ones the burst's writes decoded, each keeping a span of the burst's heap.
func (t *hashTree) trim(tab *intern.Table) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var slab intern.Slab[entry]
	for b, es := range t.leaves {
		c := slab.Make(len(es))
		copy(c, es)
		for i := range c {
			c[i].Name = tab.String(c[i].Name) // (kinds are interned already)
		}
		t.leaves[b] = c
	}
}

// remove drops the entry of k when it is at v: a tombstone the collector
// removed from the store, which sends no event for it.
func (t *hashTree) remove(k Key, v types.Version) {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := leafOf(k)
	es := t.leaves[b]
	i, found := slices.BinarySearchFunc(es, k, func(x entry, k Key) int { return compareKeys(x.Key, k) })
	if !found || es[i].Version != v {
		return
	}
	delta := es[i].hash
	t.leaves[b] = slices.Delete(es, i, i+1)
	for l, n := treeDepth, b; l >= 0; l, n = l-1, n/treeFanout {
		t.sums[l][n] -= delta
		t.counts[l][n]--
	}
	delete(t.tombs, k)
}

// hashLocked is node i of level l as the wire carries it: its sum, except
// that a node with entries never reads 0, which means empty. t.mu is held.
func (t *hashTree) hashLocked(l, i int) uint64 {
	h := t.sums[l][i]
	if h == 0 && t.counts[l][i] > 0 {
		return 1
	}
	return h
}

// root is the root's hash and how many entries the tree holds.
func (t *hashTree) root() (uint64, int) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.hashLocked(0, 0), int(t.counts[0][0])
}

// lastSeq is the highest store Seq applied.
func (t *hashTree) lastSeq() uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.seq
}

// children returns the hashes of the children, on level l, of each of
// parents (nodes of level l-1), treeFanout per parent, in order.
func (t *hashTree) children(l int, parents []int) []uint64 {
	t.mu.RLock()
	defer t.mu.RUnlock()
	out := make([]uint64, 0, len(parents)*treeFanout)
	for _, p := range parents {
		for c := p * treeFanout; c < (p+1)*treeFanout; c++ {
			out = append(out, t.hashLocked(l, c))
		}
	}
	return out
}

// levelDiff is how one level of a peer's tree compares with this one's,
// node by node (indexes on that level, in order).
type levelDiff struct {
	// Differ: both hold records there, not the same ones: descend.
	Differ []int
	// Empty: the peer holds records there, this tree none.
	Empty []int
	// Missing: this tree holds records there, the peer none.
	Missing []int
}

// compare compares the peer's hashes of the children of parents on level l
// (as children returns them) with this tree's. The caller has checked
// len(theirs) == treeFanout*len(parents).
func (t *hashTree) compare(l int, parents []int, theirs []uint64) levelDiff {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var d levelDiff
	j := 0
	for _, p := range parents {
		for c := p * treeFanout; c < (p+1)*treeFanout; c++ {
			mine, th := t.hashLocked(l, c), theirs[j]
			j++
			switch {
			case mine == th:
			case mine == 0:
				d.Empty = append(d.Empty, c)
			case th == 0:
				d.Missing = append(d.Missing, c)
			default:
				d.Differ = append(d.Differ, c)
			}
		}
	}
	return d
}

// leafRange is the leaves under node i of level l.
func leafRange(l, i int) (from, to int) {
	span := levelWidth(treeDepth - l)
	return i * span, (i + 1) * span
}

// under returns the keys of the entries under node i of level l whose
// version is settled (see settled), in key order within each leaf.
func (t *hashTree) under(l, i int, inFlight uint64) []Key {
	t.mu.RLock()
	defer t.mu.RUnlock()
	from, to := leafRange(l, i)
	var out []Key
	for b := from; b < to; b++ {
		for _, e := range t.leaves[b] {
			if settled(e.Version, inFlight) {
				out = append(out, e.Key)
			}
		}
	}
	return out
}

// entries returns a copy of the entries of leaves.
func (t *hashTree) entries(leaves []int) []entry {
	t.mu.RLock()
	defer t.mu.RUnlock()
	var out []entry
	for _, b := range leaves {
		out = append(out, t.leaves[b]...)
	}
	return out
}

// tombEntry is what the tree keeps of a record Get does not return.
type tombEntry struct {
	// version is the record's (its leaf entry's: the same string).
	version types.Version
	seq     uint64
	// tomb: the record has a tombstone, written at deletedAt (Unix
	// nanoseconds). Facets without their object have none, and no
	// collection removes them.
	tomb      bool
	deletedAt int64
}

func newTombEntry(rec *store.Record, v types.Version) tombEntry {
	te := tombEntry{version: v, seq: rec.Seq, tomb: !rec.Tomb.IsZero(), deletedAt: math.MinInt64}
	if !rec.DeletedAt.IsZero() {
		te.deletedAt = rec.DeletedAt.UnixNano()
	}
	return te
}

// deletedBefore reports whether the entry is a tombstone written before t
// (one with no time written counts as written before any).
func (te tombEntry) deletedBefore(t time.Time) bool {
	return te.tomb && te.deletedAt < t.UnixNano()
}

// hasTomb reports whether the tree holds k as a record Get does not return.
func (t *hashTree) hasTomb(k Key) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	_, ok := t.tombs[k]
	return ok
}

// settled reports whether a copy at v is older than inFlight (0: every copy
// is): younger ones are most likely still on their way by push.
func settled(v types.Version, inFlight uint64) bool {
	return inFlight == 0 || v.HLC < inFlight
}
