package main

import (
	"bufio"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Pages of the executable and of the store's files. An idle node's RSS
// counted ~27 MB of hf-node's own text and read-only data: what package
// initialisation and the start ran once, and the neighbours the kernel maps
// with every fault (fault-around). Over an idle minute the node referenced
// ~6 MB of them (/proc/PID/clear_refs, then smaps' Referenced). Badger maps
// its tables, value log and memtable log into memory too (shared file
// mappings: ~8 MB resident after a load of 30,000 objects, which an idle
// node does not read). Each time the node cools (once a quiet spell) it
// unmaps them (MADV_DONTNEED). The store's pages stay in the page cache (a
// shared mapping's dirty pages are marked dirty in the cache and written
// back as before): what the node reads next comes back as a minor fault,
// the rest is cache the kernel may reclaim without unmapping it from the
// node first. The executable's pages nobody maps leave the page cache
// too, and its segments are read a page at a time until the node is busy
// again (see releaseMappedPages): the kernel maps a faulting page's cached
// neighbours with it, which brought ~15 MB of code back.

// mapping is a file mapping that releasing drops: one of the executable's
// or of the store's files.
type mapping struct {
	start, end uintptr
	exe        bool
}

// storeFileExts are the files of the store that badger maps.
var storeFileExts = []string{".sst", ".vlog", ".mem"}

// releasableMappings returns the mappings of smaps (a /proc/PID/smaps)
// that map the file exe read-only (never writable, as text and rodata are)
// and hold no private copy of a page (Anonymous: 0; a segment the dynamic
// loader wrote before it made it read-only does), which MADV_DONTNEED
// drops without losing anything; and, when storeDir is not "", the shared
// mappings of the store's files in storeDir (a shared mapping's pages are
// the file's: dropping them loses nothing either).
func releasableMappings(smaps io.Reader, exe, storeDir string) ([]mapping, error) {
	var out []mapping
	var cur *mapping
	sc := bufio.NewScanner(smaps)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if r, ok := mappingRange(fields[0]); ok && len(fields) >= 5 {
			cur = nil
			if len(fields) == 6 && len(fields[1]) == 4 && releasable(fields[5], fields[1], exe, storeDir) {
				r.exe = fields[5] == exe
				out = append(out, r)
				cur = &out[len(out)-1]
			}
			continue
		}
		if cur != nil && fields[0] == "Anonymous:" && len(fields) >= 2 && fields[1] != "0" {
			out = out[:len(out)-1] // a private copy: not the file's page
			cur = nil
		}
	}
	return out, sc.Err()
}

// releasable reports whether a mapping of path with perms (smaps' "r-xp")
// is the executable's never-writable private one, or a shared one of a
// store file directly in storeDir.
func releasable(path, perms, exe, storeDir string) bool {
	if path == exe {
		return perms[1] != 'w' && perms[3] == 'p'
	}
	if storeDir == "" || perms[3] != 's' || filepath.Dir(path) != storeDir {
		return false
	}
	return slices.Contains(storeFileExts, filepath.Ext(path))
}

// mappingRange parses smaps' "start-end" (hex) of a mapping's first line.
func mappingRange(s string) (mapping, bool) {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		return mapping{}, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return mapping{}, false
	}
	return mapping{start: uintptr(start), end: uintptr(end)}, true
}

// mappedDir is dir as the kernel names the files in it in smaps: absolute,
// its symbolic links resolved; "" when that cannot be known.
func mappedDir(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs // not made yet: the store makes it as named
}
