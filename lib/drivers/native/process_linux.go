package native

import (
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// procSpec is how to start an entry process.
type procSpec struct {
	Shell, Script string
	Env           []string
	Dir           string
	// Log receives stdout and stderr (created or appended).
	Log string
	// Cred, when set, is who the process runs as.
	Cred *syscall.Credential
	// Cgroup (v2) or CgroupV1, when set, are the machine's cgroups, which
	// the process starts in (startConfined).
	Cgroup   string
	CgroupV1 []string
	// NoNewPrivs starts the process with no_new_privs (startConfined).
	NoNewPrivs bool
}

// startProcess starts spec in a process group of its own and returns its pid
// and start time. The driver reaps it (reapChild); the process outlives the
// daemon when the daemon stops first.
func startProcess(spec procSpec, procRoot string) (int, uint64, error) {
	logf, err := os.OpenFile(spec.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, 0, fmt.Errorf("entry log: %w", err)
	}
	defer logf.Close()
	attr := &syscall.SysProcAttr{Setpgid: true, Credential: spec.Cred}
	cmd := &exec.Cmd{
		Path:        spec.Shell,
		Args:        []string{spec.Shell, "-c", spec.Script},
		Env:         spec.Env,
		Dir:         spec.Dir,
		Stdout:      logf,
		Stderr:      logf,
		SysProcAttr: attr,
	}
	if err := startConfined(spec.Cgroup, spec.CgroupV1, spec.NoNewPrivs, attr, cmd.Start); err != nil {
		return 0, 0, fmt.Errorf("start entry: %w", err)
	}
	pid := cmd.Process.Pid
	// The driver waits with wait4 on the pid (reapChild), not through
	// cmd.Wait, so no goroutine has to sit in Wait for the process's life.
	_ = cmd.Process.Release()
	p, err := readProc(procRoot, pid)
	if err != nil {
		// Our unreaped child is readable even after it exited.
		return pid, 0, fmt.Errorf("read entry process %d: %w", pid, err)
	}
	return pid, p.Start, nil
}

// reapChild collects the exit status of a child that ended, without blocking.
// done is false while it runs; code is its exit status, -1 when a signal
// killed it, nil when nobody can tell.
func reapChild(pid int) (done bool, code *int, desc string) {
	var ws syscall.WaitStatus
	for {
		wpid, err := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
		if errors.Is(err, syscall.EINTR) {
			continue
		}
		if err != nil {
			// ECHILD: not (or no longer) our child; nothing to collect.
			return true, nil, "exit status unknown: " + err.Error()
		}
		if wpid == 0 {
			return false, nil, ""
		}
		break
	}
	code = new(int)
	switch {
	case ws.Exited():
		*code = ws.ExitStatus()
		return true, code, fmt.Sprintf("exit status %d", *code)
	case ws.Signaled():
		*code = -1
		return true, code, "killed by signal " + ws.Signal().String()
	}
	*code = -1
	return true, code, "ended: wait status " + strconv.Itoa(int(ws))
}

// signalProc sends sig to pid; a process that is already gone is fine.
func signalProc(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}

// limitUserProcesses makes n the most processes (and threads) any user may
// have in the processes this daemon starts from now on: RLIMIT_NPROC, soft
// and hard, on the daemon itself, which its children inherit. In privileged
// mode every machine is a user of its own, so that is a per-machine process
// limit that holds on any host, cgroup v1 included, and that a machine
// cannot raise. The daemon, as root, is not held to it (the kernel exempts
// root). The limit only goes down: of several instances the lowest wins.
func limitUserProcesses(n int64) (int64, error) {
	var cur unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NPROC, &cur); err != nil {
		return 0, fmt.Errorf("read the process limit: %w", err)
	}
	// Soft and hard both: a soft limit below a higher hard one is one a
	// machine may raise.
	want := min(uint64(n), cur.Cur)
	if cur.Cur == want && cur.Max == want {
		return int64(min(want, math.MaxInt64)), nil
	}
	if err := unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: want, Max: want}); err != nil {
		return 0, fmt.Errorf("set the process limit to %d: %w", want, err)
	}
	return int64(min(want, math.MaxInt64)), nil
}
