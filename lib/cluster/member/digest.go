package member

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// NumBuckets is how many buckets a digest splits the keys into. Exchanging
// the bucket hashes costs 8 KB; a difference then narrows the entry lists
// exchanged to the differing buckets.
const NumBuckets = 1024

// FNV-1a, 64 bit: fast, stable across releases and platforms.
const (
	fnvOffset uint64 = 14695981039346656037
	fnvPrime  uint64 = 1099511628211
)

func fnvAdd(h uint64, b []byte) uint64 {
	for _, c := range b {
		h ^= uint64(c)
		h *= fnvPrime
	}
	return h
}

func fnvAddString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}

// bucketOf is the bucket of kind/name.
func bucketOf(k Key) int {
	h := fnvAddString(fnvOffset, k.Kind)
	h = fnvAdd(h, []byte{'/'})
	h = fnvAddString(h, k.Name)
	return int(h % NumBuckets)
}

// chainEntry folds one entry into a bucket's running hash.
func chainEntry(h uint64, e *Entry) uint64 {
	var buf [8]byte
	h = fnvAddString(h, e.Kind)
	h = fnvAdd(h, []byte{0})
	h = fnvAddString(h, e.Name)
	h = fnvAdd(h, []byte{0})
	binary.BigEndian.PutUint64(buf[:], e.Version.HLC)
	h = fnvAdd(h, buf[:])
	h = fnvAddString(h, e.Version.Node)
	binary.BigEndian.PutUint64(buf[:], e.Sum)
	h = fnvAdd(h, buf[:])
	return fnvAdd(h, []byte{0})
}

func compareKeys(a, b Key) int {
	if c := cmp.Compare(a.Kind, b.Kind); c != 0 {
		return c
	}
	return cmp.Compare(a.Name, b.Name)
}

// Digest summarises a store's records, tombstones included: per bucket a hash
// over the bucket's (kind, name, version) entries in key order, 0 for an empty
// bucket. Two stores hold the same records exactly when their digests are
// equal (up to 64-bit hash collisions). Digests are comparable with ==.
type Digest struct {
	// Records counts the records, tombstones included.
	Records int
	Hashes  [NumBuckets]uint64
}

// ComputeDigest scans st and returns its digest.
func ComputeDigest(st *store.Store) (Digest, error) {
	s, err := scanSnapshot(st)
	if err != nil {
		return Digest{}, err
	}
	return s.digest, nil
}

// Diff returns the buckets where d and o differ, in order.
func (d Digest) Diff(o Digest) []int {
	return differing(d.Hashes[:], o.Hashes[:])
}

// snapshot is a digest with the entries behind it, grouped by bucket and
// sorted by key within each bucket.
type snapshot struct {
	digest  Digest
	entries [NumBuckets][]Entry
	// tombs are the tombstones among the entries: anti-entropy sends them
	// from here (the store's Get does not return tombstones).
	tombs map[Key]store.Record
	// seq is the store's Seq when the scan started (for caching).
	seq uint64
}

// newSnapshot groups, sorts and hashes entries; it keeps the slice's backing
// array.
func newSnapshot(entries []Entry) *snapshot {
	s := &snapshot{tombs: map[Key]store.Record{}}
	s.digest.Records = len(entries)
	for _, e := range entries {
		b := bucketOf(e.Key)
		s.entries[b] = append(s.entries[b], e)
	}
	for b := range s.entries {
		es := s.entries[b]
		if len(es) == 0 {
			continue
		}
		slices.SortFunc(es, func(x, y Entry) int { return compareKeys(x.Key, y.Key) })
		h := fnvOffset
		for i := range es {
			h = chainEntry(h, &es[i])
		}
		if h == 0 { // 0 means empty; a real hash of 0 must not look empty
			h = 1
		}
		s.digest.Hashes[b] = h
	}
	return s
}

// scanSnapshot reads every record of st into a snapshot.
func scanSnapshot(st *store.Store) (*snapshot, error) {
	seq := st.Seq()
	var entries []Entry
	var tombs []store.Record
	err := st.Scan(func(r store.Record) error {
		entries = append(entries, Entry{Key: Key{Kind: r.Kind, Name: r.Name}, Version: r.Version, Sum: r.Fingerprint()})
		if r.Deleted {
			tombs = append(tombs, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("digest: %w", err)
	}
	s := newSnapshot(entries)
	s.seq = seq
	for _, r := range tombs {
		s.tombs[Key{Kind: r.Kind, Name: r.Name}] = r
	}
	return s, nil
}

// differing returns the indexes where a and b differ; a missing index counts
// as an empty (0) bucket.
func differing(a, b []uint64) []int {
	var out []int
	for i := range max(len(a), len(b)) {
		var x, y uint64
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			out = append(out, i)
		}
	}
	return out
}

// reconcile compares this node's entries in buckets with the peer's entries
// for them (theirs) and returns the keys to push (the peer lacks them or holds
// another copy) and to pull (the peer holds another copy or this node lacks
// them), both in key order. Copies that differ are both pushed and pulled:
// each side merges the other's facet by facet, since either may hold a newer
// facet. When inFlight is not 0, a copy whose version has an HLC at or above
// it is left alone: replication is still delivering it.
func reconcile(mine *snapshot, buckets []int, theirs []Entry, inFlight uint64) (push, pull []Key) {
	settled := func(v types.Version) bool { return inFlight == 0 || v.HLC < inFlight }
	peer := make(map[Key]Entry, len(theirs))
	for _, e := range theirs {
		peer[e.Key] = e
	}
	own := map[Key]bool{}
	in := map[int]bool{}
	for _, b := range buckets {
		if b < 0 || b >= NumBuckets || in[b] {
			continue
		}
		in[b] = true
		for _, e := range mine.entries[b] {
			own[e.Key] = true
			p, ok := peer[e.Key]
			switch {
			case !ok:
				if settled(e.Version) {
					push = append(push, e.Key)
				}
			case p.Sum != e.Sum || p.Version != e.Version:
				if settled(e.Version) {
					push = append(push, e.Key)
				}
				if settled(p.Version) {
					pull = append(pull, e.Key)
				}
			}
		}
	}
	for _, e := range theirs {
		if !own[e.Key] && in[bucketOf(e.Key)] && settled(e.Version) {
			pull = append(pull, e.Key)
		}
	}
	slices.SortFunc(pull, compareKeys)
	pull = slices.Compact(pull)
	return push, pull
}
