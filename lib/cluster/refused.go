package cluster

import (
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hf-fleet/hf/lib/store"
)

// refusals quiets the log of the writes that the store refuses and that
// are tried again until they land: the acceptor's, every second (a claim's
// binding or give-back, the delete of a machine's record), and the node's
// report and its machines' last activity, on their timers. While the disk is full
// (store.ErrNoSpace) each of them failed every second, and each failure was
// a warning: one per claim and machine per second, for as long as the disk
// stayed full, when the store had said so once already.
//
// Now a write's first refusal is logged, as a warning, and the later ones
// only counted; it is logged again only when the cause changes (the disk
// full, or something else). When the write lands, or is moot (the claim
// moved on or went), the count is logged once. A write neither refused nor
// settled for staleAfter went some other way, and is forgotten. Safe for
// concurrent use (the acceptor's workers share it).
type refusals struct {
	log *slog.Logger
	now func() time.Time

	// held is len(writes): settled, called after every bind, give-back
	// and machine delete, takes no lock while nothing was refused.
	held atomic.Int64

	mu     sync.Mutex
	writes map[refusalKey]*refusal
	swept  time.Time
}

// The writes that are tried again when the store refuses them, by the
// message that logs them (see refusals): the acceptor's, and the two a node
// makes on a timer (its report, a machine's last activity).
const (
	writeGiveBack = "give claim back"
	writeBind     = "bind claim"
	writeDrop     = "delete machine"
	writeReport   = "report"
	writeActivity = "record activity"
)

// refusalKey is one write: what it is (the warning's message) and of what.
type refusalKey struct{ what, name string }

// refusal is what is known of one write's refusals.
type refusal struct {
	attrs   []any // the first refusal's, to say which write settled
	noSpace bool  // the last logged cause was store.ErrNoSpace
	n       int   // refusals since the write was first refused
	logged  int   // of which were logged
	last    time.Time
}

// staleAfter is how long a refused write may go untried before refusals
// forgets it: its retries come every second.
const staleAfter = time.Minute

func newRefusals(log *slog.Logger, now func() time.Time) *refusals {
	return &refusals{log: log, now: now, writes: map[refusalKey]*refusal{}}
}

// refused records that the store refused write what of name with err, to be
// tried again in retry; attrs name it in the log ("claim", name, ...). The
// first refusal of the write, and one whose cause changed, are logged.
func (r *refusals) refused(what, name string, err error, retry time.Duration, attrs ...any) {
	now := r.now()
	noSpace := errors.Is(err, store.ErrNoSpace)
	r.mu.Lock()
	r.sweepLocked(now)
	k := refusalKey{what, name}
	w, seen := r.writes[k]
	if !seen {
		w = &refusal{attrs: attrs}
		r.writes[k] = w
		r.held.Store(int64(len(r.writes)))
	}
	w.n++
	w.last = now
	logIt := !seen || w.noSpace != noSpace
	if logIt {
		w.noSpace = noSpace
		w.logged++
	}
	n := w.n
	r.mu.Unlock()
	if logIt {
		args := append(append([]any{}, attrs...), "err", err, "retry_in", retry, "refused", n)
		r.log.Warn(what, args...)
	}
}

// settled says that write what of name landed, or no longer needs to: when
// it was refused before, how many times is logged, and how many of those
// warnings were held back.
func (r *refusals) settled(what, name string) {
	if r.held.Load() == 0 {
		return
	}
	r.mu.Lock()
	k := refusalKey{what, name}
	w, ok := r.writes[k]
	delete(r.writes, k)
	r.held.Store(int64(len(r.writes)))
	r.mu.Unlock()
	if !ok {
		return
	}
	args := append([]any{"write", what}, w.attrs...)
	r.log.Info("refused write settled", append(args, "refused", w.n, "suppressed", w.n-w.logged)...)
}

// sweepLocked forgets, at most once per staleAfter, the writes not refused
// again for staleAfter. Caller holds mu.
func (r *refusals) sweepLocked(now time.Time) {
	if now.Sub(r.swept) < staleAfter {
		return
	}
	r.swept = now
	for k, w := range r.writes {
		if now.Sub(w.last) >= staleAfter {
			delete(r.writes, k)
		}
	}
	r.held.Store(int64(len(r.writes)))
}
