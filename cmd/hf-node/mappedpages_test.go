package main

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// residentKB sums smaps' Rss of this process's mappings that match (a
// file's path and the mapping's permissions, "r-xp"), in kB.
func residentKB(t *testing.T, match func(path, perms string) bool) int64 {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	require.NoError(t, err)
	defer f.Close()
	var kb int64
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if _, ok := mappingRange(fields[0]); ok && len(fields) >= 5 {
			in = len(fields) == 6 && match(fields[5], fields[1])
		} else if in && fields[0] == "Rss:" {
			n, _ := strconv.ParseInt(fields[1], 10, 64)
			kb += n
		}
	}
	require.NoError(t, sc.Err())
	return kb
}

// storeResidentKB is residentKB of the mappings of files in dir.
func storeResidentKB(t *testing.T, dir string) int64 {
	return residentKB(t, func(path, _ string) bool { return filepath.Dir(path) == dir })
}

// TestReleaseStorePages unmaps a real store's mapped files (tables, value
// log, memtable log) while it is open: what it holds stays readable, what
// is written after goes on, and all of it is there when the store opens
// again: dropping a shared mapping's pages loses nothing.
func TestReleaseStorePages(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/self/smaps")
	}
	dir := mappedDir(filepath.Join(t.TempDir(), "store"))
	log := slog.New(slog.DiscardHandler)
	st, err := store.Open(store.Config{Dir: dir, NodeID: "n1"}, log)
	require.NoError(t, err)
	big := strings.Repeat("x", 1500) // above the value threshold: the value log too
	put := func(from, to int) {
		for i := from; i < to; i++ {
			_, err := st.Put(&types.MachineTemplate{TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate},
				Metadata: types.ObjectMeta{Name: fmt.Sprintf("t-%05d", i), Labels: map[string]string{"pad": big[:i%1500]}},
				Spec:     types.MachineTemplateSpec{Resources: types.Resources{CPU: 1, RAMGB: 1}}}, store.PutOptions{Create: true})
			require.NoError(t, err)
		}
	}
	check := func(s *store.Store, n int) {
		for i := range n {
			tm, err := store.Get[types.MachineTemplate](s, types.KindMachineTemplate, fmt.Sprintf("t-%05d", i))
			require.NoError(t, err)
			require.Len(t, tm.Metadata.Labels["pad"], i%1500)
		}
	}
	put(0, 8000)
	check(st, 8000)
	before := storeResidentKB(t, dir)
	n, err := releaseMappedPages(dir)
	require.NoError(t, err)
	after := storeResidentKB(t, dir)
	t.Logf("the store's mapped files resident: %d kB before, %d kB after (%d MB of mappings released with the executable's)", before, after, n>>20)
	require.Positive(t, before)
	require.Less(t, after, before/4)

	put(8000, 9000) // writes into the memtable log just unmapped
	check(st, 9000)
	require.NoError(t, st.Close())
	again, err := store.Open(store.Config{Dir: dir, NodeID: "n1"}, log)
	require.NoError(t, err)
	defer again.Close()
	check(again, 9000)
}
