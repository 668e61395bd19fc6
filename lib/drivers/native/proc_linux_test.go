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
	assert.Equal(t, []cgroupFile{{"pids.max", "64"}, {"cpu.max", "150000 100000"}, {"memory.max", "2147483648"}},
		cgroupLimits(false, types.Resources{CPU: 1.5, RAMGB: 2}, 64))
	assert.Equal(t, []cgroupFile{{"cpu.max", "25000 100000"}}, cgroupLimits(false, types.Resources{CPU: 0.25}, 0))
	assert.Empty(t, cgroupLimits(false, types.Resources{}, 0))
	assert.Equal(t, []cgroupFile{{"pids.max", "64"}, {"cpu.cfs_period_us", "100000"}, {"cpu.cfs_quota_us", "150000"},
		{"memory.limit_in_bytes", "2147483648"}, {"memory.memsw.limit_in_bytes", "2147483648"}},
		cgroupLimits(true, types.Resources{CPU: 1.5, RAMGB: 2}, 64), "v1: the swap limit after the memory limit")

	// The files a cgroup would have, written into a plain directory.
	parent := t.TempDir()
	dirs, err := createCgroup(cgroupSetup{Parent: parent, Limits: true, Pids: true}, "hf-0123456789", types.Resources{CPU: 2, RAMGB: 0.5}, 100)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(parent, "hf-0123456789")}, dirs)
	assertFile(t, filepath.Join(dirs[0], "cpu.max"), "200000 100000")
	assertFile(t, filepath.Join(dirs[0], "memory.max"), "536870912")
	assertFile(t, filepath.Join(dirs[0], "pids.max"), "100")

	noPids, err := createCgroup(cgroupSetup{Parent: parent, Limits: true}, "hf-0123456780", types.Resources{CPU: 2}, 100)
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(noPids[0], "cpu.max"))
	assert.NoFileExists(t, filepath.Join(noPids[0], "pids.max"), "without the pids controller no process limit is written")

	noLimits, err := createCgroup(cgroupSetup{Parent: parent}, "hf-abcdefabcd", types.Resources{CPU: 2}, 100)
	require.NoError(t, err)
	assert.NoFileExists(t, filepath.Join(noLimits[0], "cpu.max"), "without controllers no limit is written")

	// cgroup v1: each file goes to the hierarchy of its controller; the
	// swap limit only where the kernel accounts swap (its file exists).
	mem, cpu, pids := t.TempDir(), t.TempDir(), t.TempDir()
	v1 := cgroupSetup{Parent: mem, Limits: true, Pids: true, V1: []cgroupHierarchy{
		{Parent: mem, Controllers: []string{"memory"}}, {Parent: cpu, Controllers: []string{"cpu", "cpuacct"}}, {Parent: pids, Controllers: []string{"pids"}}}}
	dirs, err = createCgroup(v1, "hf-0123456789", types.Resources{CPU: 0.5, RAMGB: 0.25}, 30)
	require.NoError(t, err)
	require.Equal(t, []string{filepath.Join(mem, "hf-0123456789"), filepath.Join(cpu, "hf-0123456789"), filepath.Join(pids, "hf-0123456789")}, dirs)
	assertFile(t, filepath.Join(dirs[0], "memory.limit_in_bytes"), "268435456")
	assert.NoFileExists(t, filepath.Join(dirs[0], memswLimit))
	assertFile(t, filepath.Join(dirs[1], "cpu.cfs_quota_us"), "50000")
	assertFile(t, filepath.Join(dirs[1], "cpu.cfs_period_us"), "100000")
	assertFile(t, filepath.Join(dirs[2], "pids.max"), "30")
	require.NoError(t, os.WriteFile(filepath.Join(dirs[0], memswLimit), []byte("9223372036854771712"), 0o644))
	_, err = createCgroup(v1, "hf-0123456789", types.Resources{RAMGB: 0.25}, 0)
	require.NoError(t, err)
	assertFile(t, filepath.Join(dirs[0], memswLimit), "268435456")
	assert.Equal(t, v1.dirsFor("x"), []string{filepath.Join(mem, "x"), filepath.Join(cpu, "x"), filepath.Join(pids, "x")})

	require.NoError(t, os.WriteFile(filepath.Join(dirs[1], "cpuacct.usage"), []byte("2500000\n"), 0o644))
	usec, ok := cgroupCPUUsec(dirs)
	assert.True(t, ok)
	assert.Equal(t, uint64(2500), usec, "cpuacct.usage is in nanoseconds")
	require.NoError(t, os.WriteFile(filepath.Join(noPids[0], "cpu.stat"), []byte("usage_usec 1234\nuser_usec 1000\n"), 0o644))
	usec, ok = cgroupCPUUsec(noPids)
	assert.True(t, ok)
	assert.Equal(t, uint64(1234), usec)
	_, ok = cgroupCPUUsec(noLimits)
	assert.False(t, ok)

	assert.Contains(t, cgroupSetup{Reason: "x is not a cgroup2 file system"}.describe(), "resource limits not enforced: x is not")
	assert.Contains(t, cgroupSetup{Parent: "/sys/fs/cgroup/hf-native", Limits: true}.describe(), "cpu and memory limits enforced with cgroup v2 (/sys/fs/cgroup/hf-native)")
	assert.Contains(t, cgroupSetup{Parent: "/sys/fs/cgroup/hf-native", Limits: true}.describe(), "no process limit")
	assert.Contains(t, cgroupSetup{Parent: "/sys/fs/cgroup/hf-native", Limits: true, Pids: true}.describe(), "cpu, memory and process limits enforced")
	assert.Equal(t, "cpu, memory and process limits enforced with cgroup v1 ("+mem+", "+cpu+", "+pids+")", v1.describe())
}

func assertFile(t *testing.T, path, want string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, want, string(b), path)
}

func TestProbeCgroups(t *testing.T) {
	// A plain directory is not cgroup2, nor does it hold v1 hierarchies.
	s := probeCgroups(t.TempDir())
	assert.Empty(t, s.Parent)
	assert.False(t, s.Limits)
	assert.Contains(t, s.Reason, "is not a cgroup2 file system and holds no cgroup v1 hierarchies of the cpu and memory controllers")
	s = probeCgroups("/nonexistent/cgroup")
	assert.Contains(t, s.Reason, "cannot read /nonexistent/cgroup")
}
