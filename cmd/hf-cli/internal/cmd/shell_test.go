package cmd

import (
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/client/clienttest"
	"github.com/hf-fleet/hf/lib/types"
)

// scriptedShell reads the commands piped to it up to their end, says what
// it read, and ends as its last command says: "exit N", "false", "kill"
// (SIGKILL), "drop" (the connection drops before the status).
func scriptedShell(_ string, _ bool, in io.Reader, out io.Writer) clienttest.ShellEnd {
	cmds, _ := io.ReadAll(in)
	fmt.Fprintf(out, "ran %q\n", cmds)
	lines := strings.Split(strings.TrimSpace(string(cmds)), "\n")
	var end clienttest.ShellEnd
	switch last := lines[len(lines)-1]; {
	case strings.HasPrefix(last, "exit "):
		_, _ = fmt.Sscan(strings.TrimPrefix(last, "exit "), &end.Code)
	case last == "false":
		end.Code = 1
	case last == "kill":
		end.Code, end.Signal = 137, "SIGKILL"
	case last == "drop":
		end.Drop = true
	}
	return end
}

// machine shell exits with the shell's own status, says on stderr when a
// signal killed the shell, and exits 255 with a message when the status
// did not come; its own errors keep their codes.
func TestMachineShellExitCode(t *testing.T) {
	for _, tc := range []struct {
		stdin   string
		code    int
		stderr  string
		machine string
	}{
		{stdin: "id -u\n", code: 0},
		{stdin: "id -u\nexit 3\n", code: 3},
		{stdin: "false\n", code: 1},
		{stdin: "exit 255\n", code: 255},
		{stdin: "kill\n", code: 137, stderr: "hf-cli: machine m1: the shell was killed by SIGKILL\n"},
		{stdin: "drop\n", code: ExitNoStatus, stderr: "hf-cli: machine m1: no exit status from the shell: the connection ended before it\n"},
		{stdin: "exit 3\n", machine: "m-none", code: ExitNotFound, stderr: "hf-cli: not_found: machine \"m-none\" not found\n"},
	} {
		t.Run(strings.TrimSpace(tc.stdin)+" "+tc.machine, func(t *testing.T) {
			c := newCLI(t)
			c.srv.Put(&types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: "m1"}})
			c.srv.OnShell(scriptedShell)
			c.stdin = tc.stdin
			machine := "m1"
			if tc.machine != "" {
				machine = tc.machine
			}
			r := c.run("machine", "shell", machine)
			assert.Equal(t, tc.code, r.code, "stderr: %s", r.err)
			assert.Equal(t, tc.stderr, r.err)
			if tc.machine == "" {
				assert.Equal(t, fmt.Sprintf("ran %q\n", tc.stdin), r.out, "all the output, before the exit")
			}
		})
	}
}

// Against a node from before hf-shell.v2 machine shell opens the raw shell,
// warns that the shell's status will not come, and exits 0 as it did.
func TestMachineShellOldNode(t *testing.T) {
	c := newCLI(t)
	c.srv.Put(&types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: "m1"}})
	c.srv.OnShell(scriptedShell)
	c.srv.RawShellsOnly(true)
	c.stdin = "exit 3\n"
	r := c.run("machine", "shell", "m1")
	require.Equal(t, 0, r.code, "stderr: %s", r.err)
	assert.Equal(t, "ran \"exit 3\\n\"\n", r.out)
	assert.Equal(t, "hf-cli: warning: the machine's node sends no exit status (an hf-node from before hf-shell.v2): hf-cli exits 0 when the shell ends\n", r.err)
}
