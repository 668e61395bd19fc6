package clienttest

import (
	"io"
	"net/http"

	"github.com/hf-fleet/hf/lib/internal/shellframe"
	"github.com/hf-fleet/hf/lib/internal/upgrade"
	"github.com/hf-fleet/hf/lib/types"
)

// ShellEnd is how a shell of the fake ends: it exits with Code (killed by
// Signal, when set), or, with Drop, its connection drops before the exit
// status.
type ShellEnd struct {
	Code   int
	Signal string
	Drop   bool
}

// ShellFunc is a shell of the fake: it reads the client's input from in,
// writes the shell's output to out, and returns how the shell ends.
type ShellFunc func(machine string, tty bool, in io.Reader, out io.Writer) ShellEnd

// OnShell makes GET /api/v1/machines/{name}/shell run fn on the upgraded
// connection of each shell; without it, shells answer 409.
func (s *Server) OnShell(fn ShellFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onShell = fn
}

// RawShellsOnly makes the fake's shells those of a node from before
// hf-shell.v2: it refuses that token (400, field Upgrade) and speaks
// hf-shell, raw bytes with no exit status.
func (s *Server) RawShellsOnly(raw bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rawShellsOnly = raw
}

func (s *Server) shell(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	fn, rawOnly := s.onShell, s.rawShellsOnly
	s.mu.Unlock()
	name := r.PathValue("name")
	if _, ok := s.Object(types.KindMachine, name); !ok {
		writeNotFound(w, types.KindMachine, name)
		return
	}
	proto := r.Header.Get("Upgrade")
	if proto != shellframe.RawProtocol && (proto != shellframe.Protocol || rawOnly) {
		writeError(w, http.StatusBadRequest, "bad_request", "a shell needs the headers Connection: Upgrade and Upgrade: "+shellframe.RawProtocol, "Upgrade")
		return
	}
	if fn == nil {
		writeError(w, http.StatusConflict, "conflict", "the machine's driver runs no shells", "")
		return
	}
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	stream, err := upgrade.Accept(conn, buf, proto)
	if err != nil {
		return
	}
	var out io.Writer = stream
	var frames *shellframe.Writer
	if proto == shellframe.Protocol {
		frames = shellframe.NewWriter(stream)
		out = frames
	}
	end := fn(name, r.URL.Query().Get("tty") == "true", stream, out)
	if end.Drop {
		_ = stream.Close()
		return
	}
	if frames != nil {
		_ = frames.Exit(shellframe.Exit{Code: end.Code, Signal: end.Signal})
	}
	upgrade.CloseLingering(stream)
}
