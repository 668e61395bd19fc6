package sim

import "container/heap"

// event is something that happens at a virtual time; seq breaks ties in
// the order events were scheduled, so a run is deterministic.
type event struct {
	at  int64 // virtual ns
	seq uint64
	fn  func()
}

type events []event

func (e events) Len() int { return len(e) }
func (e events) Less(i, j int) bool {
	if e[i].at != e[j].at {
		return e[i].at < e[j].at
	}
	return e[i].seq < e[j].seq
}
func (e events) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *events) Push(x any)   { *e = append(*e, x.(event)) }
func (e *events) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// clock is the virtual clock and its agenda.
type clock struct {
	now  int64
	seq  uint64
	todo events
}

// at schedules fn at t (never before now).
func (c *clock) at(t int64, fn func()) {
	c.seq++
	heap.Push(&c.todo, event{at: max(t, c.now), seq: c.seq, fn: fn})
}

// step runs the next event; false when none is left before until.
func (c *clock) step(until int64) bool {
	if len(c.todo) == 0 || c.todo[0].at > until {
		return false
	}
	e := heap.Pop(&c.todo).(event)
	c.now = e.at
	e.fn()
	return true
}
