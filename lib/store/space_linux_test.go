package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hf-fleet/hf/lib/types"
)

// On a real disk that fills up, the store refuses writes before badger's
// maps can need a block the disk no longer has: without the guard this
// test dies of SIGBUS (as hf-node did, the disk full in a burst of
// claims). What was acknowledged survives; freeing space lets writes go on.
func TestFullDiskIsRefusalNotACrash(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("this test mounts a small tmpfs and needs root; CI=true, so it must not be skipped")
		}
		t.Skip("needs root to mount a small tmpfs; run as root, or with CI=true to turn this skip into a failure")
	}
	mnt := t.TempDir()
	require.NoError(t, unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=112m,mode=0700"))
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })
	cfg := Config{Dir: filepath.Join(mnt, "store"), NodeID: "n1", GCInterval: -1}
	s, err := Open(cfg, quietLog())
	require.NoError(t, err)
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = s.Close()
		}
	})

	// Leave 8 MiB beyond what the store needs.
	free, err := diskFree(mnt)
	require.NoError(t, err)
	need, err := s.space.need()
	require.NoError(t, err)
	require.Greater(t, free, need+8<<20, "the tmpfs leaves room to fill")
	filler := filepath.Join(mnt, "filler")
	require.NoError(t, os.WriteFile(filler, nil, 0o600))
	require.NoError(t, unix.Truncate(filler, 0))
	f, err := os.OpenFile(filler, os.O_RDWR, 0)
	require.NoError(t, err)
	require.NoError(t, unix.Fallocate(int(f.Fd()), 0, 0, free-need-8<<20))
	require.NoError(t, f.Close())

	// Small records (the write-ahead log) and large ones (the value log)
	// until the store refuses; far more than the disk holds.
	acked := 0
	var refused error
	for i := 0; i < 100_000 && refused == nil; i++ {
		size := 300
		if i%4 == 0 {
			size = 8 << 10
		}
		_, err := s.Put(paddedClaim(fmt.Sprintf("c%05d", i), size), PutOptions{Create: true})
		switch {
		case errors.Is(err, ErrNoSpace):
			refused = err
		case err != nil:
			t.Fatalf("write %d: %v", i, err)
		default:
			acked++
		}
	}
	require.Error(t, refused, "the store refused before the disk was full (100,000 writes, ~220 MiB, twice the disk)")
	t.Logf("refused after %d writes: %v", acked, refused)
	assert.Positive(t, acked)

	// Room again: writes go on once the guard looks again.
	require.NoError(t, os.Remove(filler))
	require.Eventually(t, func() bool {
		_, err := s.Put(paddedClaim("after", 300), PutOptions{Create: true})
		return err == nil
	}, 10*time.Second, 50*time.Millisecond)
	acked++

	// Everything acknowledged is there after a restart.
	require.NoError(t, s.Close())
	closed = true
	s2 := openStore(t, cfg)
	n := 0
	require.NoError(t, s2.Each(types.KindMachineClaim, func(Record) error { n++; return nil }))
	assert.Equal(t, acked, n)
}
