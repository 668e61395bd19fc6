package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/types"
)

// Exit codes of hf-cli.
const (
	ExitOK       = 0
	ExitError    = 1
	ExitUsage    = 2
	ExitNotFound = 3
	ExitAuth     = 4
	ExitConflict = 5
	ExitTimeout  = 6
	// ExitNoStatus is machine shell's when the shell's own exit status,
	// which it passes on otherwise, did not come (as ssh's 255).
	ExitNoStatus = 255
)

// Sentinel errors the exit code depends on.
var (
	// errTimeout is wrapped by every "gave up waiting" error.
	errTimeout = errors.New("timed out")
	// errClaimFailed is wrapped when a waited-for claim ends Failed or Terminated.
	errClaimFailed = errors.New("failed")
)

// usageError is a mistake in the command line: bad flags, bad arguments, an
// unknown command.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

// shellExit ends machine shell with code: the shell's own exit status, or
// ExitNoStatus. err, when set, says what happened; when nil nothing is
// printed (the shell's status is its own business).
type shellExit struct {
	code int
	err  error
}

func (e *shellExit) Error() string {
	if e.err == nil {
		return fmt.Sprintf("the shell exited %d", e.code)
	}
	return e.err.Error()
}

func (e *shellExit) Unwrap() error { return e.err }

// usageErrorf builds a usageError.
func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// ExitCode maps an error returned by a command to the process exit code. This
// is the one place that knows the mapping.
func ExitCode(err error) int {
	var ue *usageError
	var se *shellExit
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &se):
		return se.code
	case errors.As(err, &ue):
		return ExitUsage
	case client.IsUnauthorized(err), client.IsForbidden(err):
		return ExitAuth
	case client.IsNotFound(err):
		return ExitNotFound
	case client.IsConflict(err):
		return ExitConflict
	case errors.Is(err, errTimeout), errors.Is(err, errClaimFailed), errors.Is(err, context.DeadlineExceeded), isNetTimeout(err):
		return ExitTimeout
	}
	return ExitError
}

// isNetTimeout reports whether err is a network timeout (a connection or TLS
// handshake that never finished), which is a timeout as --timeout's is.
func isNetTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// printError writes err as "hf-cli: message", one line per joined error.
func printError(w io.Writer, err error) {
	if se := (*shellExit)(nil); errors.As(err, &se) && se.err == nil {
		return
	}
	msg := err.Error()
	switch {
	case errors.Is(err, context.Canceled):
		msg = "interrupted"
	case errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, errTimeout):
		msg = "timed out: " + msg
	}
	for _, line := range strings.Split(msg, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			fmt.Fprintf(w, "hf-cli: %s\n", line)
		}
	}
}

// Argument validators that fail with usage errors (cobra's own return plain
// errors, which would exit 1).

func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("%s takes no arguments, got %q", c.CommandPath(), args[0])
	}
	return nil
}

func exactArgs(n int, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) != n {
			return usageErrorf("%s needs %s", c.CommandPath(), what)
		}
		return nil
	}
}

func minArgs(n int, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) < n {
			return usageErrorf("%s needs %s", c.CommandPath(), what)
		}
		return nil
	}
}

// nameArgs is minArgs(1) for arguments that are object names: one that no
// object can have (a selector typed in its place, say) is a usage error
// naming the argument, before anything is sent.
func nameArgs(what string) cobra.PositionalArgs {
	atLeastOne := minArgs(1, what)
	return func(c *cobra.Command, args []string) error {
		if err := atLeastOne(c, args); err != nil {
			return err
		}
		for _, a := range args {
			if err := types.ValidateName("NAME", a); err != nil {
				return usageErrorf("%s: %q is not a name: %s", c.CommandPath(), a, strings.TrimPrefix(err.Error(), "NAME: "))
			}
		}
		return nil
	}
}

func maxArgs(n int, what string) cobra.PositionalArgs {
	return func(c *cobra.Command, args []string) error {
		if len(args) > n {
			return usageErrorf("%s takes at most %s", c.CommandPath(), what)
		}
		return nil
	}
}

// groupCmd makes c a command group: alone it prints help, with an argument it
// reports an unknown command as a usage error.
func groupCmd(c *cobra.Command) *cobra.Command {
	c.Args = cobra.ArbitraryArgs
	c.SuggestionsMinimumDistance = maxSuggestDistance
	c.RunE = func(c *cobra.Command, args []string) error {
		if len(args) > 0 {
			msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
			if s := c.SuggestionsFor(args[0]); len(s) > 0 {
				msg += fmt.Sprintf("; did you mean %q?", s[0])
			}
			return usageErrorf("%s", msg)
		}
		return c.Help()
	}
	return c
}
