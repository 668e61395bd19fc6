package types

import (
	"fmt"
	"slices"
	"time"
)

// PhaseTimes records when an object entered each phase, so latencies can be
// read from the objects themselves. In JSON it is an object from phase to
// time (RFC 3339 with nanoseconds). In memory it is a keyed slice (see
// keyedMarshal) sorted by phase: every claim and machine of the fleet
// carries one, where a map took ~10 times the memory. It is never changed
// in place (Mark and Set make a new list), so copies of an object may share
// it.
type PhaseTimes []PhaseTime

// PhaseTime is one entry of PhaseTimes.
type PhaseTime struct {
	Phase string
	At    time.Time
}

// MakePhaseTimes is the PhaseTimes of entries, leaving out those of a zero
// time; a later entry of a phase replaces an earlier one.
func MakePhaseTimes(entries ...PhaseTime) PhaseTimes {
	n := 0
	for _, e := range entries {
		if !e.At.IsZero() {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make(PhaseTimes, 0, n)
	for _, e := range entries {
		out.put(e.Phase, e.At)
	}
	return out
}

// Get returns when phase was entered.
func (p PhaseTimes) Get(phase string) (time.Time, bool) {
	if i, ok := p.find(phase); ok {
		return p[i].At, true
	}
	return time.Time{}, false
}

// At returns when phase was entered; zero if it was not.
func (p PhaseTimes) At(phase string) time.Time {
	t, _ := p.Get(phase)
	return t
}

func (p PhaseTimes) find(phase string) (int, bool) { return keyedFind(p, phase, phaseOf) }

func phaseOf(e PhaseTime) string { return e.Phase }

// Mark records that phase was entered at now (the first time only).
func (p *PhaseTimes) Mark(phase string, now time.Time) {
	if _, ok := p.find(phase); !ok {
		p.Set(phase, now.UTC())
	}
}

// Set records that phase was entered at t; a zero t forgets the phase.
func (p *PhaseTimes) Set(phase string, t time.Time) {
	c := slices.Clone(*p)
	c.put(phase, t)
	if len(c) == 0 {
		c = nil
	}
	*p = c
}

// put is Set in place.
func (p *PhaseTimes) put(phase string, t time.Time) {
	i, ok := p.find(phase)
	switch {
	case ok && t.IsZero():
		*p = slices.Delete(*p, i, i+1)
	case ok:
		(*p)[i].At = t
	case !t.IsZero():
		*p = slices.Insert(*p, i, PhaseTime{phase, t})
	}
}

// MarshalJSON writes the object form.
func (p PhaseTimes) MarshalJSON() ([]byte, error) {
	return keyedMarshal(p, phaseOf, func(b []byte, e PhaseTime) ([]byte, error) {
		v, err := e.At.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("phaseTimes.%s: %w", e.Phase, err)
		}
		return append(b, v...), nil
	})
}

// UnmarshalJSON reads the object form.
func (p *PhaseTimes) UnmarshalJSON(b []byte) error {
	out, err := keyedUnmarshal(b, func(k string, t time.Time) PhaseTime { return PhaseTime{k, t} }, phaseOf)
	if err != nil {
		return err
	}
	*p = out
	return nil
}
