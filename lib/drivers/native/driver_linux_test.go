package native

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/drivertest"
	"github.com/hf-fleet/hf/lib/types"
)

func TestConformance(t *testing.T) {
	for _, tc := range []struct {
		name  string
		root  bool
		extra map[string]any
	}{
		// The host's cgroups, v1 or v2, as a node uses them by default.
		{"privileged", true, nil},
		// A writable cgroup2 mount, where the host has one besides (a hybrid
		// host's may lack the cpu and memory controllers; the cgroup is made
		// and the entry starts in it either way).
		{"privileged-cgroup2", true, map[string]any{"cgroup_path": cgroup2Mount()}},
		{"unprivileged", false, map[string]any{"unprivileged": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.extra != nil && tc.extra["cgroup_path"] == "" {
				t.Skip("this host has no writable cgroup2 mount")
			}
			if tc.root {
				needRoot(t)
			}
			h := newTestHost(t)
			drivertest.Conformance(t, drivertest.Harness{
				New: func(t *testing.T, dataDir string) drivers.Driver {
					return h.driver(t, dataDir, tc.extra)
				},
				Template:     h.tmpl,
				Meta:         h.meta,
				CheckRunning: h.checkRunning,
				CheckGone:    h.checkGone,
			})
			assert.Empty(t, markedUsers(t, markerFor(h.node, Type)), "no user is left")
		})
	}
}

// hostIsClean checks that the driver's paths and the host hold nothing of it.
func hostIsClean(t *testing.T, h *testHost, d *Driver) {
	t.Helper()
	list, err := d.List(t.Context())
	require.NoError(t, err)
	assert.Empty(t, list, "the driver lists nothing")
	assert.Empty(t, markedUsers(t, d.marker), "no user with the driver's marker")
	for _, dir := range []string{filepath.Join(h.base, "workspace"), filepath.Join(h.base, "home")} {
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		require.NoError(t, err)
		assert.Empty(t, entries, "%s is empty", dir)
	}
	if cg := d.cgroupSetup(); cg.Parent != "" {
		for _, p := range cg.parents() {
			entries, err := os.ReadDir(p)
			require.NoError(t, err)
			for _, e := range entries {
				assert.False(t, e.IsDir() && strings.HasPrefix(e.Name(), testPrefix), "cgroup %s is left in %s", e.Name(), p)
			}
		}
	}
	images, err := os.ReadDir(d.config().ImagesPath)
	require.NoError(t, err)
	for _, e := range images {
		assert.True(t, strings.HasPrefix(e.Name(), "sha256-"), "only verified images in the cache, found %s", e.Name())
	}
}

func TestAllocationFailuresLeaveNothing(t *testing.T) {
	needRoot(t)
	h := newTestHost(t)
	good := h.tmpl
	h.srv.mu.Lock()
	tools := h.srv.files[h.toolsPath]
	h.srv.mu.Unlock()
	evilURL, evilSum := h.srv.add("/images/evil.tar.gz", compress(t, "gzip", makeTar(t,
		tarEntry{Name: "ok.txt", Body: "fine"},
		tarEntry{Name: "../../escaped.txt", Body: "pwned"})))
	linkURL, linkSum := h.srv.add("/images/link.tar", makeTar(t, tarEntry{Name: "etc", Type: tar.TypeSymlink, Linkname: "/etc"}))
	truncURL, truncSum := h.srv.add("/truncated/tools.tar.gz", tools)
	with := func(mut func(tc *TemplateConfig)) types.MachineTemplate {
		tc, err := parseTemplateConfig(good.Spec.ProviderConfiguration[Type])
		require.NoError(t, err)
		mut(&tc)
		return machineTemplate("broken", tc)
	}
	for _, tc := range []struct {
		name string
		tmpl types.MachineTemplate
		want []string
		is   error
	}{
		{"wrong sha256", with(func(tc *TemplateConfig) { tc.Images[0].Sum = sumOf([]byte("other")) }),
			[]string{`image "tools"`, "sha256 mismatch: want " + sumOf([]byte("other"))[7:]}, nil},
		{"404", with(func(tc *TemplateConfig) { tc.Images[1].URL = h.srv.URL + "/images/missing.tar.xz" }),
			[]string{`image "data"`, "/images/missing.tar.xz: 404 Not Found"}, nil},
		{"truncated download", with(func(tc *TemplateConfig) { tc.Images[0].URL, tc.Images[0].Sum = truncURL, truncSum }),
			[]string{"truncated download", "of 100000 bytes"}, nil},
		{"image with ../", with(func(tc *TemplateConfig) {
			tc.Images = append(tc.Images, Image{URL: evilURL, Sum: evilSum, Tag: "evil"})
		}), []string{`image "evil"`, `entry "../../escaped.txt" escapes the image directory`}, ErrBadImage},
		{"image with an absolute symlink", with(func(tc *TemplateConfig) {
			tc.Images = append(tc.Images, Image{URL: linkURL, Sum: linkSum, Tag: "link"})
		}), []string{`symlink "etc" points to the absolute path "/etc"`}, ErrBadImage},
		{"unknown group", with(func(tc *TemplateConfig) { tc.Groups = []string{"hf-no-such-group"} }),
			[]string{`group "hf-no-such-group" does not exist on this host`}, nil},
		{"group not allowed", with(func(tc *TemplateConfig) { tc.Groups = []string{"users"} }),
			[]string{`groups[0]: group "users" is not allowed on this node`}, types.ErrInvalid},
		{"entry renders claim metadata", with(func(tc *TemplateConfig) { tc.Entry += " {{.Meta.claim}}" }),
			[]string{`claim metadata is not rendered into the entry`}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := h.driver(t, t.TempDir(), map[string]any{"allowed_groups": []string{"hf-no-such-group"}})
			r, err := d.Allocate(t.Context(), tc.tmpl, h.meta)
			require.Error(t, err)
			assert.Nil(t, r)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			hostIsClean(t, h, d)
			assert.NoFileExists(t, filepath.Join(h.base, "escaped.txt"))
			assert.NoFileExists(t, filepath.Join(h.base, "workspace", "escaped.txt"))
		})
	}
}

func TestConcurrentAllocations(t *testing.T) {
	needRoot(t)
	h := newTestHost(t)
	d := h.driver(t, t.TempDir(), nil)
	const n = 10
	res := make([]*types.Resource, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { res[i], errs[i] = d.Allocate(t.Context(), h.tmpl, h.meta) })
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, r := range res {
			if r != nil {
				_ = d.Deallocate(context.Background(), r)
			}
		}
	})
	users, uids, workspaces := map[string]bool{}, map[int]bool{}, map[string]bool{}
	for i := range n {
		require.NoError(t, errs[i], "allocation %d", i)
		m := machineOf(t, *res[i])
		users[m.User], uids[m.UID], workspaces[m.Workspace] = true, true, true
	}
	assert.Len(t, users, n, "each machine has its own user")
	assert.Len(t, uids, n, "each user its own uid")
	assert.Len(t, workspaces, n, "each machine its own workspace")
	assert.Equal(t, 1, h.srv.count(h.toolsPath), "the tar.gz image is downloaded once")
	assert.Equal(t, 1, h.srv.count(h.dataPath), "the tar.xz image is downloaded once")
	for _, r := range res {
		h.checkRunning(t, *r)
	}

	for i := range n {
		wg.Go(func() { errs[i] = d.Deallocate(t.Context(), res[i]) })
	}
	wg.Wait()
	for i := range n {
		require.NoError(t, errs[i])
		h.checkGone(t, *res[i])
	}
	hostIsClean(t, h, d)
}

// waitPhase waits until r has phase in d.
func waitPhase(t *testing.T, d *Driver, r *types.Resource, want types.MachinePhase) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := d.Status(t.Context(), r)
		require.NoError(c, err)
		assert.Equal(c, want, got)
	}, 15*time.Second, 20*time.Millisecond)
}

// TestExitReapedInBackgroundIsSaved: an exit status the background reaper
// collected before anyone asked reaches the state file at the next Status,
// so a restarted driver reports the failed entry Failed, not Terminated
// (CI saw that when the reaper got there first).
func TestExitReapedInBackgroundIsSaved(t *testing.T) {
	inModes(t, func(t *testing.T, h *testHost, extra map[string]any) {
		d := h.driver(t, t.TempDir(), extra)
		r, err := d.Allocate(t.Context(), machineTemplate("exit", TemplateConfig{Entry: "exit 3"}), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = d.Deallocate(context.Background(), r) })
		require.Eventually(t, func() bool {
			d.mu.Lock()
			defer d.mu.Unlock()
			h, ok := d.held[r.ID]
			return ok && h.m.ExitCode != nil
		}, 15*time.Second, 10*time.Millisecond, "the reaper collects the entry")
		phase, err := d.Status(t.Context(), r)
		require.NoError(t, err)
		assert.Equal(t, types.MachineFailed, phase)
		again := h.driver(t, d.env.DataDir, extra)
		phase, err = again.Status(t.Context(), r)
		require.NoError(t, err)
		assert.Equal(t, types.MachineFailed, phase, "the restarted driver read the exit from the state file")
		require.NoError(t, d.Deallocate(t.Context(), r))
		h.checkGone(t, *r)
	})
}

func TestEntryExitStatus(t *testing.T) {
	inModes(t, func(t *testing.T, h *testHost, extra map[string]any) {
		d := h.driver(t, t.TempDir(), extra)
		for _, tc := range []struct {
			entry string
			want  types.MachinePhase
			exit  string
		}{
			{"exit 0", types.MachineTerminated, "exit status 0"},
			{"exit 3", types.MachineFailed, "exit status 3"},
			{"kill -KILL $$", types.MachineFailed, "killed by signal killed"},
			// The entry ends, but a process it started lives on.
			{"sleep 600 & exit 0", types.MachineRunning, ""},
		} {
			t.Run(tc.entry, func(t *testing.T) {
				r, err := d.Allocate(t.Context(), machineTemplate("exit", TemplateConfig{Entry: tc.entry}), nil)
				require.NoError(t, err)
				t.Cleanup(func() { _ = d.Deallocate(context.Background(), r) })
				waitPhase(t, d, r, tc.want)
				if tc.exit != "" {
					list, err := d.List(t.Context())
					require.NoError(t, err)
					require.Len(t, list, 1)
					assert.Equal(t, tc.exit, machineOf(t, list[0]).Exit)
					// The exit status is in the state file: a restarted
					// driver reports the same phase.
					again := h.driver(t, d.env.DataDir, extra)
					phase, err := again.Status(t.Context(), r)
					require.NoError(t, err)
					assert.Equal(t, tc.want, phase)
				}
				require.NoError(t, d.Deallocate(t.Context(), r))
				_, err = d.Status(t.Context(), r)
				assert.ErrorIs(t, err, drivers.ErrNotFound)
				h.checkGone(t, *r)
			})
		}
	})
}

func TestEntryEnvironment(t *testing.T) {
	needRoot(t)
	h := newTestHost(t)
	d := h.driver(t, t.TempDir(), map[string]any{"allowed_groups": []string{"users"}})
	tc, err := parseTemplateConfig(h.tmpl.Spec.ProviderConfiguration[Type])
	require.NoError(t, err)
	tc.Groups = []string{"users"}
	tc.Env = map[string]string{"GREETING": "from the template"}
	tc.Entry = `{ pwd; id -Gn; env | sort; ls -ld {{.Disks.data}}; } > $HOME/env.txt; exec sleep 600`
	r, err := d.Allocate(t.Context(), machineTemplate("env", tc), map[string]string{"HF_CLAIM": "c7", "LD_PRELOAD": "/tmp/evil.so"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Deallocate(context.Background(), r) })
	m := machineOf(t, *r)
	out := filepath.Join(m.Home, "env.txt")
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(out)
		return err == nil && strings.Contains(string(b), m.ID+" "+m.ID)
	}, 10*time.Second, 20*time.Millisecond)
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	assert.Equal(t, m.Home, lines[0], "the entry runs in its home")
	assert.ElementsMatch(t, []string{m.ID, "users"}, strings.Fields(lines[1]), "its own group and the template's")
	for _, want := range []string{"HOME=" + m.Home, "USER=" + m.ID, "LOGNAME=" + m.ID, "HF_CLAIM=c7",
		"HF_NATIVE_ID=" + m.ID, "GREETING=from the template", "PATH=/usr/local/bin:/usr/bin:/bin", "SHELL=/bin/sh"} {
		assert.Contains(t, lines, want)
	}
	assert.NotContains(t, string(b), "LD_PRELOAD", "a claim cannot set loader variables")
	assert.Contains(t, string(b), m.ID+" "+m.ID+" ", "the disk belongs to the user")
	require.NoError(t, d.Deallocate(t.Context(), r))
	h.checkGone(t, *r)
	assert.False(t, hasLine(t, "/etc/group", m.ID))
	b, err = os.ReadFile("/etc/group")
	require.NoError(t, err)
	assert.NotContains(t, string(b), m.ID, "the user left the users group too")
}

func TestRestartReattaches(t *testing.T) {
	needRoot(t)
	h := newTestHost(t)
	dir := t.TempDir()
	first := h.driver(t, dir, nil)
	r, err := first.Allocate(t.Context(), h.tmpl, h.meta)
	require.NoError(t, err)
	waitPhase(t, first, r, types.MachineRunning)
	h.checkRunning(t, *r)
	require.NoError(t, first.Close(), "the daemon stops; the machine keeps running")
	select {
	case <-first.reaped:
	default:
		t.Fatal("Close returned before the reaper goroutine ended")
	}
	require.NoError(t, first.Close(), "Close twice is fine")

	second := h.driver(t, dir, nil)
	list, err := second.List(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, r.ID, list[0].ID)
	assert.Equal(t, r.Data, list[0].Data)
	waitPhase(t, second, &list[0], types.MachineRunning)
	require.NoError(t, second.Deallocate(t.Context(), &list[0]))
	// A real restart leaves the entry to init; here it is this process's
	// child, and the stopped first driver no longer reaps it.
	m := machineOf(t, *r)
	require.Eventually(t, func() bool { done, _, _ := reapChild(m.PID); return done }, 10*time.Second, 20*time.Millisecond)
	h.checkGone(t, *r)
	hostIsClean(t, h, second)
	hostIsClean(t, h, h.driver(t, dir, nil))
}

func TestCrashDuringAllocation(t *testing.T) {
	needRoot(t)
	h := newTestHost(t)
	dir := t.TempDir()
	crashed := h.driver(t, dir, nil)
	// What an allocation had done when the daemon was killed: the record, the
	// user, and a process of the user; no pid recorded yet.
	cfg := crashed.config()
	m, err := crashed.reserve(cfg, h.tmpl, nil)
	require.NoError(t, err)
	pw, err := crashed.createUser(t.Context(), cfg, m.ID, m.Home)
	require.NoError(t, err)
	sleeper := startAs(t, pw.UID, pw.GID, nil)
	require.NoError(t, crashed.Close())

	restarted := h.driver(t, dir, nil)
	list, err := restarted.List(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, m.ID, list[0].ID)
	phase, err := restarted.Status(t.Context(), &list[0])
	require.NoError(t, err)
	assert.Equal(t, types.MachineProvisioning, phase)
	// The node's reconcile does not know it and releases it.
	require.NoError(t, restarted.Deallocate(t.Context(), &list[0]))
	sleeper.waitExited(t)
	m.UID = pw.UID
	h.checkGone(t, restarted.resource(m, types.Resources{}))
	hostIsClean(t, h, restarted)
}

// sleeper is a process a test started to stand for a machine's process.
type sleeper struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it ended and was reaped
}

// startAs starts a long sleep as uid:gid with env; it is killed and reaped
// when the test ends, if it still runs.
func startAs(t *testing.T, uid, gid int, env []string) *sleeper {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "600")
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if uid != os.Getuid() {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	require.NoError(t, cmd.Start())
	s := &sleeper{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-s.done
	})
	return s
}

// waitExited waits until the sleeper ended.
func (s *sleeper) waitExited(t *testing.T) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(15 * time.Second):
		t.Fatalf("process %d still runs", s.cmd.Process.Pid)
	}
}

func TestOrphanUser(t *testing.T) {
	needRoot(t)
	h := newTestHost(t)
	d := h.driver(t, t.TempDir(), nil)
	cfg := d.config()
	// A "crashed" driver of this node made a user and started a process as it,
	// and its state file is lost.
	orphan := randomID(testPrefix)
	pw, err := d.createUser(t.Context(), cfg, orphan, filepath.Join(cfg.HomePath, orphan))
	require.NoError(t, err)
	sleeper := startAs(t, pw.UID, pw.GID, nil)
	// A user that merely has the prefix is somebody else's.
	foreign := randomID(testPrefix)
	require.NoError(t, exec.Command(cfg.UseraddPath, "--comment", "not hf", "--no-create-home", foreign).Run())
	t.Cleanup(func() { _ = exec.Command(cfg.UserdelPath, "--force", foreign).Run() })

	list, err := d.List(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 1, "the orphan is listed, the foreign user is not")
	r := list[0]
	assert.Equal(t, orphan, r.ID)
	assert.Equal(t, orphan, r.Info["user"])
	assert.True(t, machineOf(t, r).Orphan)
	phase, err := d.Status(t.Context(), &r)
	require.NoError(t, err)
	assert.Equal(t, types.MachineRunning, phase, "its process runs")

	require.NoError(t, d.Deallocate(t.Context(), &r))
	sleeper.waitExited(t)
	h.checkGone(t, r)
	_, err = d.Status(t.Context(), &r)
	assert.ErrorIs(t, err, drivers.ErrNotFound)

	require.NoError(t, d.Deallocate(t.Context(), &types.Resource{ID: foreign}))
	assert.True(t, hasLine(t, "/etc/passwd", foreign), "a user without the marker is never deleted")
	_, err = d.Status(t.Context(), &types.Resource{ID: foreign})
	assert.ErrorIs(t, err, drivers.ErrNotFound)
	for _, bad := range []string{"root", "../etc", ""} {
		require.NoError(t, d.Deallocate(t.Context(), &types.Resource{ID: bad}))
	}
	assert.True(t, hasLine(t, "/etc/passwd", "root"))

	// Another node's machines on the same host are not this driver's orphans.
	t.Cleanup(func() { removeTestUsers(t, h.node+"-other") })
	other := newDriver(drivers.Env{Instance: Type, DataDir: t.TempDir(), NodeName: h.node + "-other"})
	require.NoError(t, other.Prepare(t.Context(), h.config(nil)))
	t.Cleanup(func() { _ = other.Close() })
	r2, err := other.Allocate(t.Context(), machineTemplate("plain", TemplateConfig{Entry: "exec sleep 600"}), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = other.Deallocate(context.Background(), r2) })
	list, err = d.List(t.Context())
	require.NoError(t, err)
	assert.Empty(t, list)
	require.NoError(t, d.Deallocate(t.Context(), r2))
	phase, err = other.Status(t.Context(), r2)
	require.NoError(t, err)
	assert.Equal(t, types.MachineRunning, phase, "a driver never releases another's machine")
	require.NoError(t, other.Deallocate(t.Context(), r2))
	h.checkGone(t, *r2)
}

func TestOrphanWorkspaceUnprivileged(t *testing.T) {
	h := newTestHost(t)
	d := h.driver(t, t.TempDir(), map[string]any{"unprivileged": true})
	cfg := d.config()
	orphan := randomID(testPrefix)
	ws := filepath.Join(cfg.WorkspacePath, orphan)
	require.NoError(t, os.MkdirAll(filepath.Join(ws, "tools"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(ws, markerFile), []byte(d.marker+"\n"), 0o644))
	sleeper := startAs(t, os.Getuid(), os.Getgid(), []string{envMachineID + "=" + orphan})
	unmarked := filepath.Join(cfg.WorkspacePath, randomID(testPrefix))
	require.NoError(t, os.Mkdir(unmarked, 0o700))

	list, err := d.List(t.Context())
	require.NoError(t, err)
	require.Len(t, list, 1)
	r := list[0]
	assert.Equal(t, orphan, r.ID)
	phase, err := d.Status(t.Context(), &r)
	require.NoError(t, err)
	assert.Equal(t, types.MachineRunning, phase)
	require.NoError(t, d.Deallocate(t.Context(), &r))
	sleeper.waitExited(t)
	h.checkGone(t, r)
	assert.DirExists(t, unmarked, "a directory without the marker is left alone")
}

func TestStatusText(t *testing.T) {
	h := newTestHost(t)
	d := asDaemonUser(newDriver(drivers.Env{Instance: Type, DataDir: t.TempDir(), NodeName: h.node}))
	assert.Equal(t, "not prepared", d.StatusText())
	require.NoError(t, d.Prepare(t.Context(), h.config(map[string]any{"unprivileged": true, "cgroup_path": t.TempDir(), "workspace_path": t.TempDir()})))
	t.Cleanup(func() { _ = d.Close() })
	assert.Equal(t, "unprivileged mode: no per-machine users; resource limits not enforced: "+
		d.config().CgroupPath+" is not a cgroup2 file system and holds no cgroup v1 hierarchies of the cpu and memory controllers (set cgroup_path)", d.StatusText())

	if os.Geteuid() == 0 {
		p := h.driver(t, t.TempDir(), nil)
		assert.True(t, strings.HasPrefix(p.StatusText(), "ok: a user per machine; "), p.StatusText())
		assert.Contains(t, p.StatusText(), "limits")
	}
}

func TestUnsupportedOS(t *testing.T) {
	d := asDaemonUser(newDriver(drivers.Env{Instance: Type, DataDir: t.TempDir(), NodeName: "mac"}))
	d.goos = "darwin"
	err := d.Prepare(t.Context(), []byte(`{"dscl_path": "/usr/bin/dscl", "hdiutil_path": "/usr/bin/hdiutil", "unprivileged": true}`))
	require.ErrorIs(t, err, ErrUnsupportedOS)
	assert.Contains(t, err.Error(), "the native driver runs on linux only, this host is darwin")
	_, err = d.List(t.Context())
	assert.ErrorIs(t, err, drivers.ErrNotPrepared)
	err = d.Prepare(t.Context(), []byte(`{"dscl_path": "dscl"}`))
	assert.ErrorIs(t, err, types.ErrInvalid, "config errors are reported before the OS")
}

func TestNotPrepared(t *testing.T) {
	d := newDriver(drivers.Env{DataDir: t.TempDir()})
	_, err := d.Allocate(t.Context(), machineTemplate("x", TemplateConfig{Entry: "true"}), nil)
	assert.ErrorIs(t, err, drivers.ErrNotPrepared)
	_, err = d.Status(t.Context(), &types.Resource{ID: "hf-0123456789"})
	assert.ErrorIs(t, err, drivers.ErrNotPrepared)
	assert.ErrorIs(t, d.Deallocate(t.Context(), &types.Resource{ID: "hf-0123456789"}), drivers.ErrNotPrepared)
	_, err = d.List(t.Context())
	assert.ErrorIs(t, err, drivers.ErrNotPrepared)
	assert.NoError(t, d.Close())
	assert.Equal(t, "native", d.Name())
	assert.False(t, d.IsRemote())
}

func TestCorruptState(t *testing.T) {
	h := newTestHost(t)
	for _, tc := range []struct{ name, content, want string }{
		{"empty", ``, "corrupt file (repair or remove it): empty"},
		{"not json", `{"version": 1, "resources": [`, "corrupt file"},
		{"wrong version", `{"version": 9, "resources": []}`, "version 9, want 1"},
		{"bad id", `{"version": 1, "resources": [{"id": "../x", "data": {"id": "../x"}}]}`, "has no valid id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, StateFile), []byte(tc.content), 0o600))
			d := asDaemonUser(newDriver(drivers.Env{Instance: Type, DataDir: dir, NodeName: h.node}))
			err := d.Prepare(t.Context(), h.config(map[string]any{"unprivileged": true}))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestActivity: the machine's CPU time grows while its entry is busy and
// stands still while it sleeps; a released machine is ErrNotFound.
func TestActivity(t *testing.T) {
	inModes(t, func(t *testing.T, h *testHost, extra map[string]any) {
		d := h.driver(t, t.TempDir(), extra)
		idle := allocateEntry(t, d, "idle", "exec sleep 600")
		busy := allocateEntry(t, d, "busy", "while :; do :; done")
		drivertest.CheckActivity(t, d, d, idle, busy)
		h.checkGone(t, *busy)
	})
}

// TestPauseResume: a paused machine's processes are stopped (its CPU time
// stands still) and run again after Resume; a paused machine is still
// released at once (no SIGKILL grace) and completely.
func TestPauseResume(t *testing.T) {
	inModes(t, func(t *testing.T, h *testHost, extra map[string]any) {
		d := h.driver(t, t.TempDir(), extra)
		r := allocateEntry(t, d, "busy", "sh -c 'while :; do :; done' & while :; do :; done")
		drivertest.CheckPauseResume(t, d, r, nil)
		h.checkGone(t, *r)
	})
}

// allocateEntry allocates a machine running entry, released when the test ends.
func allocateEntry(t *testing.T, d *Driver, name, entry string) *types.Resource {
	t.Helper()
	r, err := d.Allocate(t.Context(), machineTemplate(name, TemplateConfig{Entry: entry}), nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Deallocate(context.Background(), r) })
	return r
}

// inModes runs fn as a subtest in each mode of the driver: privileged (as
// root; skipped elsewhere, failing under CI) and unprivileged, with the extra
// driver config of the mode.
func inModes(t *testing.T, fn func(t *testing.T, h *testHost, extra map[string]any)) {
	for _, mode := range []struct {
		name  string
		root  bool
		extra map[string]any
	}{
		{"privileged", true, nil},
		{"unprivileged", false, map[string]any{"unprivileged": true}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			if mode.root {
				needRoot(t)
			}
			fn(t, newTestHost(t), mode.extra)
		})
	}
}

// Explain quotes the exit status and the last lines of the entry's output,
// printable and bounded, and reads no file the machine's user points the
// log at.
func TestExplainFailedEntry(t *testing.T) {
	inModes(t, func(t *testing.T, h *testHost, extra map[string]any) {
		d := h.driver(t, t.TempDir(), extra)
		entry := `for i in 1 2 3 4 5 6 7; do echo "line $i"; done; printf 'bad\033[31mcolour\n' >&2; exit 3`
		r, err := d.Allocate(t.Context(), machineTemplate("explain", TemplateConfig{Entry: entry}), nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = d.Deallocate(context.Background(), r) })
		waitPhase(t, d, r, types.MachineFailed)
		assert.Equal(t, "entry exit status 3; last output: line 4 | line 5 | line 6 | line 7 | bad[31mcolour", d.Explain(t.Context(), r))

		// The user swaps the log for a link to a file it may not read.
		log := filepath.Join(machineOf(t, *r).Workspace, logFile)
		require.NoError(t, os.Remove(log))
		require.NoError(t, os.Symlink("/etc/shadow", log))
		assert.Equal(t, "entry exit status 3", d.Explain(t.Context(), r), "a symlink is not followed")
		require.NoError(t, os.Remove(log))
		secret := filepath.Join(t.TempDir(), "secret")
		require.NoError(t, os.WriteFile(secret, []byte("root only\n"), 0o600))
		if os.Link(secret, log) == nil {
			assert.Equal(t, "entry exit status 3", d.Explain(t.Context(), r), "a hard link is not read")
		}
		require.NoError(t, d.Deallocate(t.Context(), r))
		assert.Empty(t, d.Explain(t.Context(), r), "nothing to say of a machine that is gone")
	})
}

// TestMachineProcessLimit: in privileged mode a machine's user cannot have
// more than pids_limit processes, on any host (cgroup v1 too): a fork bomb
// stops inside its machine, and the machine is released as usual.
func TestMachineProcessLimit(t *testing.T) {
	needRoot(t)
	if !inOwnProcess(t) {
		return
	}
	h := newTestHost(t)
	d := h.driver(t, t.TempDir(), map[string]any{"pids_limit": 30})
	var now unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NPROC, &now))
	assert.Equal(t, uint64(30), now.Cur)
	assert.Equal(t, uint64(30), now.Max, "a machine cannot raise it")

	entry := `n=0; while [ $n -lt 100 ]; do sleep 600 & n=$((n+1)); echo $n > $HOME/forked; done; echo forked all; exec sleep 600`
	r := allocateEntry(t, d, "bomb", entry)
	m := machineOf(t, *r)
	var log string
	require.Eventually(t, func() bool {
		b, _ := os.ReadFile(filepath.Join(m.Workspace, logFile))
		log = string(b)
		l := strings.ToLower(log)
		return strings.Contains(l, "forked all") || strings.Contains(l, "cannot fork") || strings.Contains(l, "can't fork")
	}, 20*time.Second, 50*time.Millisecond, "the entry neither ended its loop nor failed to fork")
	assert.NotContains(t, log, "forked all")
	b, err := os.ReadFile(filepath.Join(m.Home, "forked"))
	require.NoError(t, err)
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	assert.Less(t, n, 30, "no more processes than the limit")
	assert.Greater(t, n, 20, "the machine could start processes up to it")
	t.Logf("the entry started %d processes; its log: %s", n, strings.TrimSpace(log))

	require.NoError(t, d.Deallocate(t.Context(), r))
	h.checkGone(t, *r)
}

// TestWorkspacesArePrivate: as root, a machine's user can read its own
// workspace (its entry's log) and no other machine's user can look in.
func TestWorkspacesArePrivate(t *testing.T) {
	needRoot(t)
	h := newTestHost(t)
	d := h.driver(t, t.TempDir(), nil)
	a := allocateEntry(t, d, "a", "echo secret-of-a; exec sleep 600")
	ma := machineOf(t, *a)
	info, err := os.Stat(ma.Workspace)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o750), info.Mode().Perm())
	assert.Equal(t, uint32(ma.GID), info.Sys().(*syscall.Stat_t).Gid, "the machine's group")

	peek := `{ cat {{.Workspace}}/../` + filepath.Base(ma.Workspace) + `/` + logFile + `; ls ` + ma.Workspace + `; cat {{.Workspace}}/` + logFile + ` && echo own log readable; } > $HOME/peek 2>&1; exec sleep 600`
	b := allocateEntry(t, d, "b", peek)
	mb := machineOf(t, *b)
	var got string
	require.Eventually(t, func() bool {
		out, err := os.ReadFile(filepath.Join(mb.Home, "peek"))
		got = string(out)
		return err == nil && strings.Contains(got, "own log readable")
	}, 10*time.Second, 20*time.Millisecond, "b's entry did not finish looking")
	assert.NotContains(t, got, "secret-of-a", "b read a's entry log")
	assert.Equal(t, 2, strings.Count(got, "Permission denied"), got)
	require.NoError(t, d.Deallocate(t.Context(), a))
	require.NoError(t, d.Deallocate(t.Context(), b))
	h.checkGone(t, *a)
	h.checkGone(t, *b)
}

// inOwnProcess runs the test again in a process of its own and reports
// false here, and true in that process, which goes on with the test. The
// process limit is the daemon's own, inherited by what it starts, and is not
// raised again (root here lacks CAP_SYS_RESOURCE): a test that lowers it
// runs apart, so the others keep theirs.
func inOwnProcess(t *testing.T) bool {
	t.Helper()
	if os.Getenv("HF_TEST_OWN_PROCESS") == t.Name() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), "HF_TEST_OWN_PROCESS="+t.Name())
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "--- PASS: "+t.Name(), "%s", out)
	return false
}

// The process limit goes down only, soft and hard together: a soft limit
// below a higher hard one (which a machine could raise to) takes the hard
// one down with it.
func TestLimitUserProcesses(t *testing.T) {
	if !inOwnProcess(t) {
		return
	}
	var start unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NPROC, &start))
	require.Greater(t, start.Max, uint64(60), "the test needs room below the hard limit")
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_NPROC, &unix.Rlimit{Cur: 50, Max: start.Max}))
	limits := func() unix.Rlimit {
		var r unix.Rlimit
		require.NoError(t, unix.Getrlimit(unix.RLIMIT_NPROC, &r))
		return r
	}
	for _, tc := range []struct {
		n, want int64
	}{{100, 50}, {40, 40}, {60, 40}} {
		got, err := limitUserProcesses(tc.n)
		require.NoError(t, err)
		assert.Equal(t, tc.want, got, "pids_limit %d", tc.n)
		assert.Equal(t, unix.Rlimit{Cur: uint64(tc.want), Max: uint64(tc.want)}, limits(), "pids_limit %d", tc.n)
	}
}

// TestMachineLimits: as root, a machine is held to its template's CPU and
// RAM by the host's cgroups, v1 or v2, whichever it has: its entry, and a
// shell opened in it, run in the machine's cgroups; a program that takes more
// memory than the machine has is killed, and a busy loop gets no more than
// the machine's CPUs.
func TestMachineLimits(t *testing.T) {
	needRoot(t)
	h := newTestHost(t)
	d := h.driver(t, t.TempDir(), nil)
	cg := d.cgroupSetup()
	if !cg.Limits {
		if os.Getenv("CI") == "true" {
			t.Fatalf("this host's cgroups cannot hold machines to their limits (%s); CI=true, so the test must not be skipped", cg.Reason)
		}
		t.Skip("limits are not enforced on this host: " + cg.Reason)
	}
	t.Logf("limits: %s", cg.describe())

	tmpl := machineTemplate("limited", TemplateConfig{Entry: `dd if=/dev/zero of=/dev/null bs=200M count=1; echo "dd=$?" > $HOME/dd; while :; do :; done`})
	tmpl.Spec.Resources = types.Resources{CPU: 0.2, RAMGB: 0.0625}
	r, err := d.Allocate(t.Context(), tmpl, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Deallocate(context.Background(), r) })
	m := machineOf(t, *r)
	require.Len(t, m.cgroups(), max(len(cg.V1), 1))
	if len(cg.V1) > 0 {
		assert.Empty(t, m.Cgroup, "a cgroup v1 machine has no cgroup v2 dir")
	}
	for _, dir := range m.cgroups() {
		assert.Contains(t, cgroupProcs(dir), m.PID, "the entry runs in %s", dir)
	}

	var dd []byte
	require.Eventually(t, func() bool {
		dd, err = os.ReadFile(filepath.Join(m.Home, "dd"))
		return err == nil && len(dd) > 0
	}, 20*time.Second, 20*time.Millisecond, "the entry's dd never ended")
	assert.Equal(t, "dd=137\n", string(dd), "dd's 200 MB buffer in a machine of 64 MB: the kernel kills it (SIGKILL, 128+9)")

	// The busy loop: over a second, no more than the machine's 0.2 CPUs
	// (and a period's quota of slack).
	before, err := d.Activity(t.Context(), r)
	require.NoError(t, err)
	start := time.Now()
	time.Sleep(time.Second)
	after, err := d.Activity(t.Context(), r)
	require.NoError(t, err)
	share := float64(after-before) / float64(time.Since(start))
	t.Logf("the busy loop took %.2f of a CPU", share)
	assert.Positive(t, share, "the loop runs")
	assert.Less(t, share, 0.35, "no more than the machine's 0.2 CPUs")

	for _, tty := range []bool{false, true} {
		out := strings.ReplaceAll(runShell(t, d, r, tty, "cat /proc/self/cgroup; exit", 0), "\r\n", "\n")
		assert.Equal(t, len(m.cgroups()), strings.Count(out, ":/"+cgroupParentName+"/"+m.ID+"\n"),
			"tty %v: the shell runs in each of the machine's cgroups %v: %s", tty, m.cgroups(), out)
	}

	for _, dir := range m.cgroups() {
		b, err := os.ReadFile(filepath.Join(dir, "tasks"))
		require.NoError(t, err)
		for _, tid := range strings.Fields(string(b)) {
			assert.NoDirExists(t, "/proc/self/task/"+tid, "no thread of the driver's process stays in %s", dir)
		}
	}
	require.NoError(t, d.Deallocate(t.Context(), r))
	h.checkGone(t, *r)
}

// A shell's last output reaches the client, with a terminal too: the shell
// may end before the terminal's buffer is read (a client that takes its time
// to read makes sure it does).
func TestShellOutputTail(t *testing.T) {
	inModes(t, func(t *testing.T, h *testHost, extra map[string]any) {
		d := h.driver(t, t.TempDir(), extra)
		r := allocateEntry(t, d, "tail", "exec sleep 600")
		for _, tty := range []bool{false, true} {
			for range 3 {
				out := runShell(t, d, r, tty, "i=0; while [ $i -lt 300 ]; do echo line $i; i=$((i+1)); done; echo the-end; exit", 20*time.Millisecond)
				assert.Contains(t, out, "the-end", "tty %v", tty)
			}
		}
	})
}

// A shell's exit status reaches its caller, with a terminal and without:
// the status it exits with, the status of its last command at the end of
// its input, and a signal that killed it (named, and 128 plus its number).
func TestShellExit(t *testing.T) {
	inModes(t, func(t *testing.T, h *testHost, extra map[string]any) {
		d := h.driver(t, t.TempDir(), extra)
		r := allocateEntry(t, d, "exit", "exec sleep 600")
		for _, tty := range []bool{false, true} {
			for _, tc := range []struct {
				script string
				want   drivers.ShellExit
			}{
				{"exit 3", drivers.ShellExit{Code: 3}},
				{"true; exit", drivers.ShellExit{}},
				{"false; exit", drivers.ShellExit{Code: 1}},
				{"kill -KILL $$", drivers.ShellExit{Code: 137, Signal: "SIGKILL"}},
			} {
				_, exit := runShellExit(t, d, r, tty, tc.script, 0, false)
				assert.Equal(t, tc.want, exit, "tty %v: %s", tty, tc.script)
			}
			if !tty {
				// An interactive shell (one with a terminal) ignores
				// SIGTERM; SIGHUP and SIGINT may be ignored by whatever
				// started the test (nohup, a shell's &).
				_, exit := runShellExit(t, d, r, tty, "kill -TERM $$", 0, false)
				assert.Equal(t, drivers.ShellExit{Code: 143, Signal: "SIGTERM"}, exit)
				// The end of the input ends the shell, which exits with
				// its last command's status.
				out, exit := runShellExit(t, d, r, tty, "echo ran; false", 0, true)
				assert.Equal(t, "ran\n", out)
				assert.Equal(t, drivers.ShellExit{Code: 1}, exit)
			}
		}
	})
}

// runShell types script into a shell of r, with a terminal or without, and
// returns what the client got; the client takes delay over each write. The
// input stays open until the shell is done: at its end a terminal is hung
// up. The shell must exit 0.
func runShell(t *testing.T, d *Driver, r *types.Resource, tty bool, script string, delay time.Duration) string {
	t.Helper()
	out, exit := runShellExit(t, d, r, tty, script, delay, false)
	assert.Equal(t, drivers.ShellExit{}, exit, "tty %v: %s", tty, script)
	return out
}

// runShellExit is runShell, returning the shell's exit too; with
// endInput the input ends after script.
func runShellExit(t *testing.T, d *Driver, r *types.Resource, tty bool, script string, delay time.Duration, endInput bool) (string, drivers.ShellExit) {
	t.Helper()
	in, typed := io.Pipe()
	go func() {
		_, _ = typed.Write([]byte(script + "\n"))
		if endInput {
			_ = typed.Close()
		}
	}()
	s := &slowClient{ShellStream: drivertest.ShellStream{In: in}, delay: delay}
	exit, err := d.Shell(t.Context(), r, drivers.ShellOptions{TTY: tty, Rows: 24, Cols: 80}, s)
	require.NoError(t, err)
	_ = typed.Close()
	return s.Out.String(), exit
}

// slowClient is a shell's client that takes delay over each write it gets.
type slowClient struct {
	drivertest.ShellStream
	delay time.Duration
}

func (s *slowClient) Write(b []byte) (int, error) {
	time.Sleep(s.delay)
	return s.ShellStream.Write(b)
}

// An entry the kernel kills for going over the machine's RAM says so: the
// machine's failure read "entry killed by signal killed" and left its user
// guessing who killed it; an entry killed otherwise says nothing of memory.
func TestEntryKilledOverMemorySaysSo(t *testing.T) {
	needRoot(t)
	h := newTestHost(t)
	d := h.driver(t, t.TempDir(), nil)
	if cg := d.cgroupSetup(); !cg.Limits {
		if os.Getenv("CI") == "true" {
			t.Fatalf("this host's cgroups cannot hold machines to their limits (%s); CI=true, so the test must not be skipped", cg.Reason)
		}
		t.Skip("limits are not enforced on this host: " + cg.Reason)
	}
	for _, tc := range []struct {
		name, entry, want string
		oom               bool
	}{
		{"over its RAM", "exec dd if=/dev/zero of=/dev/null bs=200M count=1", "entry killed by signal killed (out of memory: the kernel killed 1 of the machine's processes for going over its RAM)", true},
		{"killed otherwise", "kill -KILL $$", "entry killed by signal killed", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmpl := machineTemplate("oom", TemplateConfig{Entry: tc.entry})
			tmpl.Spec.Resources = types.Resources{CPU: 0.2, RAMGB: 0.0625}
			r, err := d.Allocate(t.Context(), tmpl, nil)
			if err != nil {
				// Killed within the start grace: the allocation says why.
				assert.Contains(t, err.Error(), tc.want)
				assert.Equal(t, tc.oom, strings.Contains(err.Error(), "out of memory"), "%v", err)
				return
			}
			t.Cleanup(func() { _ = d.Deallocate(context.Background(), r) })
			waitPhase(t, d, r, types.MachineFailed)
			got := d.Explain(t.Context(), r)
			assert.True(t, strings.HasPrefix(got, tc.want), "%q", got)
			assert.Equal(t, tc.oom, strings.Contains(got, "out of memory"), "%q", got)
		})
	}
}
