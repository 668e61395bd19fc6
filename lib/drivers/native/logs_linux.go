package native

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// logPoll is how often a followed log is checked for more output.
const logPoll = 200 * time.Millisecond

// Logs implements drivers.LogReader: the entry's output (the workspace's
// .entry.log, opened as openLog does), its last opts.Tail lines first;
// with Follow, new output as it comes until ctx ends or the machine ends.
func (d *Driver) Logs(ctx context.Context, r *types.Resource, opts drivers.LogOptions, w io.Writer) error {
	if r == nil {
		return fmt.Errorf("logs: nil resource")
	}
	m, _, err := d.lookup(r.ID)
	if err != nil {
		return fmt.Errorf("logs %s: %w", r.ID, err)
	}
	f, size, err := openLog(filepath.Join(m.Workspace, logFile), m.UID)
	if err != nil {
		return fmt.Errorf("logs %s: %w", r.ID, err)
	}
	defer f.Close()
	off := tailOffset(f, size, opts.Tail)
	for {
		n, err := io.Copy(w, io.NewSectionReader(f, off, 1<<62))
		off += n
		if err != nil {
			return err
		}
		if fl, ok := w.(interface{ Flush() }); ok && n > 0 {
			fl.Flush()
		}
		if !opts.Follow {
			return nil
		}
		if n == 0 {
			if phase, err := d.Status(ctx, r); err != nil || phase != types.MachineRunning {
				return nil // it ended: what it wrote is all sent
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(logPoll):
		}
	}
}

// tailOffset is where the last n lines of f (of size) start; 0 for all.
func tailOffset(f io.ReaderAt, size int64, n int) int64 {
	if n <= 0 {
		return 0
	}
	const chunk = 64 << 10
	lines := 0
	for end := size; end > 0; {
		start := max(end-chunk, 0)
		buf := make([]byte, end-start)
		if _, err := f.ReadAt(buf, start); err != nil && err != io.EOF {
			return 0
		}
		for i := len(buf) - 1; i >= 0; i-- {
			if buf[i] != '\n' || start+int64(i) == size-1 {
				continue
			}
			if lines++; lines == n {
				return start + int64(i) + 1
			}
		}
		end = start
	}
	return 0
}
