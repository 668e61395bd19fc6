package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/hf-fleet/hf/internal/syncbuf"
	"github.com/hf-fleet/hf/lib/store"
)

func TestRefusals(t *testing.T) {
	logs := &syncbuf.Buffer{}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := newRefusals(slog.New(slog.NewTextHandler(logs, nil)), func() time.Time { return now })
	noSpace := fmt.Errorf("put MachineClaim/c: %w", store.ErrNoSpace)
	lines := func() []string { return strings.Split(strings.TrimSpace(logs.String()), "\n") }

	for range 5 {
		r.refused("bind claim", "c", noSpace, time.Second, "claim", "c")
		now = now.Add(time.Second)
	}
	assert.Len(t, lines(), 1, "the first refusal only")
	assert.Contains(t, lines()[0], `level=WARN msg="bind claim" claim=c err="put MachineClaim/c: not enough free disk space" retry_in=1s refused=1`)

	// Another cause is news, and logged; the same again is not.
	r.refused("bind claim", "c", errors.New("closed"), time.Second, "claim", "c")
	r.refused("bind claim", "c", errors.New("closed"), time.Second, "claim", "c")
	assert.Len(t, lines(), 2)
	assert.Contains(t, lines()[1], `msg="bind claim" claim=c err=closed retry_in=1s refused=6`)

	// Another write of the same name is another write.
	r.refused("give claim back", "c", noSpace, time.Second, "claim", "c")
	assert.Len(t, lines(), 3)

	r.settled("bind claim", "c")
	assert.Contains(t, lines()[3], `level=INFO msg="refused write settled" write="bind claim" claim=c refused=7 suppressed=5`)
	r.settled("bind claim", "c")
	r.settled("delete machine", "m1")
	assert.Len(t, lines(), 4, "a write never refused settles quietly")

	// A write no longer tried is forgotten after staleAfter, quietly.
	now = now.Add(staleAfter)
	r.refused("delete machine", "m1", noSpace, time.Second, "machine", "m1")
	r.mu.Lock()
	assert.Len(t, r.writes, 1, "give claim back/c went another way")
	r.mu.Unlock()
	r.settled("give claim back", "c")
	assert.Len(t, lines(), 5)
}
