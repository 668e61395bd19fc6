package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// releaseMappedPages unmaps the node's read-only segments of its executable
// and its mappings of the store's files in storeDir ("" none; see
// releasableMappings) and returns how many bytes they span.
func releaseMappedPages(storeDir string) (int64, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, err
	}
	segs, err := releasableMappings(f, exe, storeDir)
	f.Close()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, s := range segs {
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, s.start, s.end-s.start, unix.MADV_DONTNEED); e != 0 {
			return n, e
		}
		n += int64(s.end - s.start)
	}
	return n, nil
}
