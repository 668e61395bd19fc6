package store

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/internal/testclock"
	"github.com/hf-fleet/hf/lib/types"
)

func newFakeClock() *testclock.Clock {
	return testclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// memConfig is an in-memory store config with GC off and a fake clock.
func memConfig(clk *testclock.Clock) Config {
	return Config{InMemory: true, NodeID: "n1", GCInterval: -1, Now: clk.Now}
}

// openStore opens cfg and closes it when the test ends.
func openStore(t testing.TB, cfg Config) *Store {
	t.Helper()
	s, err := Open(cfg, quietLog())
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newMemStore(t testing.TB) (*Store, *testclock.Clock) {
	clk := newFakeClock()
	return openStore(t, memConfig(clk)), clk
}

// claim is a small object to store.
func claim(name string) *types.MachineClaim {
	return &types.MachineClaim{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
		Metadata: types.ObjectMeta{Name: name, Labels: map[string]string{"team": "a"}},
		Spec:     types.MachineClaimSpec{MachineTemplate: "ubuntu", User: "alice"},
	}
}

// putClaim creates a claim and returns its record.
func putClaim(t testing.TB, s *Store, name string) Record {
	t.Helper()
	rec, err := s.Put(claim(name), PutOptions{Create: true})
	require.NoError(t, err)
	return rec
}
