package main

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// Pages of the executable. An idle node's RSS counted ~27 MB of hf-node's
// own text and read-only data: what package initialisation and the start
// ran once, and the neighbours the kernel maps with every fault
// (fault-around). Over an idle minute the node referenced ~6 MB of them
// (/proc/PID/clear_refs, then smaps' Referenced). Each time the node cools
// (once a quiet spell) it unmaps its read-only segments of the executable
// (MADV_DONTNEED): the page cache keeps the pages, what the node runs next
// comes back as a minor fault, and the rest is cache the kernel may reclaim
// without unmapping it from the node first.

// exeSegment is a read-only mapping of the executable.
type exeSegment struct{ start, end uintptr }

// readOnlyExeSegments returns the mappings of smaps (a /proc/PID/smaps)
// that map the file exe read-only (never writable, as text and rodata are)
// and hold no private copy of a page (Anonymous: 0; a segment the dynamic
// loader wrote before it made it read-only does), which MADV_DONTNEED
// drops without losing anything.
func readOnlyExeSegments(smaps io.Reader, exe string) ([]exeSegment, error) {
	var out []exeSegment
	var cur *exeSegment
	sc := bufio.NewScanner(smaps)
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if r, ok := mappingRange(fields[0]); ok && len(fields) >= 5 {
			cur = nil
			if len(fields) == 6 && fields[5] == exe && len(fields[1]) == 4 && fields[1][1] != 'w' && fields[1][3] == 'p' {
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

// mappingRange parses smaps' "start-end" (hex) of a mapping's first line.
func mappingRange(s string) (exeSegment, bool) {
	lo, hi, ok := strings.Cut(s, "-")
	if !ok {
		return exeSegment{}, false
	}
	start, err1 := strconv.ParseUint(lo, 16, 64)
	end, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return exeSegment{}, false
	}
	return exeSegment{uintptr(start), uintptr(end)}, true
}
