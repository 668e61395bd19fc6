package native

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/hf-fleet/hf/lib/types"
)

// Bounds of the entry output that Explain quotes.
const (
	explainLines = 5
	explainBytes = 400
	explainTail  = 4 << 10
)

// Explain implements drivers.Explainer: the entry's exit status and the
// last lines of its output (the workspace's .entry.log). The log is in a
// directory the machine's user owns, so it is read as a file that cannot
// lead elsewhere: no symlink, a regular file with one link, owned by the
// daemon or by that user.
func (d *Driver) Explain(ctx context.Context, r *types.Resource) string {
	if r == nil || ctx.Err() != nil {
		return ""
	}
	m, _, err := d.lookup(r.ID)
	if err != nil {
		return ""
	}
	var parts []string
	if m.Exit != "" {
		parts = append(parts, "entry "+m.Exit)
	}
	if out := lastOutput(filepath.Join(m.Workspace, logFile), m.UID); out != "" {
		parts = append(parts, "last output: "+out)
	}
	return strings.Join(parts, "; ")
}

// lastOutput returns the last lines of the log at path, printable and
// bounded, or "" when it cannot be read safely.
func lastOutput(path string, uid int) string {
	f, size, err := openLog(path, uid)
	if err != nil {
		return ""
	}
	defer f.Close()
	start := max(size-explainTail, 0)
	buf := make([]byte, size-start)
	n, err := f.ReadAt(buf, start)
	if err != nil && err != io.EOF {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(string(buf[:n]), "\n") {
		if l = strings.TrimSpace(strings.Map(printable, l)); l != "" {
			lines = append(lines, l)
		}
	}
	lines = lines[max(len(lines)-explainLines, 0):]
	out := strings.Join(lines, " | ")
	if len(out) > explainBytes {
		out = "..." + out[len(out)-explainBytes:]
	}
	return out
}

// errUnsafeLog is a log file that is not what the driver made: a link, or
// another user's file.
var errUnsafeLog = errors.New("entry log is not a plain file of the machine")

// openLog opens the entry log at path, in a directory the machine's user
// owns, so that it cannot lead elsewhere: no symlink, a regular file with
// one link, owned by the daemon or by uid. It returns the file and its size.
func openLog(path string, uid int) (*os.File, int64, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, 0, err
	}
	f := os.NewFile(uintptr(fd), path)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Nlink != 1 ||
		(int(st.Uid) != os.Geteuid() && int(st.Uid) != uid) {
		_ = f.Close()
		return nil, 0, errUnsafeLog
	}
	return f, st.Size, nil
}

func printable(r rune) rune {
	if r == '\t' {
		return ' '
	}
	if r < 0x20 || r == 0x7f || r == 0xfffd {
		return -1
	}
	return r
}
