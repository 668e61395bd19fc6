package cmd

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/types"
)

func newMachineShellCmd(f *Factory, res *resource) *cobra.Command {
	return &cobra.Command{
		Use:   "shell NAME",
		Short: "Open a shell in a machine, as its own user (the machine's claim user or an admin)",
		Long: "A login shell as the machine's user for a native machine, /bin/sh inside the\n" +
			"container for a docker machine, through the API of any node. On a terminal it\n" +
			"gets a terminal of the same size; otherwise it reads commands from stdin.\n\n" +
			"Once the shell runs, hf-cli exits with the shell's own exit status (0-255), as\n" +
			"ssh does: `echo 'exit 3' | hf-cli machine shell m` exits 3, and a shell killed\n" +
			"by a signal exits 128 plus its number, saying so on stderr. Until then the exit\n" +
			"codes are hf-cli's (3 not found, 4 unauthorized, 5 conflict, ...), each with its\n" +
			"message on stderr. 255 with a message on stderr: the connection ended before\n" +
			"the shell's status came (a node older than this hf-cli sends none: hf-cli warns\n" +
			"and exits 0 when that shell ends).",
		Args:              exactArgs(1, "NAME"),
		ValidArgsFunction: completeNamesOf(f, res),
		RunE: func(c *cobra.Command, args []string) error {
			return runMachineShell(c, f, args[0])
		},
	}
}

// runMachineShell runs a shell in machine on the standard streams and
// returns its exit as a *shellExit (nil for 0).
func runMachineShell(c *cobra.Command, f *Factory, machine string) error {
	cl, err := f.Client()
	if err != nil {
		return err
	}
	in, isFile := f.In.(*os.File)
	tty := isFile && term.IsTerminal(int(in.Fd()))
	rows, cols := 0, 0
	if tty {
		if cols, rows, err = term.GetSize(int(in.Fd())); err != nil {
			tty = false
		}
	}
	stream, err := cl.MachineShell(c.Context(), machine, tty, rows, cols)
	if err != nil {
		return withNameSuggestion(c.Context(), cl, types.KindMachine, machine, err)
	}
	defer stream.Close()
	if _, err := stream.Exit(); errors.Is(err, client.ErrExitStatusUnknown) {
		// Said before a terminal goes raw.
		fmt.Fprintf(f.Err, "hf-cli: warning: %v: hf-cli exits 0 when the shell ends\n", err)
	}
	if err := copyShell(f, stream, in, tty); err != nil {
		if c.Context().Err() != nil {
			return c.Context().Err()
		}
		if errors.Is(err, client.ErrNoExitStatus) {
			return &shellExit{code: ExitNoStatus, err: fmt.Errorf("machine %s: %w", machine, err)}
		}
		if !errors.Is(err, net.ErrClosed) {
			return err
		}
	}
	exit, err := stream.Exit()
	switch {
	case errors.Is(err, client.ErrExitStatusUnknown):
		return nil
	case err != nil:
		return &shellExit{code: ExitNoStatus, err: fmt.Errorf("machine %s: %w", machine, err)}
	case exit.Signal != "":
		return &shellExit{code: exit.Code, err: fmt.Errorf("machine %s: the shell was killed by %s", machine, exit.Signal)}
	case exit.Code != 0:
		return &shellExit{code: exit.Code}
	}
	return nil
}

// copyShell passes the standard input to the shell and its output to the
// standard output until the output ends, with in (the standard input, nil
// if it is no file) in raw mode for a terminal.
func copyShell(f *Factory, stream client.ShellStream, in *os.File, tty bool) error {
	if tty {
		old, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			return err
		}
		defer func() { _ = term.Restore(int(in.Fd()), old) }()
	}
	go func() {
		// The end of a pipe's commands ends the shell's input: it runs the
		// last and exits. (A terminal's Ctrl-D is a byte for the shell.)
		if _, err := io.Copy(stream, f.In); err == nil {
			_ = stream.CloseWrite()
		}
	}()
	_, err := io.Copy(f.Out, stream)
	return err
}
