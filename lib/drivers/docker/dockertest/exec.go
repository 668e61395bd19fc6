package dockertest

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"
)

// Exec runs cmd in the running container id and returns its standard output;
// the test fails when the command cannot run or exits non-zero.
func Exec(t testing.TB, cli *client.Client, id string, cmd ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ex, err := cli.ContainerExecCreate(ctx, id, container.ExecOptions{Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		t.Fatalf("dockertest: exec %v in %s: %v", cmd, id, err)
	}
	att, err := cli.ContainerExecAttach(ctx, ex.ID, container.ExecAttachOptions{})
	if err != nil {
		t.Fatalf("dockertest: exec %v in %s: attach: %v", cmd, id, err)
	}
	defer att.Close()
	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, att.Reader); err != nil {
		t.Fatalf("dockertest: exec %v in %s: read: %v", cmd, id, err)
	}
	res, err := cli.ContainerExecInspect(ctx, ex.ID)
	if err != nil {
		t.Fatalf("dockertest: exec %v in %s: inspect: %v", cmd, id, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("dockertest: exec %v in %s: exit code %d: %s", cmd, id, res.ExitCode, stderr.String())
	}
	return stdout.String()
}
