package store

import (
	"errors"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Badger's own compactors wake every 50 ms to ask whether there is work,
// whether or not anything was written: on an idle node those wakeups were
// most of its CPU (two compactors, 1 % of a core on a small VM). The store
// runs none of them (NumCompactors 0) and compacts only after writes: a write
// kicks compactLoop, which merges level 0 into the tree once writes have
// paused for compactPause and it holds compactL0 tables, or, while a burst
// goes on, once it holds compactL0Busy. Idle, nothing wakes.
//
// The merge is badger's Flatten, which leaves one level: it rewrites the
// store's tables, not only the new ones. That is cheap while the tree is a
// few hundred MB (a million small objects take ~70 MB) and done once a burst
// is over. A burst fills a memtable every half second: merging at every
// second table rewrote the whole tree each second, and a burst of 10,000
// claims on a node holding 40,000 ran at 1,175-1,450 claims/s (p99 134-254
// ms) where it now runs at 1,671-1,769 (p99 62-76 ms). Since memtables
// are 4 MB (badgerOptions) a busy level 0 is 16 of them, as much as 8 of
// 8 MB were.
const (
	compactPause  = time.Second
	compactL0     = 2
	compactL0Busy = 16
)

// l0Stall is how many level-0 tables make badger stop flushing memtables
// until a compaction removes some; compactLoop merges at compactL0, so
// writes stall only when memtables fill faster than a merge runs (96 MB of
// 4 MB memtables, as 12 of 8 MB were).
const l0Stall = 24

// compactOptions turns badger's compactors off; see compactLoop. L0 counts
// as due from its second table (score = tables / NumLevelZeroTables > 1),
// which Flatten needs to merge a tree that has nothing below level 0 yet.
func compactOptions(opt badger.Options) badger.Options {
	return opt.
		WithNumCompactors(0).
		WithNumLevelZeroTables(1).
		WithNumLevelZeroTablesStall(l0Stall)
}

// wrote tells compactLoop that something was written. It never blocks.
func (s *Store) wrote() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// compactLoop compacts after writes until the store closes.
func (s *Store) compactLoop() {
	defer s.wg.Done()
	pause := time.NewTimer(compactPause)
	pause.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-s.kick:
		}
		// Wait for a pause in the writes; a burst merges only a deep level 0.
		for quiet := false; !quiet; {
			pause.Reset(compactPause)
			select {
			case <-s.done:
				pause.Stop()
				return
			case <-pause.C:
			}
			select {
			case <-s.kick:
				quiet = s.levelZero() >= compactL0Busy
			default:
				quiet = true
			}
		}
		s.compact()
	}
}

// levelZero is how many tables level 0 holds (0 once closed).
func (s *Store) levelZero() int {
	if err := s.enter(); err != nil {
		return 0
	}
	defer s.leave()
	return s.db.Levels()[0].NumTables
}

// compact merges level 0 into the tree when it holds compactL0 tables or more.
func (s *Store) compact() {
	if err := s.enter(); err != nil {
		return
	}
	defer s.leave()
	l0 := s.db.Levels()[0].NumTables
	if l0 < compactL0 {
		return
	}
	if s.space != nil {
		// Flatten writes the tree anew before it removes the old tables.
		if err := s.space.check(s.space.tables()); err != nil {
			s.log.Warn("compact: skipped", "err", err)
			return
		}
	}
	start := time.Now()
	if err := s.db.Flatten(1); err != nil && !errors.Is(err, badger.ErrDBClosed) {
		s.log.Warn("compact", "err", err)
		return
	}
	s.log.Debug("store compacted", "l0_tables", l0, "took", time.Since(start).Round(time.Millisecond))
}
