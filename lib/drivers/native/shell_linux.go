package native

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// shellGrace is how long a shell whose client left has after SIGHUP
// before it is killed.
const shellGrace = 2 * time.Second

// Shell implements drivers.Sheller: a login shell (shell_path -l) as the
// machine's user, in the groups its entry has, in its home, in its cgroup,
// with no_new_privs as its entry (unless allow_setuid), with the machine's
// identity in the environment (no claim metadata: the entry has those). In
// unprivileged mode it runs as the daemon's own user, which is never root
// (root cannot run that mode). When ctx ends first the shell is hung up,
// and its exit is the hang-up's.
func (d *Driver) Shell(ctx context.Context, r *types.Resource, opts drivers.ShellOptions, stream io.ReadWriter) (drivers.ShellExit, error) {
	if r == nil {
		return drivers.ShellExit{}, errors.New("shell: nil resource")
	}
	m, known, err := d.lookup(r.ID)
	if err != nil {
		return drivers.ShellExit{}, fmt.Errorf("shell %s: %w", r.ID, err)
	}
	if !known {
		return drivers.ShellExit{}, fmt.Errorf("shell %s: %w", r.ID, drivers.ErrNotFound)
	}
	d.mu.Lock()
	cfg := d.cfg
	d.mu.Unlock()
	attr := &syscall.SysProcAttr{Setsid: true}
	if cfg.Privileged() {
		gids, err := d.groupIDs(cfg, m.Groups)
		if err != nil {
			return drivers.ShellExit{}, fmt.Errorf("shell %s: %w", r.ID, err)
		}
		attr.Credential = &syscall.Credential{Uid: uint32(m.UID), Gid: uint32(m.GID), Groups: gids}
	}
	nnp := !cfg.AllowSetuid
	cmd := exec.Command(cfg.ShellPath, "-l")
	cmd.Dir = m.Home
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + m.Home, "USER=" + m.User, "LOGNAME=" + m.User,
		"SHELL=" + cfg.ShellPath, "TERM=xterm-256color", envMachineID + "=" + m.ID}
	if !opts.TTY {
		cmd.SysProcAttr = attr
		cmd.Stdout, cmd.Stderr = stream, stream
		cmd.WaitDelay = shellGrace // a child that keeps the output open
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return drivers.ShellExit{}, fmt.Errorf("shell %s: %w", r.ID, err)
		}
		if err := startConfined(m.Cgroup, m.CgroupV1, nnp, attr, cmd.Start); err != nil {
			return drivers.ShellExit{}, fmt.Errorf("shell %s: %w", r.ID, err)
		}
		// Ends at the client's end of input, or when the caller closes
		// the stream after the shell is gone.
		go func() {
			_, _ = io.Copy(stdin, stream)
			_ = stdin.Close()
		}()
		return waitShell(ctx, r.ID, cmd)
	}
	attr.Setctty = true
	size := &pty.Winsize{Rows: max(opts.Rows, 1), Cols: max(opts.Cols, 1)}
	var ptmx *os.File
	err = startConfined(m.Cgroup, m.CgroupV1, nnp, attr, func() (err error) {
		ptmx, err = pty.StartWithAttrs(cmd, size, attr)
		return err
	})
	if err != nil {
		return drivers.ShellExit{}, fmt.Errorf("shell %s: %w", r.ID, err)
	}
	defer ptmx.Close()
	go func() {
		_, _ = io.Copy(ptmx, stream)
		// The client left: hang up the shell's terminal.
		_ = ptmx.Close()
	}()
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(stream, ptmx)
		close(copied)
	}()
	exit, err := waitShell(ctx, r.ID, cmd)
	// What the shell wrote last may still be in the terminal: the copy ends
	// once it is read (the terminal's other end is closed then), or after
	// shellGrace when a process the shell left keeps the terminal open.
	select {
	case <-copied:
	case <-time.After(shellGrace):
	}
	return exit, err
}

// waitShell waits for the shell and returns its exit; when ctx ends first,
// it hangs the shell up and kills its process group after shellGrace.
func waitShell(ctx context.Context, id string, cmd *exec.Cmd) (drivers.ShellExit, error) {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-ctx.Done():
		pgid := cmd.Process.Pid
		_ = syscall.Kill(-pgid, syscall.SIGHUP)
		select {
		case err = <-done:
		case <-time.After(shellGrace):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			err = <-done
		}
	}
	// Wait's error says the shell failed (*exec.ExitError) or that its
	// output was cut off after WaitDelay: either way the state is the
	// shell's exit.
	if cmd.ProcessState == nil {
		return drivers.ShellExit{}, fmt.Errorf("shell %s: %w", id, err)
	}
	return shellExit(cmd.ProcessState.Sys().(syscall.WaitStatus)), nil
}

// shellExit is the exit of a shell that ended with ws.
func shellExit(ws syscall.WaitStatus) drivers.ShellExit {
	if !ws.Signaled() {
		return drivers.ShellExit{Code: ws.ExitStatus()}
	}
	sig := ws.Signal()
	name := unix.SignalName(sig)
	if name == "" {
		name = fmt.Sprintf("SIG%d", int(sig)) // a real-time signal
	}
	return drivers.ShellExit{Code: 128 + int(sig), Signal: name}
}
