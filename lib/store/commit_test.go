package store

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// queueWrites takes the group-commit lead, so that writes queue up behind
// it, starts n writers one at a time (each queued before the next starts, so
// the queue's order is i), lets them go and returns their errors.
func queueWrites(t *testing.T, s *Store, n int, write func(i int) error) []error {
	t.Helper()
	queued := func(k int) func() bool {
		return func() bool {
			s.qmu.Lock()
			defer s.qmu.Unlock()
			return len(s.queue) == k
		}
	}
	s.lead <- struct{}{}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = write(i)
		}()
		require.Eventually(t, queued(i+1), 10*time.Second, time.Millisecond, "write %d never queued", i)
	}
	<-s.lead
	wg.Wait()
	return errs
}

// TestGroupCommit: writes queued while another commits go into one
// transaction, in arrival order; each reads what the ones before it wrote
// (two writes of one key in a batch), a failing write fails alone, and
// watchers see every commit once, in Seq order.
func TestGroupCommit(t *testing.T) {
	s, _ := newMemStore(t)
	putClaim(t, s, "c-0")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := s.Watch(ctx, s.Seq())

	const n = 40
	before, commits := s.Seq(), s.Commits()
	errs := queueWrites(t, s, n, func(i int) error {
		var err error
		switch {
		case i == 7:
			_, err = s.Put(claim("c-0"), PutOptions{Create: true}) // exists: fails alone
		case i%10 == 0:
			_, err = s.Put(labelled("c-0", fmt.Sprint(i)), PutOptions{}) // the same key, several times
		default:
			_, err = s.Put(claim(fmt.Sprintf("c-%d", i)), PutOptions{Create: true})
		}
		return err
	})
	require.Equal(t, commits+1, s.Commits(), "the queued writes share one commit")
	for i, err := range errs {
		if i == 7 {
			require.ErrorIs(t, err, ErrExists)
			continue
		}
		require.NoError(t, err, "write %d", i)
	}
	require.Equal(t, before+n-1, s.Seq(), "every write but the failed one has its Seq")

	// The last of the writes to c-0 (i = 30) won, and each saw the one before.
	got, err := Get[types.MachineClaim](s, types.KindMachineClaim, "c-0")
	require.NoError(t, err)
	require.Equal(t, "30", got.Metadata.Labels["i"])

	var seqs []uint64
	for len(seqs) < n-1 {
		select {
		case ev := <-events:
			seqs = append(seqs, ev.Record.Seq)
		case <-time.After(10 * time.Second):
			t.Fatalf("saw %d of %d events", len(seqs), n-1)
		}
	}
	for i, seq := range seqs {
		require.Equal(t, before+uint64(i)+1, seq, "events in Seq order")
	}
}

// TestGroupCommitSplitsWhatBadgerRefuses: a batch larger than one badger
// transaction may hold is committed in parts, every write kept, in order,
// and read back after a restart.
func TestGroupCommitSplitsWhatBadgerRefuses(t *testing.T) {
	// A 16 MB budget gives badger 1 MB memtables, and a transaction may hold
	// 15 % of one: 250 records of 600-byte padding (kept in the tree, under the
	// value-log threshold) are more than that.
	cfg := Config{Dir: t.TempDir(), NodeID: "n1", GCInterval: -1, Now: newFakeClock().Now, MemoryLimit: 16 << 20}
	s, err := Open(cfg, quietLog())
	require.NoError(t, err)
	pad := strings.Repeat("x", 600)
	const n = 250
	errs := queueWrites(t, s, n, func(i int) error {
		c := labelled(fmt.Sprintf("c-%03d", i), "")
		c.Metadata.Annotations = map[string]string{"pad": pad}
		_, err := s.Put(c, PutOptions{Create: true})
		return err
	})
	commits := s.Commits()
	require.Greater(t, commits, uint64(1), "split")
	require.Less(t, commits, uint64(n/10), "in parts, not one by one")
	for i := range n {
		require.NoError(t, errs[i], "write %d", i)
	}
	require.Equal(t, uint64(n), s.Seq())
	require.NoError(t, s.Close())

	s = openStore(t, cfg)
	require.Equal(t, uint64(n), s.Seq())
	recs, err := s.List(types.KindMachineClaim)
	require.NoError(t, err)
	require.Len(t, recs, n)
	seen := map[uint64]bool{}
	for _, r := range recs {
		seen[r.Seq] = true
	}
	require.Len(t, seen, n, "every write its own Seq")
}

func labelled(name, i string) *types.MachineClaim {
	c := claim(name)
	c.Metadata.Labels["i"] = i
	return c
}

// TestGroupCommitSurvivesAPanickingWrite: a write whose next panics fails
// alone, with an error; the writes batched with it and later ones commit.
func TestGroupCommitSurvivesAPanickingWrite(t *testing.T) {
	s, _ := newMemStore(t)
	errs := queueWrites(t, s, 3, func(i int) error {
		var err error
		if i == 1 {
			_, err = s.write(types.KindMachineClaim, "boom", func(Record, bool) (Record, error) { panic("a bug") })
		} else {
			_, err = s.Put(claim(fmt.Sprintf("c-%d", i)), PutOptions{Create: true})
		}
		return err
	})
	require.Equal(t, uint64(1), s.Commits(), "the other two committed together")
	require.NoError(t, errs[0])
	require.ErrorContains(t, errs[1], "panicked")
	require.NoError(t, errs[2])
	putClaim(t, s, "after")
	require.Equal(t, uint64(3), s.Seq())
}

// TestApplyBatch: a batch's records are merged in order, as Apply would one
// by one (a later copy of a key in the batch sees the earlier one), each with
// its own result, and watchers see each change once, in Seq order.
func TestApplyBatch(t *testing.T) {
	mk := func(name string, hlc uint64, label string) Record {
		c := labelled(name, label)
		c.Metadata.Version = types.Version{HLC: hlc, Node: "n2"}
		data, err := json.Marshal(c)
		require.NoError(t, err)
		return Record{Kind: types.KindMachineClaim, Name: name, Version: c.Metadata.Version, Data: data}
	}
	const base = 1 << 40
	s, _ := newMemStore(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := s.Watch(ctx, 0)
	res := s.ApplyBatch([]Record{
		mk("a", base, "1"),
		mk("b", base, "1"),
		mk("a", base+2, "3"),
		mk("a", base+1, "2"),                      // older than the copy before it in the batch
		{Kind: types.KindMachineClaim, Name: "c"}, // no version
		{Kind: types.KindMachineClaim, Version: types.Version{HLC: base, Node: "n2"}}, // no name
	})
	require.Len(t, res, 6)
	require.Equal(t, uint64(1), s.Commits(), "the batch's records share a commit")
	for i, want := range []bool{true, true, true, false} {
		require.NoError(t, res[i].Err, "record %d", i)
		require.Equal(t, want, res[i].Changed, "record %d", i)
	}
	require.ErrorContains(t, res[4].Err, "version is required")
	require.ErrorContains(t, res[5].Err, "metadata.name")
	got, err := Get[types.MachineClaim](s, types.KindMachineClaim, "a")
	require.NoError(t, err)
	require.Equal(t, "3", got.Metadata.Labels["i"])
	for want := uint64(1); want <= 3; want++ {
		select {
		case ev := <-events:
			require.Equal(t, want, ev.Record.Seq)
		case <-time.After(10 * time.Second):
			t.Fatal("no event")
		}
	}
	require.Equal(t, uint64(3), s.Seq())
	require.Empty(t, s.ApplyBatch(nil))
}

// The write queue keeps its room between bursts, not the writes it held:
// a commit leaves no queued write in the places past the queue's end.
func TestGroupCommitLeavesNoWritesQueued(t *testing.T) {
	s, _ := newMemStore(t)
	const n = maxBatch + 10 // a full batch, then a short one
	for i, err := range queueWrites(t, s, n, func(i int) error {
		_, err := s.Put(claim(fmt.Sprintf("c-%d", i)), PutOptions{Create: true})
		return err
	}) {
		require.NoError(t, err, "write %d", i)
	}
	s.qmu.Lock()
	defer s.qmu.Unlock()
	require.Empty(t, s.queue)
	require.GreaterOrEqual(t, cap(s.queue), maxBatch, "the queue held a full batch")
	for i, w := range s.queue[:cap(s.queue)] {
		require.Nil(t, w, "write %d of the burst still queued", i)
	}
}
