package cluster

import (
	"sync"

	"github.com/hf-fleet/hf/lib/types"
)

// entry is one machine this node owns, as the ledger counts it.
type entry struct {
	Machine string
	Claim   string
	Driver  string
	Round   uint64
	Res     types.Resources
	Phase   types.MachinePhase
	// Resource is what the driver holds, once allocated: enough to release it
	// even when the machine record is gone.
	Resource *types.Resource
}

// ledger is this node's own word on its capacity: every machine it owns, reserved
// (Pending/Provisioning) or used (Running). Only this node writes its machines, so
// the ledger is authoritative; the acceptor holds mu across check-and-reserve so a
// node never over-commits.
type ledger struct {
	mu      sync.Mutex
	entries map[string]entry // by machine name
	changed func()           // called (without mu) after every change
}

func newLedger(changed func()) *ledger {
	return &ledger{entries: map[string]entry{}, changed: changed}
}

// usageLocked sums used and reserved resources of a driver instance. Caller holds mu.
func (l *ledger) usageLocked(driver string) (used, reserved types.Resources, count int) {
	for _, e := range l.entries {
		if e.Driver != driver {
			continue
		}
		count++
		if e.Phase == types.MachineRunning {
			used = used.Add(e.Res)
		} else {
			reserved = reserved.Add(e.Res)
		}
	}
	return used, reserved, count
}

func (l *ledger) usage(driver string) (used, reserved types.Resources, count int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.usageLocked(driver)
}

// putLocked adds or replaces an entry. Caller holds mu and calls notify after unlocking.
func (l *ledger) putLocked(e entry) { l.entries[e.Machine] = e }

func (l *ledger) put(e entry) {
	l.mu.Lock()
	l.putLocked(e)
	l.mu.Unlock()
	l.notify()
}

func (l *ledger) setPhase(machine string, p types.MachinePhase, r *types.Resource) {
	l.mu.Lock()
	e, ok := l.entries[machine]
	if ok {
		e.Phase = p
		if r != nil {
			e.Resource = r
		}
		l.entries[machine] = e
	}
	l.mu.Unlock()
	if ok {
		l.notify()
	}
}

func (l *ledger) remove(machine string) {
	l.mu.Lock()
	_, ok := l.entries[machine]
	delete(l.entries, machine)
	l.mu.Unlock()
	if ok {
		l.notify()
	}
}

func (l *ledger) get(machine string) (entry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[machine]
	return e, ok
}

// byClaimLocked returns the entries held for a claim. Caller holds mu.
func (l *ledger) byClaimLocked(claim string) []entry {
	var out []entry
	for _, e := range l.entries {
		if e.Claim == claim {
			out = append(out, e)
		}
	}
	return out
}

func (l *ledger) byClaim(claim string) []entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byClaimLocked(claim)
}

func (l *ledger) all() []entry {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]entry, 0, len(l.entries))
	for _, e := range l.entries {
		out = append(out, e)
	}
	return out
}

func (l *ledger) notify() {
	if l.changed != nil {
		l.changed()
	}
}
