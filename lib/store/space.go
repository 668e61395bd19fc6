package store

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/shirou/gopsutil/v4/disk"
)

// ErrNoSpace is a write refused because the disk of the store's directory
// has too little room left (see spaceGuard).
var ErrNoSpace = errors.New("not enough free disk space")

// Badger writes its write-ahead log, its value log and its new tables
// through memory maps of files it sizes up front (sparse): a page written
// where the disk has no block left is a SIGBUS, and the node died of it
// in the middle of a burst (the disk full at 1,450 claims). It never
// preallocates, so the store keeps the room those writes may take free
// and refuses its own writes (ErrNoSpace) before they could need more:
//
//   - what the open maps may still take: the sparse part of every .mem
//     file, and of every .vlog file up to its size limit;
//   - a memtable's rotation, which the writes between two looks (spaceEvery,
//     spaceBytes) can cause: a new .mem (twice the memtable), and the
//     tables of the memtable it replaces and of one still being flushed
//     (at most a memtable each);
//   - spaceMargin for those writes themselves and badger's small files.
//
// A compaction (Flatten rewrites every table) or a value-log GC round
// runs only when the room for its output is there too.
const (
	spaceMargin = 16 << 20
	// SpaceHeadroom is the room beyond the reserve below which the node
	// takes no new work (Store.Admits): the claims under way finish in
	// it, as their writes, refused, would stop them half-way.
	SpaceHeadroom = 32 << 20
	spaceEvery    = 250 * time.Millisecond
	spaceBytes    = 2 << 20
)

// spaceGuard decides whether the store may write, from the free space of
// its directory's disk and the sparse room of badger's maps, looked at
// again every spaceEvery or spaceBytes written, whichever comes first.
type spaceGuard struct {
	dir       string
	memtable  int64 // badger's memtable size
	vlogLimit int64 // badger's value-log file size
	free      func(dir string) (int64, error)
	log       *slog.Logger

	mu       sync.Mutex
	looked   time.Time // zero: look now
	written  int64     // bytes committed since the last look
	refused  error     // the last look's verdict on any write
	declined error     // the last look's verdict on new work
	// lastFree and lastNeed are the last look's figures (lastOK: known).
	lastFree, lastNeed int64
	lastOK             bool
}

func newSpaceGuard(dir string, memtable, vlogLimit int64, free func(string) (int64, error), log *slog.Logger) *spaceGuard {
	if free == nil {
		free = diskFree
	}
	return &spaceGuard{dir: dir, memtable: memtable, vlogLimit: vlogLimit, free: free, log: log}
}

// diskFree is the space an unprivileged writer may still take on dir's
// disk (root may dip into the filesystem's reserve, the store does not).
func diskFree(dir string) (int64, error) {
	u, err := disk.Usage(dir)
	if err != nil {
		return 0, err
	}
	return int64(min(u.Free, 1<<62)), nil
}

// reserve is the room kept free besides the maps' sparse part.
func (g *spaceGuard) reserve() int64 {
	return 4*g.memtable + spaceMargin
}

// sparse is what writes into badger's open maps may still take.
func (g *spaceGuard) sparse() (int64, error) {
	ents, err := os.ReadDir(g.dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, e := range ents {
		name := e.Name()
		limit := int64(-1)
		switch {
		case strings.HasSuffix(name, ".mem"):
		case strings.HasSuffix(name, ".vlog"):
			limit = g.vlogLimit
		default:
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // gone meanwhile
		}
		n += sparseRoom(fi, limit)
	}
	return n, nil
}

// sparseRoom is what fi's file may still take on disk: its size (at most
// limit when that is not negative) less the blocks it holds.
func sparseRoom(fi os.FileInfo, limit int64) int64 {
	size := fi.Size()
	if limit >= 0 {
		size = min(size, limit)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		size -= int64(st.Blocks) * 512
	}
	return max(size, 0)
}

// need is the free space the store needs now to write at all.
func (g *spaceGuard) need() (int64, error) {
	sp, err := g.sparse()
	if err != nil {
		return 0, err
	}
	return sp + g.reserve(), nil
}

// check is nil when there is room for extra bytes besides the reserve, or
// an ErrNoSpace saying how much is free and how much is needed.
func (g *spaceGuard) check(extra int64) error {
	free, need, ok := g.measure()
	return g.verdict(free, need+extra, ok)
}

// measure is the disk's free space and what the store needs of it; not ok
// when either cannot be told.
func (g *spaceGuard) measure() (free, need int64, ok bool) {
	free, err := g.free(g.dir)
	if err != nil {
		return 0, 0, false
	}
	need, err = g.need()
	if err != nil {
		return 0, 0, false
	}
	return free, need, true
}

// verdict is nil when free covers need, or when they are unknown (a disk
// that cannot be asked is no reason to stop writing).
func (g *spaceGuard) verdict(free, need int64, ok bool) error {
	if !ok || free >= need {
		return nil
	}
	return fmt.Errorf("%w: the disk of %s has %s free, the store needs %s to write safely: free space on it (or grow it)",
		ErrNoSpace, g.dir, mib(free), mib(need))
}

// allow is nil when the store may write, or the ErrNoSpace of the last
// look, which it repeats until it is spaceEvery old or spaceBytes were
// written since.
func (g *spaceGuard) allow(now time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lookLocked(now)
	return g.refused
}

// admit is allow for new work (see Store.Admits): nil while the disk has
// SpaceHeadroom beyond what allow needs.
func (g *spaceGuard) admit(now time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lookLocked(now)
	if g.refused != nil {
		return g.refused
	}
	return g.declined
}

// lookLocked looks at the disk again when the last look is spaceEvery old
// or spaceBytes were written since. Called with g.mu held.
func (g *spaceGuard) lookLocked(now time.Time) {
	if !g.looked.IsZero() && now.Sub(g.looked) < spaceEvery && g.written < spaceBytes {
		return
	}
	free, need, ok := g.measure()
	refused, declined := g.verdict(free, need, ok), g.verdict(free, need+SpaceHeadroom, ok)
	switch {
	case refused != nil && g.refused == nil:
		g.log.Error("store: refusing writes", "err", refused)
	case declined != nil && g.declined == nil:
		g.log.Warn("store: taking no new work (the API refuses writes), the disk is nearly full", "err", declined)
	case declined == nil && g.declined != nil:
		g.log.Info("store: the disk has room again")
	}
	g.looked, g.written, g.refused, g.declined = now, 0, refused, declined
	g.lastFree, g.lastNeed, g.lastOK = free, need, ok
}

// figures are the disk's free bytes and those the store needs free to write
// at all, as of a look at most spaceEvery old; ok false when unknown.
func (g *spaceGuard) figures(now time.Time) (free, need int64, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.lookLocked(now)
	return g.lastFree, g.lastNeed, g.lastOK
}

// wrote counts n bytes committed.
func (g *spaceGuard) wrote(n int64) {
	g.mu.Lock()
	g.written += n
	g.mu.Unlock()
}

// tables is the size of the store's tables: what a Flatten writes anew
// before it removes the old ones.
func (g *spaceGuard) tables() int64 {
	var n int64
	matches, _ := filepath.Glob(filepath.Join(g.dir, "*.sst"))
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// mib renders n bytes in MiB.
func mib(n int64) string {
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
