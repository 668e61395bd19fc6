// Package intern moves long-lived data out of a burst's heap.
//
// The Go heap does not move objects: a span stays as long as one object in
// it lives. The names, index entries and ledger entries a node keeps for
// each object are made during a burst of writes, among the burst's garbage,
// so once the garbage is collected they keep spans that are mostly empty
// (an idle node with 30,000 objects: ~47 MB of objects in ~82 MB of spans).
// Copying such data into small allocations of its own when the node goes
// idle does not help much (measured: the spans shrank by ~4.5 MB): the
// copies fill the holes the burst left in the same spans, and the
// originals leave new holes as they go. So a pass copies into chunks of
// its own instead: a Table carves its strings and bytes, a Slab its values,
// out of chunks of 64 KB, which the heap gives spans of their own; the
// spans that held the originals and the burst's garbage then empty
// entirely and go back to the OS. A chunk lives while any value carved
// from it does: what a later write replaces stays until the next pass
// copies the rest out.
//
// A Table also gives each distinct string one copy during a pass, so a
// name held by several structures is copied once and shared again.
package intern

import (
	"bytes"
	"unsafe"
)

// chunkSize is the size of the chunks values are carved from: above the
// heap's largest size class (32 KB), so each chunk has a span of its own.
const chunkSize = 64 << 10

// Table hands out one fresh copy of each distinct string, and of each
// distinct byte slice, from chunks of its own. Use it for one compaction
// pass and drop it: it keeps every string and slice it was given.
type Table struct {
	m     map[string]string
	bytes map[string][]byte
	buf   []byte // the chunk being filled
}

// New returns an empty table.
func New() *Table { return &Table{m: map[string]string{}} }

// String returns the table's copy of s, made on first use. The empty string
// is returned as it is. A nil Table returns s.
func (t *Table) String(s string) string {
	if t == nil || s == "" {
		return s
	}
	if c, ok := t.m[s]; ok {
		return c
	}
	b := t.carve(len(s))
	copy(b, s)
	c := unsafe.String(unsafe.SliceData(b), len(b))
	t.m[c] = c
	return c
}

// Bytes returns the table's copy of b (nil for nil), made on first use
// and shared by every equal b after it: read only. Its capacity is its
// length: an append to it copies, and never writes into the chunk. A nil
// Table returns a plain copy.
func (t *Table) Bytes(b []byte) []byte {
	if t == nil || b == nil {
		return bytes.Clone(b)
	}
	if c, ok := t.bytes[string(b)]; ok {
		return c
	}
	c := t.carve(len(b))
	copy(c, b)
	if t.bytes == nil {
		t.bytes = map[string][]byte{}
	}
	t.bytes[unsafe.String(unsafe.SliceData(c), len(c))] = c
	return c
}

// carve returns n fresh bytes of the current chunk, starting one when it
// has too little room left; a value above an eighth of a chunk gets an
// allocation of its own.
func (t *Table) carve(n int) []byte {
	if n > chunkSize/8 {
		return make([]byte, n)
	}
	if cap(t.buf)-len(t.buf) < n {
		t.buf = make([]byte, 0, chunkSize)
	}
	off := len(t.buf)
	t.buf = t.buf[:off+n]
	return t.buf[off : off+n : off+n]
}

// Len is how many distinct strings the table holds.
func (t *Table) Len() int { return len(t.m) }

// Slab hands out values of T, and slices of them, from chunks of its own.
// Its zero value is ready; use one for a compaction pass and drop it.
type Slab[T any] struct{ free []T }

// perChunk is how many values of T a chunk holds.
func (s *Slab[T]) perChunk() int {
	var zero T
	return max(16, chunkSize/max(1, int(unsafe.Sizeof(zero))))
}

// New returns a pointer to a zero T of the slab.
func (s *Slab[T]) New() *T { return &s.Make(1)[0] }

// Make returns n zero values of T, the slice's capacity its length (an
// append copies it out of the slab). n above a quarter of a chunk gets an
// allocation of its own.
func (s *Slab[T]) Make(n int) []T {
	per := s.perChunk()
	if n > per/4 {
		return make([]T, n)
	}
	if len(s.free) < n {
		s.free = make([]T, per)
	}
	c := s.free[:n:n]
	s.free = s.free[n:]
	return c
}

// Shrunk returns a copy of m in a map of its size. A Go map keeps the room
// of its fullest moment after its keys are deleted (a burst's 10,000 claims
// in flight: ~1 MB), and an idle node should not; nil stays nil.
func Shrunk[K comparable, V any](m map[K]V) map[K]V {
	if m == nil {
		return nil
	}
	out := make(map[K]V, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Trimmed returns a copy of s in an array of its length, nil when s is
// empty: a slice that grew in a burst and shrank since keeps its array
// (even at length 0), and so does any reslice of it.
func Trimmed[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	out := make([]T, len(s))
	copy(out, s)
	return out
}
