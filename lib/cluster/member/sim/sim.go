package sim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/hf-fleet/hf/lib/cluster/member/internal/fanout"
)

// Sizes from hf's encoding, for the byte counts and batching.
const (
	batchBytes      = 240 << 10 // member's batchBytes
	headerBytes     = 32        // type, sender, count
	digestReqBytes  = 8 << 10   // 1,024 bucket hashes
	digestEntrySize = 40        // kind, name, version, sum
	settleDelay     = 50 * time.Millisecond
)

// rec is one write as it travels: the sim's store.Record.
type rec struct {
	id     int32
	writer string
}

func writerOf(r *rec) string { return r.writer }

// link is one member's sender to one peer: member's senders, one message
// in flight at a time.
type link struct {
	q    *fanout.Queue[int32, rec]
	busy bool
}

type node struct {
	i    int
	name string
	dead bool
	// view is this member's view of the membership (table.view). It holds
	// the member itself, which changes no decision (fanout places self
	// where it belongs either way) and lets every member share one view.
	view *fanout.View
	cpu  int64 // busy until
	// links by peer index.
	links map[int]*link
	// pusher: own writes waiting for the coalesce window.
	batch    []rec
	flushing bool
	ae       aeState
	// counters
	pushMsgs, pushBytes, pushFailed int
	aeMsgs, aeBytes                 int
}

// aeState is member's anti-entropy loop: one round at a time; ticks that
// come while a round runs are dropped (a ticker's), asked-for rounds run
// after a settle delay.
type aeState struct {
	busy     bool
	want     map[int]bool
	settling bool
	settled  bool
	todo     []int
}

// write is one write's progress.
type write struct {
	writer  int
	at      int64
	heldAt  []int64 // per member; -1: not held
	hop     []int16 // per member: push hops from the writer; -1: by anti-entropy
	missing int     // live members that do not hold it
	viaAE   bool
}

type sim struct {
	cfg    Config
	rng    *rand.Rand
	clk    clock
	nodes  []*node
	byName map[string]int
	writes []*write
	// views shared by the members: all up, and the victim down (as
	// member's table builds it once it has learnt of the death).
	all, victimDown *fanout.View

	issued, done int
	aeRounds     int
	aeFailed     int
	aeRepaired   int
}

// Run simulates cfg and returns what it measured.
func Run(cfg Config) (Result, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return Result{}, fmt.Errorf("sim: %w", err)
	}
	s := &sim{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)), byName: map[string]int{}}
	width := len(fmt.Sprint(cfg.Nodes - 1))
	names := make([]string, cfg.Nodes)
	for i := range names {
		names[i] = fmt.Sprintf("n%0*d", width, i)
		s.byName[names[i]] = i
	}
	all := fanout.NewView(names)
	s.all = &all
	for i, n := range names {
		s.nodes = append(s.nodes, &node{i: i, name: n, view: s.all, links: map[int]*link{}, ae: aeState{want: map[int]bool{}}})
	}
	start := int64(10 * time.Millisecond)
	for _, n := range s.nodes {
		first := start + s.rng.Int64N(int64(cfg.AEInterval))
		s.clk.at(first, func() { s.aeTick(n.i) })
	}
	if cfg.Kill {
		down := fanout.NewView(slices.Delete(slices.Clone(names), cfg.Victim, cfg.Victim+1)).WithDown(names[cfg.Victim])
		s.victimDown = &down
		s.clk.at(start+int64(cfg.KillAt), s.kill)
	}
	for w := range cfg.Writes {
		s.clk.at(start+int64(cfg.KillAt)+int64(w)*int64(cfg.WriteInterval)+1, func() { s.write(w) })
	}
	until := int64(cfg.Horizon)
	for s.clk.step(until) {
		if s.issued == cfg.Writes && s.done == cfg.Writes && until == int64(cfg.Horizon) {
			// Let what is in flight land, for the message counts.
			until = min(until, s.clk.now+int64(time.Second))
		}
	}
	return s.result(), nil
}

// cpu books cost on member i's CPU and returns when it is done.
func (s *sim) cpu(i int, cost time.Duration) int64 {
	n := s.nodes[i]
	n.cpu = max(n.cpu, s.clk.now) + int64(cost)
	return n.cpu
}

func (s *sim) sendCost(bytes int) time.Duration {
	return s.cfg.SendCost + time.Duration(float64(bytes)/s.cfg.Bandwidth*float64(time.Second))
}

// latency draws one message's one-way latency.
func (s *sim) latency() int64 {
	lo, hi := int64(s.cfg.LatencyMin), int64(s.cfg.LatencyMax)
	d := lo
	if hi > lo {
		d += s.rng.Int64N(hi - lo + 1)
	}
	for s.cfg.Loss > 0 && s.rng.Float64() < s.cfg.Loss {
		d += int64(s.cfg.RTO)
	}
	return d
}

func (s *sim) deadDial() int64 {
	if s.cfg.DeadDial > 0 {
		return int64(s.cfg.DeadDial)
	}
	return 2 * s.latency()
}

// inView is member's table.lookup: peer is up in i's view.
func (s *sim) inView(i, peer int) bool { return s.nodes[i].view.Up(s.nodes[peer].name) }

// kill: the victim stops; each live member learns of it later.
func (s *sim) kill() {
	v := s.nodes[s.cfg.Victim]
	v.dead = true
	for _, w := range s.writes {
		if w.heldAt[v.i] < 0 {
			s.less(w)
		}
	}
	for _, n := range s.nodes {
		if n.dead {
			continue
		}
		d := int64(s.cfg.DetectAfter)
		if s.cfg.DetectSpread > 0 {
			d += s.rng.Int64N(int64(s.cfg.DetectSpread))
		}
		s.clk.at(s.clk.now+d, func() { n.view = s.victimDown })
	}
}

// less counts one more live member holding w (or one fewer that must).
func (s *sim) less(w *write) {
	w.missing--
	if w.missing == 0 {
		s.done++
	}
}

// write is a Put on the writer: the pusher folds it into its batch.
func (s *sim) write(id int) {
	wi := 0
	if s.cfg.RandomWriters {
		for {
			wi = s.rng.IntN(len(s.nodes))
			if !s.nodes[wi].dead {
				break
			}
		}
	}
	n := s.nodes[wi]
	w := &write{writer: wi, at: s.clk.now, heldAt: make([]int64, len(s.nodes)), hop: make([]int16, len(s.nodes))}
	for i, m := range s.nodes {
		w.heldAt[i] = -1
		if !m.dead {
			w.missing++
		}
	}
	s.writes = append(s.writes, w)
	s.issued++
	if n.dead {
		return
	}
	w.heldAt[wi], w.hop[wi] = s.clk.now, 0
	s.less(w)
	n.batch = append(n.batch, rec{id: int32(id), writer: n.name})
	if !n.flushing {
		n.flushing = true
		s.clk.at(s.clk.now+int64(s.cfg.CoalesceWindow), func() { s.flush(wi) })
	}
}

// flush is member's broadcast: the batch to the writer's targets.
func (s *sim) flush(i int) {
	n := s.nodes[i]
	batch := n.batch
	n.batch, n.flushing = nil, false
	if n.dead {
		return
	}
	for _, p := range n.view.Broadcast(n.name, s.cfg.Fanout) {
		s.enqueue(i, s.byName[p], batch)
	}
}

// enqueue is member's senders.enqueue: queue, and start the sender.
func (s *sim) enqueue(from, to int, recs []rec) {
	n := s.nodes[from]
	l := n.links[to]
	if l == nil {
		l = &link{q: fanout.NewQueue(func(r *rec) int32 { return r.id }, func(*rec) int { return s.cfg.RecordBytes })}
		n.links[to] = l
	}
	for _, r := range recs {
		l.q.Add(r)
	}
	if !l.busy {
		s.send(from, to)
	}
}

// send is one turn of member's sender loop: the next batch to peer to.
func (s *sim) send(from, to int) {
	n := s.nodes[from]
	l := n.links[to]
	if n.dead {
		l.q.Reset()
		l.busy = false
		return
	}
	batch := l.q.Take(batchBytes)
	if batch == nil {
		l.busy = false
		return
	}
	l.busy = true
	bytes := headerBytes + len(batch)*s.cfg.RecordBytes
	depart := s.cpu(from, s.sendCost(bytes))
	switch {
	case !s.inView(from, to): // sendNow: ErrNotMember
		s.clk.at(depart, func() { s.failed(from, to, batch, true) })
	case s.nodes[to].dead:
		s.clk.at(depart+s.deadDial(), func() { s.failed(from, to, batch, false) })
	default:
		s.clk.at(depart+s.latency(), func() {
			if s.nodes[to].dead {
				s.failed(from, to, batch, false)
				return
			}
			n.pushMsgs++
			n.pushBytes += bytes
			s.receive(to, from, batch)
			s.send(from, to)
		})
	}
}

// failed is member's sender after a failed send: drop the queue, ask for
// anti-entropy with the peer (unless it is not a member), bypass it.
func (s *sim) failed(from, to int, batch []rec, notMember bool) {
	n := s.nodes[from]
	n.pushFailed++
	lost := append(batch, n.links[to].q.Drain()...)
	if !notMember {
		s.aeWant(from, to)
	}
	for _, b := range fanout.Bypass(*n.view, n.name, s.nodes[to].name, s.cfg.Fanout, lost, writerOf) {
		s.enqueue(from, s.byName[b.Peer], b.Recs)
	}
	s.send(from, to)
}

// receive is member's applyMessage for a push: apply, relay what was new.
func (s *sim) receive(to, from int, batch []rec) {
	m := s.nodes[to]
	t := s.cpu(to, s.cfg.ApplyCost)
	var fresh []rec
	for _, r := range batch {
		w := s.writes[r.id]
		if w.heldAt[to] >= 0 {
			continue
		}
		w.heldAt[to] = t
		w.hop[to] = -1
		if h := w.hop[from]; h >= 0 {
			w.hop[to] = h + 1
		}
		s.less(w)
		fresh = append(fresh, r)
	}
	for _, r := range fanout.Relay(*m.view, m.name, s.nodes[from].name, s.cfg.Fanout, fresh, writerOf) {
		s.enqueue(to, s.byName[r.Peer], r.Recs)
	}
}
