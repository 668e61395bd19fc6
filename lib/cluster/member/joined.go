package member

import (
	"fmt"
	"slices"
	"strings"
)

// Joined reports whether this member is part of the cluster it was told to
// join: nil when Config.Join names no address but its own (it is the first
// of its cluster), or once a join succeeded or another member is live;
// otherwise an error saying whom it waits for. It latches: a member that
// loses its peers later is cut off, which the cluster handles, not a node
// that never joined. Safe to call from any goroutine.
func (m *Member) Joined() error {
	if m.joined.Load() {
		return nil
	}
	self := m.Addr()
	others := slices.DeleteFunc(slices.Clone(m.cfg.Join), func(a string) bool { return a == "" || a == self })
	if len(others) == 0 || len(m.Members()) > 1 {
		m.joined.Store(true)
		return nil
	}
	return fmt.Errorf("not joined: no member at %s has answered yet", strings.Join(others, ", "))
}
