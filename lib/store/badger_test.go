package store

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBadgerLoggerLevels(t *testing.T) {
	cases := []struct {
		name string
		log  func(badgerLogger)
		want string
	}{
		{"error is warn", func(l badgerLogger) { l.Errorf("disk %s\n", "full") }, `level=WARN msg=badger detail="disk full"`},
		{"warning is warn", func(l badgerLogger) { l.Warningf("slow %d", 3) }, `level=WARN msg=badger detail="slow 3"`},
		{"info is debug", func(l badgerLogger) { l.Infof("compaction") }, `level=DEBUG msg=badger detail=compaction`},
		{"debug is debug", func(l badgerLogger) { l.Debugf("x") }, `level=DEBUG msg=badger detail=x`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			h := slog.NewTextHandler(&buf, &slog.HandlerOptions{
				Level: slog.LevelDebug,
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey {
						return slog.Attr{}
					}
					return a
				},
			})
			tc.log(badgerLogger{log: slog.New(h)})
			assert.Equal(t, tc.want+"\n", buf.String())
		})
	}
	var buf bytes.Buffer
	badgerLogger{log: slog.New(slog.NewTextHandler(&buf, nil))}.Debugf("hidden")
	assert.Empty(t, buf.String(), "debug is dropped at info level")
}

func TestNodeID(t *testing.T) {
	s, _ := newMemStore(t)
	assert.Equal(t, "n1", s.NodeID())
	assert.Equal(t, "n1", s.Clock().Node)
}

func TestBadgerSizedFromTheMemoryLimit(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	free := badgerOptions(Config{Dir: t.TempDir()}, log)
	tight := badgerOptions(Config{Dir: t.TempDir(), MemoryLimit: 64 << 20}, log)
	huge := badgerOptions(Config{Dir: t.TempDir(), MemoryLimit: 64 << 30}, log)
	assert.Equal(t, int64(4<<20), tight.MemTableSize)
	assert.Equal(t, int64(1<<20), tight.BlockCacheSize)
	assert.Equal(t, int64(2<<20), tight.IndexCacheSize)
	assert.Equal(t, free.MemTableSize, huge.MemTableSize, "a large budget never grows badger past its sizes without one")
	assert.Equal(t, free.BlockCacheSize, huge.BlockCacheSize)
	st, err := Open(Config{Dir: t.TempDir(), NodeID: "n1", MemoryLimit: 32 << 20, GCInterval: -1}, log)
	require.NoError(t, err, "badger opens at the smallest budget")
	require.NoError(t, st.Close())
	// In memory a value of 1 MiB must fit a batch (15 % of a memtable):
	// the memtable stays 8 MB whatever the budget.
	mem := badgerOptions(Config{InMemory: true, MemoryLimit: 32 << 20}, log)
	assert.Equal(t, int64(8<<20), mem.MemTableSize)
	st, err = Open(Config{InMemory: true, NodeID: "n1", MemoryLimit: 32 << 20, GCInterval: -1}, log)
	require.NoError(t, err, "in memory, badger opens at the smallest budget")
	require.NoError(t, st.Close())
}
