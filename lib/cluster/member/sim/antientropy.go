package sim

// aeTick is a member's periodic round: a random peer of its view. A tick
// that comes while a round runs is dropped, as a ticker's is.
func (s *sim) aeTick(i int) {
	s.clk.at(s.clk.now+int64(s.cfg.AEInterval), func() { s.aeTick(i) })
	n := s.nodes[i]
	if n.dead || n.ae.busy {
		return
	}
	peers := n.view.Names() // member picks from its live peers
	p := s.byName[peers[s.rng.IntN(len(peers))]]
	for p == i || !s.inView(i, p) {
		p = s.byName[peers[s.rng.IntN(len(peers))]]
	}
	n.ae.busy = true
	s.round(i, p, true)
}

// aeWant asks member i for a full round with peer (member's ae.want): after
// the settle delay, once the current round is over.
func (s *sim) aeWant(i, peer int) {
	a := &s.nodes[i].ae
	a.want[peer] = true
	if a.settling {
		return
	}
	a.settling = true
	s.clk.at(s.clk.now+int64(settleDelay), func() {
		a.settling, a.settled = false, true
		s.aeNext(i)
	})
}

// aeNext starts the next asked-for round when member i is free.
func (s *sim) aeNext(i int) {
	n := s.nodes[i]
	a := &n.ae
	if a.busy || n.dead {
		return
	}
	if len(a.todo) == 0 && a.settled {
		a.settled = false
		for _, name := range n.view.Names() { // take: only peers still live
			if p := s.byName[name]; a.want[p] && s.inView(i, p) {
				a.todo = append(a.todo, p)
			}
		}
		clear(a.want)
	}
	if len(a.todo) == 0 {
		return
	}
	p := a.todo[0]
	a.todo = a.todo[1:]
	a.busy = true
	s.round(i, p, false)
}

func (s *sim) roundDone(i int) {
	s.nodes[i].ae.busy = false
	s.aeNext(i)
}

// aeSend books one anti-entropy message from i: its CPU, its count; it
// returns when it arrives.
func (s *sim) aeSend(from int, bytes int) int64 {
	n := s.nodes[from]
	n.aeMsgs++
	n.aeBytes += bytes
	return s.cpu(from, s.sendCost(bytes)) + s.latency()
}

// round is one anti-entropy round, initiator a, responder b: digest
// request; b's response with the entries of the differing buckets; a sends
// b what b lacks (full rounds) and pulls what it lacks. Periodic rounds
// leave writes younger than AEGrace alone. What arrives this way is
// applied and never relayed.
func (s *sim) round(a, b int, periodic bool) {
	s.aeRounds++
	inFlight := int64(1) << 62
	if periodic {
		inFlight = s.clk.now - int64(s.cfg.AEGrace)
	}
	// a's digest is taken when the round starts.
	var mine []int32
	for id, w := range s.writes {
		if w.heldAt[a] >= 0 && w.heldAt[a] <= s.clk.now {
			mine = append(mine, int32(id))
		}
	}
	if s.nodes[b].dead {
		s.nodes[a].aeMsgs++ // the dial fails
		s.aeFailed++
		s.clk.at(s.cpu(a, s.cfg.SendCost)+s.deadDial(), func() { s.roundDone(a) })
		return
	}
	t1 := s.aeSend(a, digestReqBytes+headerBytes)
	s.clk.at(t1, func() {
		if s.nodes[b].dead {
			s.aeFailed++
			s.roundDone(a)
			return
		}
		held := map[int32]bool{}
		for _, id := range mine {
			held[id] = true
		}
		var push, pull []int32
		differing := 0
		for id, w := range s.writes {
			has := w.heldAt[b] >= 0 && w.heldAt[b] <= s.clk.now
			settled := w.at < inFlight
			switch {
			case has && !held[int32(id)]:
				differing++
				if settled {
					pull = append(pull, int32(id))
				}
			case !has && held[int32(id)]:
				differing++
				if settled {
					push = append(push, int32(id))
				}
			}
		}
		t2 := s.aeSend(b, headerBytes+digestEntrySize*differing)
		s.clk.at(t2, func() {
			if len(push) > 0 {
				t3 := s.aeSend(a, headerBytes+len(push)*s.cfg.RecordBytes)
				s.clk.at(t3, func() { s.repair(b, push) })
			}
			if len(pull) == 0 {
				s.roundDone(a)
				return
			}
			t3 := s.aeSend(a, headerBytes+len(pull)*8)
			s.clk.at(t3, func() {
				t4 := s.aeSend(b, headerBytes+len(pull)*s.cfg.RecordBytes)
				s.clk.at(t4, func() {
					s.repair(a, pull)
					s.roundDone(a)
				})
			})
		})
	})
}

// repair applies records that came by anti-entropy: not relayed.
func (s *sim) repair(i int, ids []int32) {
	if s.nodes[i].dead {
		return
	}
	t := s.cpu(i, s.cfg.ApplyCost)
	for _, id := range ids {
		w := s.writes[id]
		if w.heldAt[i] >= 0 {
			continue
		}
		w.heldAt[i], w.hop[i] = t, -1
		w.viaAE = true
		s.aeRepaired++
		s.less(w)
	}
}
