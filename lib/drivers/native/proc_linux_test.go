package native

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestParseStat(t *testing.T) {
	// The command name may hold spaces and parentheses.
	line := "4242 (my (odd) cmd) S 1 4240 4240 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 100 18446744073709551615\n"
	p, err := parseStat([]byte(line))
	require.NoError(t, err)
	assert.Equal(t, procInfo{PPID: 1, PGID: 4240, State: 'S', Start: 987654, CPUTicks: 3}, p)
	assert.True(t, p.live())

	z, err := parseStat([]byte("7 (sh) Z 1 7 7 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 55 0 0 0"))
	require.NoError(t, err)
	assert.False(t, z.live())

	for _, bad := range []string{"", "1 (x", "1 (x) S 1 2", "1 (x) S a 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20"} {
		_, err := parseStat([]byte(bad))
		assert.Error(t, err, "%q", bad)
	}
}

func TestParseStatusUIDs(t *testing.T) {
	uids, err := parseStatusUIDs([]byte("Name:\tsleep\nUmask:\t0022\nState:\tS (sleeping)\nUid:\t1001\t1002\t1003\t1004\nGid:\t5\t5\t5\t5\n"))
	require.NoError(t, err)
	assert.Equal(t, [4]int{1001, 1002, 1003, 1004}, uids)
	p := procInfo{UIDs: uids}
	assert.True(t, p.hasUID(1003))
	assert.False(t, p.hasUID(0))
	_, err = parseStatusUIDs([]byte("Name:\tx\n"))
	assert.Error(t, err)
}

func TestReadOwnProcess(t *testing.T) {
	p, err := readProc("/proc", os.Getpid())
	require.NoError(t, err)
	assert.Equal(t, os.Getpid(), p.PID)
	assert.Equal(t, os.Getppid(), p.PPID)
	assert.True(t, p.live())
	assert.Equal(t, os.Getuid(), p.UIDs[0])
	assert.NotZero(t, p.Start)

	all, err := listProcs("/proc")
	require.NoError(t, err)
	found := false
	for _, q := range all {
		found = found || (q.PID == p.PID && q.Start == p.Start)
	}
	assert.True(t, found, "listProcs finds this process")
	assert.True(t, procHasEnv("/proc", os.Getpid(), "PATH="+os.Getenv("PATH")) || os.Getenv("PATH") == "")
	assert.False(t, procHasEnv("/proc", os.Getpid(), "HF_NATIVE_ID=nobody-has-this"))
}

func TestMountsUnder(t *testing.T) {
	info := `22 1 8:1 / / rw - ext4 /dev/sda1 rw
30 22 0:5 / /ws/hf-1 rw - tmpfs tmpfs rw
31 30 0:6 / /ws/hf-1/tools/proc rw - proc proc rw
32 22 0:7 / /ws/hf-10 rw - tmpfs tmpfs rw
33 22 0:8 / /ws/hf-1/with\040space rw - tmpfs tmpfs rw
`
	assert.Equal(t, []string{"/ws/hf-1/tools/proc", "/ws/hf-1/with space", "/ws/hf-1"}, mountsUnder([]byte(info), "/ws/hf-1"),
		"deepest first; a sibling with the same prefix is not included")
	assert.Empty(t, mountsUnder([]byte(info), "/elsewhere"))
}

func TestCgroupLimits(t *testing.T) {
	assert.Equal(t, map[string]string{"cpu.max": "150000 100000", "memory.max": "2147483648", "pids.max": "64"},
		cgroupLimits(types.Resources{CPU: 1.5, RAMGB: 2}, 64))
	assert.Equal(t, map[string]string{"cpu.max": "25000 100000"}, cgroupLimits(types.Resources{CPU: 0.25}, 0))
	assert.Empty(t, cgroupLimits(types.Resources{}, 0))

	// The files a cgroup would have, written into a plain directory.
	parent := t.TempDir()
	dir, err := createCgroup(cgroupSetup{Parent: parent, Limits: true, Pids: true}, "hf-0123456789", types.Resources{CPU: 2, RAMGB: 0.5}, 100)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(parent, "hf-0123456789"), dir)
	b, err := os.ReadFile(filepath.Join(dir, "cpu.max"))
	require.NoError(t, err)
	assert.Equal(t, "200000 100000", string(b))
	b, err = os.ReadFile(filepath.Join(dir, "memory.max"))
	require.NoError(t, err)
	assert.Equal(t, "536870912", string(b))
	b, err = os.ReadFile(filepath.Join(dir, "pids.max"))
	require.NoError(t, err)
	assert.Equal(t, "100", string(b))

	noPids, err := createCgroup(cgroupSetup{Parent: parent, Limits: true}, "hf-0123456780", types.Resources{CPU: 2}, 100)
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(noPids, "cpu.max"))
	assert.NoFileExists(t, filepath.Join(noPids, "pids.max"), "without the pids controller no process limit is written")

	noLimits, err := createCgroup(cgroupSetup{Parent: parent}, "hf-abcdefabcd", types.Resources{CPU: 2}, 100)
	require.NoError(t, err)
	assert.NoFileExists(t, filepath.Join(noLimits, "cpu.max"), "without controllers no limit is written")

	assert.Contains(t, cgroupSetup{Reason: "x is not a cgroup2 file system"}.describe(), "resource limits not enforced: x is not")
	assert.Contains(t, cgroupSetup{Parent: "/sys/fs/cgroup/hf-native", Limits: true}.describe(), "cpu and memory limits enforced")
	assert.Contains(t, cgroupSetup{Parent: "/sys/fs/cgroup/hf-native", Limits: true}.describe(), "no process limit")
	assert.Contains(t, cgroupSetup{Parent: "/sys/fs/cgroup/hf-native", Limits: true, Pids: true}.describe(), "cpu, memory and process limits enforced")
}

func TestProbeCgroups(t *testing.T) {
	// A plain directory is not cgroup2.
	s := probeCgroups(t.TempDir())
	assert.Empty(t, s.Parent)
	assert.False(t, s.Limits)
	assert.Contains(t, s.Reason, "is not a cgroup2 file system")
	s = probeCgroups("/nonexistent/cgroup")
	assert.Contains(t, s.Reason, "cannot read /nonexistent/cgroup")
}
