package member

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/hf-fleet/hf/lib/store"
)

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

// chainEntry folds one entry into a running hash.
func chainEntry(h uint64, e *entry) uint64 {
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

// Digest summarises a store's records, tombstones included: how many, and
// the root of the hash tree anti-entropy compares (hashTree). Two stores
// hold the same records exactly when their digests are equal (up to 64-bit
// hash collisions). Digests are comparable with ==.
type Digest struct {
	// Records counts the records, tombstones included.
	Records int
	Root    uint64
}

// ComputeDigest scans st and returns its digest. It builds the tree from
// scratch: for tests and tools; members keep theirs as the store changes.
func ComputeDigest(st *store.Store) (Digest, error) {
	t, err := scanTree(st)
	if err != nil {
		return Digest{}, err
	}
	root, n := t.root()
	return Digest{Records: n, Root: root}, nil
}

// scanTree builds a hash tree from one scan of st.
func scanTree(st *store.Store) (*hashTree, error) {
	t := newHashTree()
	err := st.Scan(func(r store.Record) error {
		t.apply(&r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("digest: %w", err)
	}
	return t, nil
}

// reconcile compares this node's entries in the leaves that differ (mine,
// as hashTree.entries returns them) with the peer's entries there (theirs)
// and returns the keys to push (the peer lacks them or holds another copy)
// and to pull (the peer holds another copy or this node lacks them), both
// in key order. Copies that differ are both pushed and pulled: each side
// merges the other's facet by facet, since either may hold a newer facet.
// When inFlight is not 0, a copy of this node's whose version has an HLC at
// or above it is not pushed, and one of the peer's it marked unsettled is
// not pulled: replication is still delivering them. Entries of theirs
// outside leaves are ignored.
func reconcile(mine []entry, leaves []int, theirs []leafEntry, inFlight uint64) (push, pull []Key) {
	peer := make(map[Key]leafEntry, len(theirs))
	for _, e := range theirs {
		peer[e.Key] = e
	}
	own := make(map[Key]bool, len(mine))
	for _, e := range mine {
		own[e.Key] = true
		p, ok := peer[e.Key]
		switch {
		case !ok:
			if settled(e.Version, inFlight) {
				push = append(push, e.Key)
			}
		case p.Hash != e.hash:
			if settled(e.Version, inFlight) {
				push = append(push, e.Key)
			}
			if p.Settled {
				pull = append(pull, e.Key)
			}
		}
	}
	in := make(map[int]bool, len(leaves))
	for _, b := range leaves {
		in[b] = true
	}
	for _, e := range theirs {
		if !own[e.Key] && e.Settled && in[leafOf(e.Key)] {
			pull = append(pull, e.Key)
		}
	}
	slices.SortFunc(push, compareKeys)
	slices.SortFunc(pull, compareKeys)
	return slices.Compact(push), slices.Compact(pull)
}
