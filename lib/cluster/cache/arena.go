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
// for as long as its holder keeps it, compaction or not.
//
// The arena is guarded by the cache's lock: written with it held for
// writing, read with it held for reading.
type arena struct {
	chunks     [][]byte
	live, dead int // bytes
}

// loc is where a record is in its arena: a map value without pointers, so
// the collector does not scan the map's values.
type loc struct{ chunk, off, n uint32 }

// put copies b into the arena.
func (a *arena) put(b []byte) loc {
	last := len(a.chunks) - 1
	if last < 0 || cap(a.chunks[last])-len(a.chunks[last]) < len(b) {
		a.chunks = append(a.chunks, make([]byte, 0, max(arenaChunk, len(b))))
		last++
	}
	c := a.chunks[last]
	off := len(c)
	a.chunks[last] = append(c, b...)
	a.live += len(b)
	return loc{chunk: uint32(last), off: uint32(off), n: uint32(len(b))}
}

// get returns the record at l. Its capacity ends with it: appending to it
// copies.
func (a *arena) get(l loc) []byte {
	end := l.off + l.n
	return a.chunks[l.chunk][l.off:end:end]
}

// free counts the record at l dead.
func (a *arena) free(l loc) {
	a.live -= int(l.n)
	a.dead += int(l.n)
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
// and drops the old chunks.
func (a *arena) compact(recs map[string]loc) {
	old := a.chunks
	*a = arena{}
	for name, l := range recs {
		end := l.off + l.n
		recs[name] = a.put(old[l.chunk][l.off:end])
	}
}
