package sim

import (
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/hf-fleet/hf/lib/stats"
)

// Result is what a run measured, in virtual time.
type Result struct {
	Nodes, Fanout int
	// Writes made, and how many reached every live member.
	Writes, Reached int
	// Write-to-all-live latency of the writes that reached every member.
	P50, P99, Max time.Duration
	// Push messages per write: sent by the writer (member 0; with
	// RandomWriters, by all writers together), by the busiest member, and
	// the mean over all members.
	WriterMsgs, MaxMsgs, MeanMsgs float64
	// MaxNode is the busiest member.
	MaxNode string
	// HopsP99 and HopsMax: push hops from the writer over every (write,
	// member) reached by push.
	HopsP99, HopsMax int
	// ViaAE counts the writes that reached some live member only by
	// anti-entropy; Repaired the (write, member) pairs repaired so.
	ViaAE, Repaired int
	// PushFailed counts failed push sends (to the dead member, or one not in
	// the sender's view).
	PushFailed int
	// AERounds, AEFailed (with a dead peer), AEMsgs and AEBytes (estimated)
	// over the run.
	AERounds, AEFailed, AEMsgs, AEBytes int
	// Took is the virtual time simulated.
	Took time.Duration
}

func (s *sim) result() Result {
	r := Result{Nodes: s.cfg.Nodes, Fanout: s.cfg.Fanout, Writes: s.issued,
		AERounds: s.aeRounds, AEFailed: s.aeFailed, Repaired: s.aeRepaired, Took: time.Duration(s.clk.now)}
	var lat []time.Duration
	var hops []int
	for _, w := range s.writes {
		if w.viaAE {
			r.ViaAE++
		}
		if w.missing > 0 {
			continue
		}
		r.Reached++
		var last int64
		for i, n := range s.nodes {
			if n.dead {
				continue
			}
			last = max(last, w.heldAt[i])
			if i != w.writer && w.hop[i] >= 0 {
				hops = append(hops, int(w.hop[i]))
			}
		}
		lat = append(lat, time.Duration(last-w.at))
	}
	r.P50, r.P99 = stats.Percentile(lat, 50), stats.Percentile(lat, 99)
	if len(lat) > 0 {
		r.Max = slices.Max(lat)
	}
	r.HopsP99 = stats.Percentile(hops, 99)
	if len(hops) > 0 {
		r.HopsMax = slices.Max(hops)
	}
	writes := float64(max(s.issued, 1))
	total, writers := 0, map[int]bool{}
	for _, w := range s.writes {
		writers[w.writer] = true
	}
	var writerMsgs int
	for _, n := range s.nodes {
		total += n.pushMsgs
		r.PushFailed += n.pushFailed
		r.AEMsgs += n.aeMsgs
		r.AEBytes += n.aeBytes
		if float64(n.pushMsgs)/writes > r.MaxMsgs {
			r.MaxMsgs, r.MaxNode = float64(n.pushMsgs)/writes, n.name
		}
		if writers[n.i] {
			writerMsgs += n.pushMsgs
		}
	}
	r.WriterMsgs = float64(writerMsgs) / writes
	r.MeanMsgs = float64(total) / float64(len(s.nodes)) / writes
	return r
}

// Mode is "direct" or "tree (k=K)".
func (r Result) Mode() string {
	if r.Fanout < 0 {
		return "direct"
	}
	return fmt.Sprintf("tree (k=%d)", r.Fanout)
}

// String is the result as one log line.
func (r Result) String() string {
	return fmt.Sprintf("nodes=%d mode=%q writes=%d reached=%d p50=%s p99=%s max=%s writer=%.2f busiest=%.2f(%s) mean=%.2f hops-p99=%d hops-max=%d via-ae=%d repaired=%d push-failed=%d ae-rounds=%d ae-failed=%d ae-msgs=%d ae-bytes=%d took=%s",
		r.Nodes, r.Mode(), r.Writes, r.Reached, ms(r.P50), ms(r.P99), ms(r.Max), r.WriterMsgs, r.MaxMsgs, r.MaxNode, r.MeanMsgs,
		r.HopsP99, r.HopsMax, r.ViaAE, r.Repaired, r.PushFailed, r.AERounds, r.AEFailed, r.AEMsgs, r.AEBytes, r.Took)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond)) }

// Row is one line of Table: a fleet size and mode, without and with a dead
// member.
type Row struct {
	Healthy, Dead Result
}

// Table writes rows as a markdown table.
func Table(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "| N\t| mode\t| p50\t| p99\t| msgs/write, writer\t| busiest\t| mean/member\t| hops p99\t| dead: p50\t| dead: p99\t| dead: writes via AE\t|")
	fmt.Fprintln(tw, "|---\t|---\t|---\t|---\t|---\t|---\t|---\t|---\t|---\t|---\t|---\t|")
	for _, r := range rows {
		h, d := r.Healthy, r.Dead
		fmt.Fprintf(tw, "| %d\t| %s\t| %s\t| %s\t| %.2f\t| %.2f\t| %.2f\t| %d\t| %s\t| %s\t| %d / %d\t|\n",
			h.Nodes, h.Mode(), short(h.P50), short(h.P99), h.WriterMsgs, h.MaxMsgs, h.MeanMsgs, h.HopsP99,
			short(d.P50), short(d.P99), d.ViaAE, d.Writes)
	}
	return tw.Flush()
}

// short prints a duration with three significant digits.
func short(d time.Duration) string {
	switch {
	case d >= time.Second:
		return fmt.Sprintf("%.2f s", d.Seconds())
	default:
		return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond))
	}
}
