package cloud

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// consolePoll is how often a followed console is read again: each read is
// a cloud call (two, with the instance's state), and a console rarely
// changes faster.
const consolePoll = 5 * time.Second

var _ drivers.LogReader = (*Driver)(nil)

// Logs implements drivers.LogReader with the VM's console output (aws:
// GetConsoleOutput; gce: serial port 1), its last opts.Tail lines first;
// with Follow, the console is read every few seconds and what is new
// written, until ctx ends or the instance no longer runs (or starts).
// An instance that is gone or not this driver's is drivers.ErrNotFound.
func (d *Driver) Logs(ctx context.Context, r *types.Resource, opts drivers.LogOptions, w io.Writer) error {
	if r == nil {
		return errors.New("logs: nil resource")
	}
	prov, _, err := d.state()
	if err != nil {
		return fmt.Errorf("logs %s: %w", r.ID, err)
	}
	if _, err := d.getOwn(ctx, prov, r.ID); err != nil {
		return fmt.Errorf("logs %s: %w", r.ID, err)
	}
	text, err := prov.console(ctx, r.ID)
	if err != nil {
		return fmt.Errorf("logs %s: %w", r.ID, err)
	}
	if err := write(w, lastLines(text, opts.Tail)); err != nil || !opts.Follow {
		return err
	}
	tick := time.NewTicker(d.consolePoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		v, err := prov.get(ctx, r.ID)
		ended := errors.Is(err, drivers.ErrNotFound) ||
			err == nil && v.Phase != types.MachineRunning && v.Phase != types.MachineProvisioning
		if err != nil && !ended {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("logs %s: %w", r.ID, err)
		}
		// An instance that ended may have printed its last lines (its
		// shutdown): they are read once more, and it is no error when the
		// cloud has nothing left, or the instance went in between.
		cur, err := prov.console(ctx, r.ID)
		switch {
		case ended && err != nil, errors.Is(err, drivers.ErrNotFound), ctx.Err() != nil:
			return nil
		case err != nil:
			return fmt.Errorf("logs %s: %w", r.ID, err)
		}
		if err := write(w, unseen(text, cur)); err != nil || ended {
			return err
		}
		text = cur
	}
}

// write writes s to w, flushed when w buffers (an HTTP response).
func write(w io.Writer, s string) error {
	if s == "" {
		return nil
	}
	if _, err := io.WriteString(w, s); err != nil {
		return err
	}
	if fl, ok := w.(interface{ Flush() }); ok {
		fl.Flush()
	}
	return nil
}

// lastLines is the last n lines of s (all of it for n <= 0); a last line
// without its newline counts as a line.
func lastLines(s string, n int) string {
	if n <= 0 {
		return s
	}
	end := len(strings.TrimSuffix(s, "\n"))
	for i := end - 1; i >= 0; i-- {
		if s[i] == '\n' {
			if n--; n == 0 {
				return s[i+1:]
			}
		}
	}
	return s
}

// unseen is what cur, the console read now, holds beyond prev, the console
// read before. Both are windows onto one growing output (a cloud keeps only
// its end), so cur starts with the longest end of prev that it starts with;
// all of cur is new when they share nothing. Output that repeats itself
// across the window's slide may be taken for seen.
func unseen(prev, cur string) string {
	if strings.HasPrefix(cur, prev) {
		return cur[len(prev):]
	}
	return cur[overlap(prev, cur):]
}

// overlap is the length of the longest suffix of a that is a prefix of b
// (Knuth-Morris-Pratt: b's failure function, then a run through a).
func overlap(a, b string) int {
	if len(b) == 0 {
		return 0
	}
	fail := make([]int, len(b))
	for i, k := 1, 0; i < len(b); i++ {
		for k > 0 && b[i] != b[k] {
			k = fail[k-1]
		}
		if b[i] == b[k] {
			k++
		}
		fail[i] = k
	}
	k := 0
	for i := 0; i < len(a); i++ {
		for k > 0 && (k == len(b) || a[i] != b[k]) {
			k = fail[k-1]
		}
		if k < len(b) && a[i] == b[k] {
			k++
		}
	}
	return k
}
