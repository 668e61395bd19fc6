package testdriver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"

	fastjson "github.com/goccy/go-json"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// StateFile is the name of the state file in the driver's data dir: a
// snapshot of what the driver holds.
const StateFile = "testdriver.json"

// JournalFile holds the changes since the snapshot, one JSON line each, so
// that an allocation writes one line instead of the whole state (a node
// holding 10,000 test machines would otherwise rewrite them all for each).
const JournalFile = "testdriver.journal"

const stateVersion = 1

// minCompact is the least number of journal lines before the journal is
// folded into the snapshot; beyond it, when it has more lines than the
// driver holds resources, so writes stay O(1) amortized.
const minCompact = 256

// journalLine is one change: a resource held (Put) or released (Del).
type journalLine struct {
	Put *types.Resource `json:"put,omitempty"`
	Del string          `json:"del,omitempty"`
}

func stateFile(dataDir string) drivers.ResourceFile[types.Resource] {
	return drivers.ResourceFile[types.Resource]{Dir: dataDir, Name: StateFile, Version: stateVersion}
}

// Holdings reads the resources a test driver holds from its data dir, as
// a stopped or running driver left them there: for checks from outside
// the process (the fault harness reads every host's).
// A read that crosses a compaction (snapshot replaced, journal removed) can
// miss changes, so it reads until two reads agree.
func Holdings(dataDir string) (map[string]types.Resource, error) {
	if dataDir == "" {
		return nil, errors.New("holdings: no data dir")
	}
	last, err := loadState(dataDir)
	if err != nil {
		return nil, err
	}
	for range 10 {
		cur, err := loadState(dataDir)
		if err != nil {
			return nil, err
		}
		if maps.EqualFunc(last, cur, func(a, b types.Resource) bool { return a.ID == b.ID }) {
			return cur, nil
		}
		last = cur
	}
	return nil, errors.New("holdings: the state kept changing while read")
}

// loadState reads the resources held in dataDir, the snapshot and then the
// journal; no files mean none. An empty dataDir keeps nothing on disk. A
// last journal line cut short by a crash is ignored (its change never
// returned to its caller).
func loadState(dataDir string) (map[string]types.Resource, error) {
	f := stateFile(dataDir)
	rs, err := f.Load()
	if err != nil {
		return nil, err
	}
	held := map[string]types.Resource{}
	for i, r := range rs {
		if r.ID == "" {
			return nil, fmt.Errorf("load state %s: resource %d has no id", f.Path(), i)
		}
		if _, dup := held[r.ID]; dup {
			return nil, fmt.Errorf("load state %s: resource %s listed twice", f.Path(), r.ID)
		}
		held[r.ID] = r
	}
	if dataDir == "" {
		return held, nil
	}
	path := filepath.Join(dataDir, JournalFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return held, nil
	}
	if err != nil {
		return nil, fmt.Errorf("load state: %w", err)
	}
	lines := bytes.Split(b, []byte("\n"))
	for i, line := range lines {
		last := i == len(lines)-1
		if last && len(line) == 0 {
			break // the file ends with a newline
		}
		var l journalLine
		if err := json.Unmarshal(line, &l); err != nil {
			if last {
				break // the last line, cut short: its change never returned
			}
			return nil, fmt.Errorf("load state %s: line %d: corrupt (repair or remove the file): %w", path, i+1, err)
		}
		switch {
		case l.Put != nil && l.Put.ID != "":
			held[l.Put.ID] = *l.Put
		case l.Del != "":
			delete(held, l.Del)
		default:
			return nil, fmt.Errorf("load state %s: line %d: neither put nor del", path, i+1)
		}
	}
	return held, nil
}

// journalLocked records one change; it folds the journal into the snapshot
// when it has grown past its bound.
func (d *Driver) journalLocked(l journalLine) error {
	dir := d.env.DataDir
	if dir == "" {
		return nil
	}
	b, err := fastjson.Marshal(l)
	if err != nil {
		return fmt.Errorf("save state: %w", err)
	}
	if d.journal == nil {
		// Kept open until the next snapshot removes the file: a line is
		// then one write, not an open, a stat, a write and a close.
		f, err := os.OpenFile(filepath.Join(dir, JournalFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return fmt.Errorf("save state: %w", err)
		}
		st, err := f.Stat()
		if err != nil {
			_ = f.Close()
			return fmt.Errorf("save state: %w", err)
		}
		d.journal, d.journalSize = f, st.Size()
	}
	n, err := d.journal.Write(append(b, '\n'))
	if err != nil {
		// Cut off what was written, so the next line starts a line.
		_ = d.journal.Truncate(d.journalSize)
		return fmt.Errorf("save state: %w", err)
	}
	d.journalSize += int64(n)
	d.journaled++
	if d.journaled > max(minCompact, len(d.held)) {
		// The change is on disk already; a snapshot that fails is retried
		// at the next change.
		if err := d.compactLocked(); err != nil {
			d.log.Warn("test driver: folding the journal into the snapshot failed", "err", err)
		}
	}
	return nil
}

// compactLocked writes the snapshot (atomically) and drops the journal. A
// crash in between leaves a journal whose changes the snapshot already
// holds; replaying them again changes nothing.
func (d *Driver) compactLocked() error {
	if d.env.DataDir == "" {
		return nil
	}
	if err := stateFile(d.env.DataDir).Save(d.sortedLocked()); err != nil {
		return err
	}
	d.closeJournalLocked()
	if err := os.Remove(filepath.Join(d.env.DataDir, JournalFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("save state: %w", err)
	}
	d.journaled = 0
	return nil
}

// closeJournalLocked closes the open journal file, if any.
func (d *Driver) closeJournalLocked() {
	if d.journal != nil {
		_ = d.journal.Close()
		d.journal = nil
	}
}

// Close implements io.Closer: it closes the journal file. The driver's
// state stays on disk; a closed driver must not allocate or release again.
func (d *Driver) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.closeJournalLocked()
	return nil
}
