package main

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestReleaseExePages unmaps this test binary's text and read-only data: it
// goes on running (what it runs comes back), with fewer of its pages
// resident than before; the page cache drops the binary's pages it no
// longer maps, and its segments are read at random (no read-around) until
// wakeMappedPages.
func TestReleaseExePages(t *testing.T) {
	exe, err := os.Executable()
	require.NoError(t, err)
	f, err := os.Open(exe)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, f.Sync()) // the page cache drops clean pages only
	resident := func() int64 {
		return residentKB(t, func(path, perms string) bool { return path == exe && !strings.Contains(perms, "w") })
	}
	before, cachedBefore := resident(), cachedKB(t, f)
	n, err := releaseMappedPages("")
	require.NoError(t, err)
	after, cachedAfter := resident(), cachedKB(t, f)
	require.Positive(t, n)
	t.Logf("read-only pages of the executable resident: %d kB before, %d kB after (%d MB unmapped); the binary in the page cache: %d kB before, %d kB after",
		before, after, n>>20, cachedBefore, cachedAfter)
	require.Less(t, after, before/2)
	var fs unix.Statfs_t
	require.NoError(t, unix.Fstatfs(int(f.Fd()), &fs))
	if fs.Type == unix.TMPFS_MAGIC {
		// A file in tmpfs is its pages: the cache cannot drop them (Debian
		// puts /tmp there, and go test its binaries in /tmp).
		t.Logf("the test binary is in tmpfs: its pages stay cached")
	} else {
		require.Less(t, cachedAfter, cachedBefore/2)
	}
	require.Equal(t, []bool{true, true}, randomRead(t, exe), "the executable's segments are read at random while released")
	// Code and read-only data come back from the file as they were.
	sum := sha256.Sum256([]byte("hf-node"))
	require.Equal(t, "273d42ed968fa54b673ba23f7a75868ddc628ccfac52666b4c6c40365c258e10", hex.EncodeToString(sum[:]))
	require.NoError(t, wakeMappedPages())
	require.Equal(t, []bool{false, false}, randomRead(t, exe), "awake, they are read ahead again")
}

// cachedKB is how much of f the page cache holds, in kB (mincore over a
// mapping of its own: this process owns the file, so the kernel reports the
// cache, not only what the mapping has touched).
func cachedKB(t *testing.T, f *os.File) int64 {
	t.Helper()
	fi, err := f.Stat()
	require.NoError(t, err)
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	require.NoError(t, err)
	defer unix.Munmap(m)
	page := os.Getpagesize()
	vec := make([]byte, (len(m)+page-1)/page)
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0])))
	require.Zero(t, e)
	var n int64
	for _, v := range vec {
		n += int64(v & 1)
	}
	return n * int64(page) >> 10
}

// randomRead says for each read-only mapping of exe, in order, whether it
// is advised random reads (smaps' VmFlags "rr").
func randomRead(t *testing.T, exe string) []bool {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	require.NoError(t, err)
	var out []bool
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if _, ok := mappingRange(fields[0]); ok && len(fields) >= 5 {
			in = len(fields) == 6 && fields[5] == exe && fields[1][1] != 'w'
		} else if in && fields[0] == "VmFlags:" {
			out = append(out, slices.Contains(fields[1:], "rr"))
		}
	}
	return out
}
