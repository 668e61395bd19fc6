package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// ErrNotHere is returned by MachineLogs for a machine this node does not
// hold: its own node serves its logs.
var ErrNotHere = errors.New("machine is not on this node")

// ErrNoLogs is returned by MachineLogs when the machine's driver keeps no
// output.
var ErrNoLogs = errors.New("the machine's driver keeps no output")

// MachineLogs writes the output of machine, one of this node's, to w (see
// drivers.LogReader).
func (n *Node) MachineLogs(ctx context.Context, machine string, opts drivers.LogOptions, w io.Writer) error {
	e, ok := n.acc.get(machine)
	if !ok || e.Resource == nil {
		return fmt.Errorf("%s: %w", machine, ErrNotHere)
	}
	in, ok := n.instances[e.Driver]
	if !ok {
		return fmt.Errorf("%s: %w", machine, ErrNotHere)
	}
	lr, ok := in.Driver.(drivers.LogReader)
	if !ok {
		return fmt.Errorf("%s (driver %s): %w", machine, e.Driver, ErrNoLogs)
	}
	return lr.Logs(ctx, e.whole(), opts, w)
}

// ErrNoShell is returned by MachineShell when the machine's driver runs no
// shells.
var ErrNoShell = errors.New("the machine's driver runs no shells")

// MachineShell runs a shell in machine, one of this node's: once the
// driver is known to run shells, open gives the client's stream (the
// caller answers the upgrade there, and closes the stream after
// MachineShell returned), and the shell runs on it until it exits or ctx
// ends. It returns how the shell ended (see drivers.Sheller).
func (n *Node) MachineShell(ctx context.Context, machine string, opts drivers.ShellOptions, open func() (io.ReadWriter, error)) (drivers.ShellExit, error) {
	e, ok := n.acc.get(machine)
	if !ok || e.Resource == nil || e.Phase != types.MachineRunning {
		return drivers.ShellExit{}, fmt.Errorf("%s: %w", machine, ErrNotHere)
	}
	in, ok := n.instances[e.Driver]
	if !ok {
		return drivers.ShellExit{}, fmt.Errorf("%s: %w", machine, ErrNotHere)
	}
	sh, ok := in.Driver.(drivers.Sheller)
	if !ok {
		return drivers.ShellExit{}, fmt.Errorf("%s (driver %s): %w", machine, e.Driver, ErrNoShell)
	}
	stream, err := open()
	if err != nil {
		return drivers.ShellExit{}, err
	}
	n.log.Info("machine shell", "machine", machine, "driver", e.Driver, "tty", opts.TTY)
	return sh.Shell(ctx, e.whole(), opts, stream)
}
