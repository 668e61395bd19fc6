package native

import (
	"archive/tar"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// testPrefix starts the users the tests make, so a leftover is easy to spot.
const testPrefix = "hft-"

// runScript is the entry of the test images: it writes what it sees into
// $HOME/out.txt and keeps running.
const runScript = `#!/bin/sh
{
  echo "claim=$claim"
  echo "user=$HF_USER"
  echo "shout=$shout"
  echo "hooks=${LD_PRELOAD-}${NODE_OPTIONS-}${PYTHONPATH-}${PERL5OPT-}${GIT_SSH_COMMAND-}${undeclared-}"
  id -u
  cat "$1/greeting.txt"
} > "$HOME/out.txt.tmp"
mv "$HOME/out.txt.tmp" "$HOME/out.txt"
exec sleep 600
`

// testHost is one test's host: a base directory machine users can reach, an
// image server with a tar.gz and a tar.xz image, and a node name of its own so
// the users of one test never look like another's.
type testHost struct {
	base string
	node string
	srv  *imageServer
	tmpl types.MachineTemplate
	meta map[string]string
	// toolsURL and dataURL are the paths of the two images on srv.
	toolsPath, dataPath string
}

func newTestHost(t *testing.T) *testHost {
	t.Helper()
	base, err := os.MkdirTemp("", "hf-native-test-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(base, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	var b [4]byte
	_, _ = rand.Read(b[:])
	h := &testHost{base: base, node: "t" + hex.EncodeToString(b[:]), srv: newImageServer(t),
		toolsPath: "/images/tools.tar.gz", dataPath: "/images/data.tar.xz",
		// Besides two declared keys, what an attacker would send: loader and
		// interpreter hooks and a key the template does not declare. None
		// may reach the entry; the shell text stays data.
		meta: map[string]string{"claim": "conformance-claim", "HF_USER": "alice", "shout": "x; id > /tmp/pwned #",
			"LD_PRELOAD": "/nonexistent/evil.so", "NODE_OPTIONS": "--require /evil.js", "PYTHONPATH": "/evil",
			"PERL5OPT": "-Mevil", "GIT_SSH_COMMAND": "evil", "undeclared": "x"}}
	// Registered first, so it runs last: whatever a failed test left of its
	// users is removed.
	t.Cleanup(func() { removeTestUsers(t, h.node) })

	tools := compress(t, "gzip", makeTar(t,
		tarEntry{Name: "bin/", Type: tar.TypeDir},
		tarEntry{Name: "bin/run.sh", Body: runScript, Mode: 0o755}))
	data := compress(t, "xz", makeTar(t, tarEntry{Name: "greeting.txt", Body: "hello from xz\n"}))
	toolsURL, toolsSum := h.srv.add(h.toolsPath, tools)
	dataURL, dataSum := h.srv.add(h.dataPath, data)
	h.tmpl = machineTemplate("conformance", TemplateConfig{
		Images: []Image{{URL: toolsURL, Sum: toolsSum, Tag: "tools"}, {URL: dataURL, Sum: dataSum, Tag: "data"}},
		Entry:  "{{.Disks.tools}}/bin/run.sh {{.Disks.data}}",
	})
	return h
}

// config is the driver config for this host with extra keys on top.
func (h *testHost) config(extra map[string]any) []byte {
	c := map[string]any{
		"workspace_path": filepath.Join(h.base, "workspace"),
		"home_path":      filepath.Join(h.base, "home"),
		"user_prefix":    testPrefix,
		"stop_grace":     "2s",
	}
	maps.Copy(c, extra)
	b, _ := json.Marshal(c)
	return b
}

// driver returns a prepared driver on dataDir, closed when the test ends.
func (h *testHost) driver(t *testing.T, dataDir string, extra map[string]any) *Driver {
	t.Helper()
	d := newDriver(drivers.Env{Instance: Type, DataDir: dataDir, NodeName: h.node})
	if extra["unprivileged"] == true {
		asDaemonUser(d)
	}
	require.NoError(t, d.Prepare(t.Context(), h.config(extra)))
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// asDaemonUser makes d behave as a driver of a daemon that does not run as
// root, so unprivileged mode, which root may not use, is tested on a root CI
// host too. Its entries still run as the test's own user.
func asDaemonUser(d *Driver) *Driver {
	d.root = false
	return d
}

// removeTestUsers kills the processes of and deletes every user a test of
// node made; a passing test leaves none.
func removeTestUsers(t *testing.T, node string) {
	b, err := os.ReadFile("/etc/passwd")
	if err != nil {
		return
	}
	for _, e := range parsePasswd(b) {
		if !strings.HasPrefix(e.GECOS, "hf-native "+node+"/") || e.UID == 0 {
			continue
		}
		t.Logf("cleanup: removing leftover user %s", e.Name)
		for range 50 {
			procs, _ := listProcs("/proc")
			n := 0
			for _, p := range procs {
				if p.hasUID(e.UID) && p.live() {
					_ = syscall.Kill(p.PID, syscall.SIGKILL)
					n++
				}
			}
			if n == 0 {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = exec.Command("userdel", "--remove", "--force", e.Name).Run()
	}
}

// markedUsers returns the passwd entries carrying marker.
func markedUsers(t *testing.T, marker string) []passwdEntry {
	t.Helper()
	b, err := os.ReadFile("/etc/passwd")
	require.NoError(t, err)
	var out []passwdEntry
	for _, e := range parsePasswd(b) {
		if e.GECOS == marker {
			out = append(out, e)
		}
	}
	return out
}

// hasLine reports whether file has a line starting with name+":".
func hasLine(t *testing.T, file, name string) bool {
	t.Helper()
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(b), "\n") {
		if strings.HasPrefix(line, name+":") {
			return true
		}
	}
	return false
}

// procsWith returns the pids of processes (zombies included) with uid, or,
// for uid < 0, with HF_NATIVE_ID=id in their environment.
func procsWith(t *testing.T, uid int, id string) []int {
	t.Helper()
	procs, err := listProcs("/proc")
	require.NoError(t, err)
	var out []int
	for _, p := range procs {
		if (uid > 0 && p.hasUID(uid)) || (uid < 0 && procHasEnv("/proc", p.PID, envMachineID+"="+id)) {
			out = append(out, p.PID)
		}
	}
	return out
}

func machineOf(t *testing.T, r types.Resource) machine {
	t.Helper()
	var m machine
	require.NoError(t, json.Unmarshal(r.Data, &m))
	require.Equal(t, r.ID, m.ID)
	return m
}

// checkRunning proves that r's entry ran as its user, read the metadata and
// both images, and still runs.
func (h *testHost) checkRunning(t *testing.T, r types.Resource) {
	m := machineOf(t, r)
	out := filepath.Join(m.Home, "out.txt")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := os.Stat(out)
		require.NoError(c, err)
	}, 10*time.Second, 20*time.Millisecond, "the entry writes %s", out)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, "claim=conformance-claim\nuser=alice\nshout=x; id > /tmp/pwned #\nhooks=\n"+strconv.Itoa(m.UID)+"\nhello from xz\n", string(b))
	fi, err := os.Stat(out)
	require.NoError(t, err)
	assert.Equal(t, uint32(m.UID), fi.Sys().(*syscall.Stat_t).Uid, "the file belongs to the machine's user")
	assert.Equal(t, m.User, r.Info["user"])
	assert.Equal(t, m.Home, r.Info["home"])
	assert.Equal(t, m.Workspace, r.Info["workspace"])
	assert.Equal(t, Type, r.Driver)
	if m.Unprivileged {
		assert.Equal(t, os.Getuid(), m.UID)
		assert.NotEmpty(t, procsWith(t, -1, m.ID), "a process carries the machine id")
	} else {
		assert.True(t, hasLine(t, "/etc/passwd", m.User), "passwd has the user")
		assert.Equal(t, m.ID, m.User)
		assert.NotEmpty(t, procsWith(t, m.UID, ""), "the user has processes")
		st, err := os.Stat(m.Home)
		require.NoError(t, err)
		assert.Equal(t, os.ModeDir|0o700, st.Mode(), "the home is private")
	}
	for _, dir := range m.cgroups() {
		assert.Contains(t, cgroupProcs(dir), m.PID, "the entry runs in the machine's cgroup %s", dir)
	}
}

// checkGone proves that nothing of r is left on the host.
func (h *testHost) checkGone(t *testing.T, r types.Resource) {
	m := machineOf(t, r)
	if !m.Unprivileged {
		assert.False(t, hasLine(t, "/etc/passwd", m.ID), "passwd has no line for %s", m.ID)
		assert.False(t, hasLine(t, "/etc/group", m.ID), "group has no line for %s", m.ID)
		assert.False(t, hasLine(t, "/etc/shadow", m.ID), "shadow has no line for %s", m.ID)
		require.Positive(t, m.UID)
		// A killed process's zombie is reaped by its parent moments later.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Empty(c, procsWith(t, m.UID, ""), "no process has uid %d", m.UID)
		}, 10*time.Second, 20*time.Millisecond)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Empty(c, procsWith(t, -1, m.ID), "no process carries %s", m.ID)
	}, 10*time.Second, 20*time.Millisecond)
	assert.NoDirExists(t, m.Home)
	assert.NoDirExists(t, m.Workspace)
	for _, dir := range m.cgroups() {
		assert.NoDirExists(t, dir)
	}
}

// cgroup2Mount returns a writable cgroup2 mount of this host, or "".
func cgroup2Mount() string {
	for _, p := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified"} {
		var st syscall.Statfs_t
		if syscall.Statfs(p, &st) == nil && int64(st.Type) == cgroup2Magic && syscall.Access(p, 2) == nil {
			return p
		}
	}
	return ""
}
