package cache

// arenaChunk is the size of an arena's chunks (a larger record gets a chunk
// of its own).
const arenaChunk = 256 << 10

// arena holds a packed kind's records end to end in large chunks, rather
// than one allocation each. A burst writes each claim and machine about
// five times: with an allocation per record, the four that a later write
// replaces leave holes among the ones that stay, and the heap keeps the
// half-empty spans (an idle node held ~40 MB more heap than its objects).
// Here a replaced record is only counted dead, and the arena is compacted
// (its live records copied into new chunks, the old chunks dropped whole)
// once it holds more dead bytes than live ones, and when the node goes
// idle (Cool). Written bytes never change: a slice get returned stays valid
// for as long as its holder keeps it, compaction or not. A compaction at
// Cool also squeezes the records written since the last (see squeezer).
//
// The arena is guarded by the cache's lock: written with it held for
// writing, read with it held for reading.
type arena struct {
	chunks     [][]byte
	live, dead int // bytes
	// unsqueezed is how many live records are plain, not tried yet.
	unsqueezed int
}

// form is how a record is held.
type form uint8

const (
	plain          form = iota // as written, not squeezed yet
	squeezed                   // squeezed: restore it to read it
	incompressible             // as written: squeezing did not shrink it
)

// loc is where a record is in its arena, and in which form: a map value
// without pointers, so the collector does not scan the map's values.
type loc struct {
	chunk, off, n uint32
	form          form
}

// put copies b, a plain record, into the arena.
func (a *arena) put(b []byte) loc { return a.place(b, plain) }

// place copies b, a record in form f, into the arena.
func (a *arena) place(b []byte, f form) loc {
	last := len(a.chunks) - 1
	if last < 0 || cap(a.chunks[last])-len(a.chunks[last]) < len(b) {
		a.chunks = append(a.chunks, make([]byte, 0, max(arenaChunk, len(b))))
		last++
	}
	c := a.chunks[last]
	off := len(c)
	a.chunks[last] = append(c, b...)
	a.live += len(b)
	if f == plain {
		a.unsqueezed++
	}
	return loc{chunk: uint32(last), off: uint32(off), n: uint32(len(b)), form: f}
}

// get returns the record at l. Its capacity ends with it: appending to it
// copies.
func (a *arena) get(l loc) []byte {
	end := l.off + l.n
	return a.chunks[l.chunk][l.off:end:end]
}

// size is the bytes the arena's chunks take.
func (a *arena) size() int64 {
	var n int64
	for _, c := range a.chunks {
		n += int64(cap(c))
	}
	return n
}

// free counts the record at l dead.
func (a *arena) free(l loc) {
	a.live -= int(l.n)
	a.dead += int(l.n)
	if l.form == plain {
		a.unsqueezed--
	}
}

// due says whether the arena holds enough dead bytes to be compacted:
// more than live ones and more than four chunks (idle: any).
func (a *arena) due(idle bool) bool {
	if idle {
		return a.dead > 0
	}
	return a.dead > a.live && a.dead > 4*arenaChunk
}

// compact copies the live records of recs into new chunks, updating recs,
// and drops the old chunks. With squeeze (not nil), it squeezes the plain
// records on the way: squeeze returns a record's squeezed form (in a buffer
// it may reuse), nil when it cannot.
func (a *arena) compact(recs map[string]loc, squeeze func([]byte) []byte) {
	old := a.chunks
	*a = arena{}
	for name, l := range recs {
		end := l.off + l.n
		b := old[l.chunk][l.off:end]
		if squeeze == nil || l.form != plain {
			recs[name] = a.place(b, l.form)
			continue
		}
		if s := squeeze(b); s != nil && len(s) < len(b) {
			recs[name] = a.place(s, squeezed)
			continue
		}
		recs[name] = a.place(b, incompressible)
	}
}
