package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/hf-fleet/hf/lib/internal/shellframe"
	"github.com/hf-fleet/hf/lib/internal/upgrade"
	"github.com/hf-fleet/hf/lib/types"
)

// Upgrade tokens of a machine shell.
const (
	// ShellProtocol carries the shell's output in frames that end with its
	// exit status (see the API's description of the shell).
	ShellProtocol = shellframe.Protocol
	// RawShellProtocol carries the shell's output as raw bytes, without
	// its exit status: all that nodes from before ShellProtocol speak.
	RawShellProtocol = shellframe.RawProtocol
)

// ShellExit is how a machine's shell ended.
type ShellExit = shellframe.Exit

// ErrNoExitStatus is wrapped by the error a shell's stream ends with when
// the shell's exit status did not come: the connection ended or failed
// before it, or the machine's node said why it has none.
var ErrNoExitStatus = shellframe.ErrNoExit

// ErrExitStatusUnknown is what ShellStream.Exit returns for a shell opened
// with RawShellProtocol, whose stream ends with no exit status.
var ErrExitStatusUnknown = errors.New("the machine's node sends no exit status (an hf-node from before " + ShellProtocol + ")")

// ShellStream is a machine shell's connection: the shell's input and
// output until the shell exits.
type ShellStream interface {
	io.ReadWriteCloser
	// CloseWrite ends the shell's input (a shell reading commands from a
	// pipe then runs the last and exits) while its output can still be
	// read. errors.ErrUnsupported through an HTTP proxy.
	CloseWrite() error
	// Exit returns how the shell ended, once Read returned io.EOF (call it
	// from the goroutine that read). For a
	// stream that ended without the exit status, the error Read returned
	// (it wraps ErrNoExitStatus); ErrExitStatusUnknown, at once, for a
	// node from before ShellProtocol.
	Exit() (ShellExit, error)
}

// MachineShell opens a shell in machine (GET /api/v1/machines/{name}/shell
// with Upgrade: hf-shell.v2): the returned stream carries the shell's input
// and output until the shell exits, or until ctx ends, and then tells how
// the shell ended. tty asks for a terminal of rows x cols. A node from
// before hf-shell.v2 refuses that token: the shell is then opened with
// RawShellProtocol, and its exit status is unknown.
func (c *Client) MachineShell(ctx context.Context, machine string, tty bool, rows, cols int) (ShellStream, error) {
	stream, err := c.machineShell(ctx, machine, tty, rows, cols, ShellProtocol)
	var ae *APIError
	if errors.As(err, &ae) && ae.Status == http.StatusBadRequest && ae.Field == "Upgrade" {
		return c.machineShell(ctx, machine, tty, rows, cols, RawShellProtocol)
	}
	return stream, err
}

// machineShell opens a shell with the Upgrade token proto.
func (c *Client) machineShell(ctx context.Context, machine string, tty bool, rows, cols int, proto string) (ShellStream, error) {
	q := url.Values{}
	if tty {
		q.Set("tty", "true")
		if rows > 0 && cols > 0 {
			q.Set("rows", strconv.Itoa(rows))
			q.Set("cols", strconv.Itoa(cols))
		}
	}
	u := *c.base
	u.Path += item(types.KindMachine, machine) + "/shell"
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("User-Agent", c.userAgent)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", proto)
	stream, resp, err := upgrade.Do(c.http, req)
	if err != nil {
		return nil, fmt.Errorf("shell %s: %w", machine, err)
	}
	if stream == nil {
		defer resp.Body.Close()
		return nil, readAPIError(resp)
	}
	if got := resp.Header.Get("Upgrade"); !strings.EqualFold(got, proto) {
		_ = stream.Close()
		return nil, fmt.Errorf("shell %s: the server upgraded to %q, not %q", machine, got, proto)
	}
	s := &shellStream{Stream: stream}
	if proto == ShellProtocol {
		s.frames = shellframe.NewReader(stream)
	}
	return s, nil
}

// shellStream is a shell's upgraded connection, whose output is read
// through frames (unless frames is nil: RawShellProtocol).
type shellStream struct {
	upgrade.Stream
	frames *shellframe.Reader
	// end is the error the output ended with (io.EOF: the exit frame).
	// Only Read sets it; Exit is read after Read ended.
	end error
}

func (s *shellStream) Read(p []byte) (int, error) {
	if s.frames == nil {
		return s.Stream.Read(p)
	}
	n, err := s.frames.Read(p)
	if err != nil {
		var re *shellframe.RemoteError
		if errors.As(err, &re) {
			err = fmt.Errorf("%w: its node says: %s", ErrNoExitStatus, re.Message)
		}
		s.end = err
	}
	return n, err
}

func (s *shellStream) Exit() (ShellExit, error) {
	switch {
	case s.frames == nil:
		return ShellExit{}, ErrExitStatusUnknown
	case s.end == nil:
		return ShellExit{}, errors.New("the shell's output has not ended")
	case s.end != io.EOF:
		return ShellExit{}, s.end
	}
	e, _ := s.frames.Exit()
	return e, nil
}
