package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// shellGrace is how long a shell that is hung up has after SIGHUP before
// it is killed, as the native driver's.
const shellGrace = 2 * time.Second

// procDir is where the engine's host shows its processes, when it is this
// host.
const procDir = "/proc"

// Shell implements drivers.Sheller: /bin/sh in the container through the
// engine's exec, as the container's user (inside the container, never on
// the host). Its exit is the exec's exit code; the engine reports a shell
// killed by a signal as 128 plus the signal's number, without its name.
// When ctx ends first the shell is hung up (see hangUp), and its exit is
// the hang-up's.
func (d *Driver) Shell(ctx context.Context, r *types.Resource, opts drivers.ShellOptions, stream io.ReadWriter) (drivers.ShellExit, error) {
	if r == nil {
		return drivers.ShellExit{}, errors.New("shell: nil resource")
	}
	st, err := d.state()
	if err != nil {
		return drivers.ShellExit{}, fmt.Errorf("shell %s: %w", r.ID, err)
	}
	c, err := d.inspectOwn(ctx, st, r.ID)
	if err != nil {
		return drivers.ShellExit{}, fmt.Errorf("shell %s: %w", r.ID, err)
	}
	eo := container.ExecOptions{Cmd: []string{"/bin/sh"}, Tty: opts.TTY, AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Env: []string{"TERM=xterm-256color"}}
	if opts.TTY {
		eo.ConsoleSize = &[2]uint{uint(max(opts.Rows, 1)), uint(max(opts.Cols, 1))}
	}
	ex, err := st.cli.ContainerExecCreate(ctx, c.ID, eo)
	if err != nil {
		return drivers.ShellExit{}, fmt.Errorf("shell %s: %w", r.ID, err)
	}
	att, err := st.cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{Tty: opts.TTY, ConsoleSize: eo.ConsoleSize})
	if err != nil {
		return drivers.ShellExit{}, fmt.Errorf("shell %s: %w", r.ID, err)
	}
	defer att.Close()
	go func() {
		_, _ = io.Copy(att.Conn, stream)
		if !opts.TTY {
			_ = att.CloseWrite() // end of input; a terminal ends with its shell
		}
	}()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if opts.TTY {
			_, _ = io.Copy(stream, att.Reader)
		} else {
			_, _ = stdcopy.StdCopy(stream, stream, att.Reader)
		}
	}()
	select {
	case <-done:
	case <-ctx.Done():
		// The hang-up and the exit code are asked of the engine after ctx
		// ended, for a bounded time.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), 3*shellGrace)
		defer cancel()
		if err := hangUp(ctx, st.cli, c.ID, ex.ID, done); err != nil {
			return drivers.ShellExit{}, fmt.Errorf("shell %s: hang up: %w", r.ID, err)
		}
	}
	code, err := execExitCode(ctx, st.cli, ex.ID)
	if err != nil {
		return drivers.ShellExit{}, fmt.Errorf("shell %s: %w", r.ID, err)
	}
	return drivers.ShellExit{Code: code}, nil
}

// hangUp ends exec id in container cid, whose output ends (done) once its
// processes are gone: SIGHUP to its process group (runc makes every exec
// the leader of a session of its own), then SIGKILL after shellGrace. The
// engine's API has no call that ends an exec, whose processes outlive
// its attach connection: the signals come from `kill` in another exec,
// as the container's user as the shell is, to the exec's pid in the
// container, which only the engine's host tells (NSpid in
// /proc/<pid>/status). Through an engine on another host, or from a node
// in another pid namespace, the shell cannot be hung up: the error says so.
func hangUp(ctx context.Context, cli *client.Client, cid, id string, done <-chan struct{}) error {
	ins, err := cli.ContainerExecInspect(ctx, id)
	if err != nil {
		return fmt.Errorf("exec inspect: %w", err)
	}
	if !ins.Running {
		return nil
	}
	pid, err := containerPid(procDir, ins.Pid, cid)
	if err != nil {
		return err
	}
	for _, sig := range []string{"HUP", "KILL"} {
		kill, err := cli.ContainerExecCreate(ctx, cid, container.ExecOptions{Cmd: []string{"/bin/sh", "-c", "kill -" + sig + " -" + strconv.Itoa(pid)}})
		if err != nil {
			return fmt.Errorf("kill -%s: %w", sig, err)
		}
		if err := cli.ContainerExecStart(ctx, kill.ID, container.ExecStartOptions{Detach: true}); err != nil {
			return fmt.Errorf("kill -%s: %w", sig, err)
		}
		select {
		case <-done:
			return nil
		case <-time.After(shellGrace):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("its output goes on %s after SIGKILL", shellGrace)
}

// containerPid returns the pid, in the pid namespace of container cid, of
// process pid of the engine's host, as proc (/proc) shows it: nothing
// when proc is not the engine host's, or pid not in cid (its cgroup does
// not name the container).
func containerPid(proc string, pid int, cid string) (int, error) {
	dir := filepath.Join(proc, strconv.Itoa(pid))
	cg, err := os.ReadFile(filepath.Join(dir, "cgroup"))
	if err != nil || pid <= 0 || cid == "" || !strings.Contains(string(cg), cid) {
		return 0, fmt.Errorf("process %d of the exec is not one of container %.12s here (an engine on another host, or a node in another pid namespace)", pid, cid)
	}
	status, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			return strconv.Atoi(f[len(f)-1])
		}
	}
	return 0, fmt.Errorf("process %d: no NSpid in its status (a kernel before 4.1)", pid)
}

// execExitWait is how long the engine has to mark an exec ended after its
// output ended.
const execExitWait = 5 * time.Second

// execExitCode returns the exit code of exec id, whose output has ended.
// The engine may close the output a moment before it marks the exec ended:
// until then it is asked again, for up to execExitWait.
func execExitCode(ctx context.Context, cli *client.Client, id string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, execExitWait)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		res, err := cli.ContainerExecInspect(ctx, id)
		if err != nil {
			return 0, fmt.Errorf("exec inspect: %w", err)
		}
		if !res.Running {
			if res.ExitCode < 0 || res.ExitCode > 255 {
				return 0, fmt.Errorf("exec inspect: exit code %d is not a status", res.ExitCode)
			}
			return res.ExitCode, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return 0, fmt.Errorf("exec inspect: still running after its output ended: %w", ctx.Err())
		}
	}
}
