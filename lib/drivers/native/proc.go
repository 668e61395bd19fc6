package native

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// procInfo is what the driver reads about one process from /proc.
type procInfo struct {
	PID, PPID, PGID int
	// State is the one-letter state; 'Z' (zombie) and 'X' (dead) are no
	// longer running.
	State byte
	// Start is the start time in clock ticks since boot (stat field 22).
	Start uint64
	// UIDs are the real, effective, saved and file-system user ids.
	UIDs [4]int
	// CPUTicks is the CPU time of the process and of the children it waited
	// for (stat fields 14-17), in clock ticks.
	CPUTicks uint64
}

// nsPerTick is the length of a /proc clock tick: USER_HZ is 100 on every
// Linux architecture Go supports.
const nsPerTick = 10_000_000

// live reports whether the process still runs (is not a zombie).
func (p procInfo) live() bool { return p.State != 'Z' && p.State != 'X' }

// hasUID reports whether any of the process's user ids is uid.
func (p procInfo) hasUID(uid int) bool {
	for _, u := range p.UIDs {
		if u == uid {
			return true
		}
	}
	return false
}

// parseStat reads state, ppid, pgrp and start time from /proc/<pid>/stat. The
// command name may hold spaces and parentheses, so fields are counted from
// the last ')'.
func parseStat(b []byte) (p procInfo, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return p, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+2:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 20 || len(f[0]) != 1 {
		return p, errors.New("malformed stat")
	}
	p.State = f[0][0]
	if p.PPID, err = strconv.Atoi(f[1]); err != nil {
		return p, err
	}
	if p.PGID, err = strconv.Atoi(f[2]); err != nil {
		return p, err
	}
	if p.Start, err = strconv.ParseUint(f[19], 10, 64); err != nil {
		return p, err
	}
	for _, s := range f[11:15] { // utime, stime, cutime, cstime
		t, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return p, err
		}
		p.CPUTicks += uint64(max(t, 0))
	}
	return p, nil
}

// parseStatusUIDs reads the Uid line of /proc/<pid>/status.
func parseStatusUIDs(b []byte) (uids [4]int, err error) {
	for line := range strings.SplitSeq(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Uid:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 4 {
			return uids, errors.New("malformed Uid line")
		}
		for i := range f {
			if uids[i], err = strconv.Atoi(f[i]); err != nil {
				return uids, err
			}
		}
		return uids, nil
	}
	return uids, errors.New("no Uid line")
}

// readProc reads one process; an error means it is gone (or unreadable).
func readProc(procRoot string, pid int) (procInfo, error) {
	dir := filepath.Join(procRoot, strconv.Itoa(pid))
	b, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return procInfo{}, err
	}
	p, err := parseStat(b)
	if err != nil {
		return procInfo{}, fmt.Errorf("%s/stat: %w", dir, err)
	}
	b, err = os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return procInfo{}, err
	}
	if p.UIDs, err = parseStatusUIDs(b); err != nil {
		return procInfo{}, fmt.Errorf("%s/status: %w", dir, err)
	}
	p.PID = pid
	return p, nil
}

// listProcs reads every process; ones that vanish while reading are skipped.
func listProcs(procRoot string) ([]procInfo, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", procRoot, err)
	}
	out := make([]procInfo, 0, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		if p, err := readProc(procRoot, pid); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// procHasEnv reports whether the process's initial environment holds kv
// ("NAME=value"); unreadable means no.
func procHasEnv(procRoot string, pid int, kv string) bool {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "environ"))
	if err != nil {
		return false
	}
	for v := range bytes.SplitSeq(b, []byte{0}) {
		if string(v) == kv {
			return true
		}
	}
	return false
}
