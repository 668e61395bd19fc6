package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// releaseMappedPages unmaps the node's read-only segments of its executable
// and its mappings of the store's files in storeDir ("" none; see
// releasableMappings) and returns how many bytes they span. The
// executable's segments are then read at random (MADV_RANDOM: a fault reads
// the page it needs, no read-around) and the page cache drops the
// executable's pages nobody maps (POSIX_FADV_DONTNEED): the kernel maps a
// faulting page's cached neighbours with it (fault-around, 64 kB), so with
// them cached the node's code came back ~15 MB resident where an idle node
// runs ~6 MB of it. wakeMappedPages undoes the first when the node is busy.
func releaseMappedPages(storeDir string) (int64, error) {
	segs, err := mappedSegments(storeDir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, s := range segs {
		if err := madvise(s, unix.MADV_DONTNEED); err != nil {
			return n, err
		}
		n += int64(s.end - s.start)
		if s.exe {
			if err := madvise(s, unix.MADV_RANDOM); err != nil {
				return n, err
			}
		}
	}
	// The file mapped, even when a new binary was installed at its path.
	f, err := os.Open("/proc/self/exe")
	if err != nil {
		return n, err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return n, err
	}
	return n, nil
}

// wakeMappedPages reads the executable's segments ahead again (MADV_NORMAL):
// a busy node runs code it did not run idle, and read-around brings it back
// in fewer faults.
func wakeMappedPages() error {
	segs, err := mappedSegments("")
	if err != nil {
		return err
	}
	for _, s := range segs {
		if !s.exe {
			continue
		}
		if err := madvise(s, unix.MADV_NORMAL); err != nil {
			return err
		}
	}
	return nil
}

// mappedSegments returns this process's releasable mappings
// (releasableMappings).
func mappedSegments(storeDir string) ([]mapping, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return releasableMappings(f, exe, storeDir)
}

func madvise(s mapping, advice int) error {
	if _, _, e := unix.Syscall(unix.SYS_MADVISE, s.start, s.end-s.start, uintptr(advice)); e != 0 {
		return e
	}
	return nil
}
