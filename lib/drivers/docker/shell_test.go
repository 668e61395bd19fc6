package docker

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/drivertest"
)

// processes lists what runs in container id (busybox ps), or says why it
// could not.
func processes(ctx context.Context, cli *client.Client, id string) string {
	ex, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: []string{"ps", "-o", "pid,args"}, AttachStdout: true})
	if err != nil {
		return err.Error()
	}
	att, err := cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		return err.Error()
	}
	defer att.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, io.Discard, att.Reader); err != nil {
		return err.Error()
	}
	return out.String()
}

// A shell whose context ends is hung up, with a terminal and without: its
// processes are gone from the container (where the engine leaves an exec
// whose client left), and its exit is the hang-up's.
func TestShellHangUp(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	d := f.driver(t, "node-a", "docker", nil)
	r := f.allocateShell(t, d, "box", "sleep 300")
	id := f.inspect(t, r.ID).ID
	for _, tty := range []bool{false, true} {
		ctx, cancel := context.WithCancel(t.Context())
		in, typed := io.Pipe()
		type result struct {
			exit drivers.ShellExit
			err  error
		}
		res := make(chan result, 1)
		go func() {
			exit, err := d.Shell(ctx, r, drivers.ShellOptions{TTY: tty, Rows: 24, Cols: 80}, &drivertest.ShellStream{In: in})
			res <- result{exit, err}
		}()
		_, err := io.WriteString(typed, "sleep 601\n")
		require.NoError(t, err)
		if !tty {
			_ = typed.Close() // its input ended, as `echo 'sleep 601' | hf-cli machine shell` ends it
		}
		require.Eventually(t, func() bool { return strings.Contains(processes(t.Context(), f.cli, id), "sleep 601") }, 20*time.Second, 50*time.Millisecond)
		start := time.Now()
		cancel()
		select {
		case got := <-res:
			require.NoError(t, got.err, "tty %v", tty)
			assert.Equal(t, drivers.ShellExit{Code: 129}, got.exit, "tty %v: the hang-up's (SIGHUP)", tty)
			t.Logf("tty %v: hung up in %s", tty, time.Since(start))
		case <-time.After(30 * time.Second):
			require.FailNow(t, "the shell did not end", "tty %v", tty)
		}
		assert.NotContains(t, processes(t.Context(), f.cli, id), "sleep 601", "tty %v", tty)
		_ = typed.Close()
	}
	require.NoError(t, d.Deallocate(t.Context(), r))
	f.assertNothingLeft(t)
}

// containerPid reads the pid in the container from the host's view of the
// process, and only when the process is the container's.
func TestContainerPid(t *testing.T) {
	const cid = "184b4f9936c04b17aa8f8ffb93e4bd47e4adcda0ced8f5c0edb42a335c02fcce"
	proc := t.TempDir()
	write := func(pid, cgroup, status string) {
		require.NoError(t, os.MkdirAll(filepath.Join(proc, pid), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(proc, pid, "cgroup"), []byte(cgroup), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(proc, pid, "status"), []byte(status), 0o644))
	}
	write("22224", "4:memory:/docker/"+cid+"\n0::/docker/"+cid+"\n", "Name:\tsh\nNSpid:\t22224\t7\nNSpgid:\t22224\t7\n")
	write("22300", "0::/system.slice/docker-"+cid+".scope\n", "Name:\tsh\nNSpid:\t22300\t12\n")
	write("500", "0::/user.slice\n", "Name:\tsh\nNSpid:\t500\n")
	write("600", "0::/docker/"+cid+"\n", "Name:\tsh\n")
	for _, tc := range []struct {
		pid  int
		want int
		err  string
	}{
		{pid: 22224, want: 7},
		{pid: 22300, want: 12},
		{pid: 500, err: "not one of container 184b4f9936c0 here"},
		{pid: 404, err: "not one of container 184b4f9936c0 here"},
		{pid: 0, err: "not one of container"},
		{pid: 600, err: "no NSpid"},
	} {
		got, err := containerPid(proc, tc.pid, cid)
		if tc.err != "" {
			assert.ErrorContains(t, err, tc.err, "pid %d", tc.pid)
			continue
		}
		require.NoError(t, err, "pid %d", tc.pid)
		assert.Equal(t, tc.want, got, "pid %d", tc.pid)
	}
}
