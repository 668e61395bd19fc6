package store

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// badgerOptions sizes badger for a small daemon: with these settings 100k
// 500-byte records take tens of MB, where badger's defaults take 200+ MB
// (64 MB memtables x 5, a 256 MB block cache, 1 GB value-log files). The
// value log holds the values above the threshold only (few records are),
// in 16 MB files: the store keeps free what the current one may still
// take on disk (spaceGuard). Badger's conflict detection is off: the store
// commits its writes one transaction at a time (wmu), and PutMeta's
// transactions read nothing, so no transaction can conflict; with it on,
// badger kept each committed transaction's key set until a later commit,
// which an idle node does not make.
func badgerOptions(cfg Config, log *slog.Logger) badger.Options {
	opt := badger.DefaultOptions(cfg.Dir)
	// The memtable is an arena badger allocates whole (1.3 times its size,
	// for the batch it may take last) each time one fills: 10.4 MB at 8 MB,
	// which an idle node held resident or not as the heap's pages it landed
	// on happened to be (zeroed by the runtime, or fresh from the OS): ~8 MB
	// of difference between two runs. At 4 MB bursts of 10,000 claims ran
	// as fast (2,168-2,373 claims/s against 1,882-2,402 at 8 MB, same VM).
	//
	// The block cache holds decompressed blocks of the tables (snappy):
	// reading a store of 10,000 claims and machines once, as a restarted
	// node does, filled 14 MB of the 16 it had, for reads that are rare
	// (the cache and the acceptor read from memory, a burst's writes from
	// the memtable); 4 MB ran bursts as fast, and so does 1 MB. What fills
	// it is scans (a list, the cache's load), which read each block once:
	// an idle node kept 4 MB of them, on ~8 MB of heap pages with the
	// blocks' descriptors among the burst's garbage.
	memtable, blocks, index := int64(4<<20), int64(1<<20), int64(8<<20)
	threshold := int64(1 << 10)
	if cfg.InMemory {
		// In memory every value must stay in the LSM tree: allow objects as
		// large as the API accepts (1 MiB), which badger takes in a batch of
		// a memtable of 8 MB (a batch is 15 % of it) or more.
		opt = badger.DefaultOptions("").WithInMemory(true)
		threshold = 1 << 20
		memtable = 8 << 20
	}
	if b := cfg.MemoryLimit; b > 0 {
		// Two memtables, the block and the index cache: about a quarter of
		// the budget together, the rest is the node's.
		if !cfg.InMemory {
			memtable = min(memtable, max(1<<20, b/16))
		}
		blocks = min(blocks, max(1<<20, b/16))
		index = min(index, max(1<<20, b/32))
	}
	return compactOptions(opt.
		WithLogger(badgerLogger{log: log.With("component", "badger")}).
		WithSyncWrites(cfg.SyncWrites).
		WithMetricsEnabled(false).
		WithDetectConflicts(false).
		WithMemTableSize(memtable).
		WithNumMemtables(2).
		WithBlockCacheSize(blocks).
		WithIndexCacheSize(index).
		WithValueLogFileSize(16 << 20).
		WithValueThreshold(threshold))
}

// badgerLogger routes badger's log into slog: errors and warnings at Warn
// (badger calls recoverable trouble errors), the chatty rest at Debug.
type badgerLogger struct{ log *slog.Logger }

var _ badger.Logger = badgerLogger{}

func (l badgerLogger) Errorf(f string, args ...any)   { l.emit(slog.LevelWarn, f, args) }
func (l badgerLogger) Warningf(f string, args ...any) { l.emit(slog.LevelWarn, f, args) }
func (l badgerLogger) Infof(f string, args ...any)    { l.emit(slog.LevelDebug, f, args) }
func (l badgerLogger) Debugf(f string, args ...any)   { l.emit(slog.LevelDebug, f, args) }

func (l badgerLogger) emit(level slog.Level, f string, args []any) {
	ctx := context.Background()
	if !l.log.Enabled(ctx, level) {
		return
	}
	l.log.Log(ctx, level, "badger", "detail", strings.TrimSpace(fmt.Sprintf(f, args...)))
}
