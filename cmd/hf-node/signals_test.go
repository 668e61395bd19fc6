package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// heldEnv makes this test binary the process under test of
// TestHoldIgnored: "hold" holds its ignored signals first, "" does not.
const heldEnv = "HF_NODE_TEST_HOLD"

// A process started with SIGHUP and SIGINT ignored (by sh's trap, as nohup
// does) gives its children the default action for both once it holds them,
// and still ignores them itself; without holding them, its children ignore
// them too (the premise: what nohup did to a native machine's shells).
func TestHoldIgnored(t *testing.T) {
	if mode, ok := os.LookupEnv(heldEnv); ok {
		heldChild(mode)
		return
	}
	hupInt := uint64(1<<(syscall.SIGHUP-1) | 1<<(syscall.SIGINT-1))
	for _, tc := range []struct {
		mode   string
		held   string
		ignore uint64 // what the child ignores of SIGHUP and SIGINT
	}{
		{mode: "", held: "[]", ignore: hupInt},
		{mode: "hold", held: "[hangup interrupt]", ignore: 0},
	} {
		t.Run("mode="+tc.mode, func(t *testing.T) {
			cmd := exec.Command("sh", "-c", `trap "" HUP INT; exec "$0" "$@"`, os.Args[0], "-test.run=^TestHoldIgnored$")
			cmd.Env = append(os.Environ(), heldEnv+"="+tc.mode)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "the process survives its own SIGHUP and SIGINT: %s", out)
			lines := strings.Split(string(out), "\n")
			require.GreaterOrEqual(t, len(lines), 2, string(out))
			assert.Equal(t, "held "+tc.held, lines[0])
			mask, err := strconv.ParseUint(lines[1], 16, 64)
			require.NoError(t, err, string(out))
			assert.Equal(t, tc.ignore, mask&hupInt, "the child's SigIgn: %s", lines[1])
		})
	}
}

// heldChild is the process under test: it holds (or not) what it was
// started ignoring, signals itself, and prints what it holds and the SigIgn
// of a child it starts.
func heldChild(mode string) {
	var held []os.Signal
	if mode == "hold" {
		held = holdIgnored(syscall.SIGHUP, syscall.SIGINT)
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGHUP)
	_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
	status, err := exec.Command("cat", "/proc/self/status").Output()
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	sigIgn := ""
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "SigIgn:"); ok {
			sigIgn = strings.TrimSpace(v)
		}
	}
	fmt.Printf("held %v\n%s\n", held, sigIgn)
	os.Exit(0)
}
