package native

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

func TestSysvOwnedBy(t *testing.T) {
	table := `       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap
         0          7  1600                  4096   311     0      0  1001  1001  1001  1001          0          0 1733493285                     0                     0
         0          8  1600                  4096   312     0      0  1002  1002     0     0          0          0 1733493285                     0                     0
         0          9  1600                  4096   313     0      0     0     0  1001  1001          0          0 1733493285                     0                     0
         0         10  1600                  4096   314     0      0 10010 10010 10010 10010          0          0 1733493285                     0                     0
`
	ids, err := sysvOwnedBy([]byte(table), "shmid", 1001)
	require.NoError(t, err)
	assert.Equal(t, []int{7, 9}, ids, "owner or creator")
	ids, err = sysvOwnedBy([]byte(table), "shmid", 1002)
	require.NoError(t, err)
	assert.Equal(t, []int{8}, ids)
	ids, err = sysvOwnedBy([]byte("       key      msqid perms      cbytes       qnum lspid lrpid   uid   gid  cuid  cgid      stime      rtime      ctime\n"), "msqid", 1001)
	require.NoError(t, err)
	assert.Empty(t, ids)
	_, err = sysvOwnedBy([]byte("key semid perms\n"), "semid", 1001)
	assert.ErrorContains(t, err, "no semid, uid and cuid columns")
}

// sysvOf returns the ids of the System V objects of kind (shm, msg, sem)
// whose owner or creator is uid.
func sysvOf(t *testing.T, kind string, uid int) []int {
	t.Helper()
	k := map[string]string{"shm": "shmid", "msg": "msqid", "sem": "semid"}[kind]
	b, err := os.ReadFile("/proc/sysvipc/" + kind)
	require.NoError(t, err)
	ids, err := sysvOwnedBy(b, k, uid)
	require.NoError(t, err)
	return ids
}

// removeSysvIDs removes System V objects a test made, should it fail
// before the driver does.
func removeSysvIDs(kind string, ids []int) {
	for _, k := range sysvKinds {
		if k.file == kind {
			for _, id := range ids {
				_ = k.remove(id)
			}
		}
	}
}

// mqueueMount returns where the host's POSIX message queues can be seen:
// /dev/mqueue, or a mount of them the test makes.
func mqueueMount(t *testing.T) string {
	t.Helper()
	var st unix.Statfs_t
	if unix.Statfs("/dev/mqueue", &st) == nil && int64(st.Type) == mqueueMagic {
		return "/dev/mqueue"
	}
	dir := t.TempDir()
	require.NoError(t, unix.Mount("mqueue", dir, "mqueue", 0, ""))
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	return dir
}

// ownedBy asserts that path exists (not followed) and belongs to uid.
func ownedBy(t *testing.T, path string, uid int) {
	t.Helper()
	fi, err := os.Lstat(path)
	if assert.NoError(t, err, "%s exists", path) {
		assert.Equal(t, uint32(uid), fi.Sys().(*syscall.Stat_t).Uid, "%s belongs to uid %d", path, uid)
	}
}

// gone asserts that nothing is at path (a link itself included).
func gone(t *testing.T, path string) {
	t.Helper()
	_, err := os.Lstat(path)
	assert.True(t, errors.Is(err, os.ErrNotExist), "%s is left: %v", path, err)
}

func randomName(t *testing.T, what string) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return testPrefix + what + "-" + hex.EncodeToString(b[:])
}

// waitFile waits until the machine's entry made path.
func waitFile(t *testing.T, path string) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, err := os.Stat(path)
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "%s was not made", path)
}

// TestReleaseSweepsSharedPlaces: what a machine's user leaves where every
// user may write (/tmp, /var/tmp, /dev/shm, /run/lock, a world-writable
// directory of another owner there, POSIX and System V IPC) goes with the
// machine, since the next user useradd makes may get the same uid and read
// it; links are removed, not followed, and nothing of anyone else is
// touched.
func TestReleaseSweepsSharedPlaces(t *testing.T) {
	needRoot(t)
	h := newTestHost(t)
	d := h.driver(t, t.TempDir(), nil)

	// Root's: a world-writable sticky directory (as /tmp/.X11-unix), a file
	// beside it, and the target of the user's links.
	pub := filepath.Join("/tmp", randomName(t, "pub"))
	require.NoError(t, os.Mkdir(pub, 0o755))
	require.NoError(t, os.Chmod(pub, os.ModeSticky|0o777))
	t.Cleanup(func() { _ = os.RemoveAll(pub) })
	keep := filepath.Join("/tmp", randomName(t, "keep"))
	require.NoError(t, os.WriteFile(keep, []byte("root's\n"), 0o644))
	t.Cleanup(func() { _ = os.Remove(keep) })
	target := filepath.Join(h.base, "target")
	require.NoError(t, os.WriteFile(target, []byte("not the user's\n"), 0o644))

	entry := `set -e; id=$HF_NATIVE_ID
echo secret > /tmp/$id.txt; chmod 600 /tmp/$id.txt
echo secret > /var/tmp/$id.txt
head -c 1048576 /dev/zero > /dev/shm/$id.shm
echo lock > /run/lock/$id.lock
mkdir -p /tmp/$id.d/sub; echo x > /tmp/$id.d/sub/f
ln -s ` + target + ` /tmp/$id.link
ln -s /var/tmp /tmp/$id.dirlink
echo x > ` + pub + `/$id.txt
ipcmk -M 4096 >/dev/null; ipcmk -Q >/dev/null; ipcmk -S 1 >/dev/null
touch $HOME/ready; exec sleep 600`
	a := allocateEntry(t, d, "leaves", entry)
	b := allocateEntry(t, d, "bystander", `echo b > /tmp/$HF_NATIVE_ID.txt; ipcmk -M 4096 >/dev/null; touch $HOME/ready; exec sleep 600`)
	ma, mb := machineOf(t, *a), machineOf(t, *b)
	require.NotEqual(t, ma.UID, mb.UID)
	waitFile(t, filepath.Join(ma.Home, "ready"))
	waitFile(t, filepath.Join(mb.Home, "ready"))

	mq := mqueueMount(t)
	for _, m := range []machine{ma, mb} {
		q := filepath.Join(mq, m.ID)
		f, err := os.OpenFile(q, os.O_CREATE|os.O_WRONLY, 0o600) // mq_open(O_CREAT), as the user would
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.NoError(t, os.Chown(q, m.UID, m.GID))
		t.Cleanup(func() { _ = os.Remove(q) })
	}

	left := []string{
		"/tmp/" + ma.ID + ".txt", "/var/tmp/" + ma.ID + ".txt", "/dev/shm/" + ma.ID + ".shm", "/run/lock/" + ma.ID + ".lock",
		"/tmp/" + ma.ID + ".d", "/tmp/" + ma.ID + ".link", "/tmp/" + ma.ID + ".dirlink", pub + "/" + ma.ID + ".txt",
		filepath.Join(mq, ma.ID),
	}
	t.Cleanup(func() {
		for _, p := range append(left, "/tmp/"+mb.ID+".txt") {
			_ = os.RemoveAll(p)
		}
	})
	for _, p := range left {
		ownedBy(t, p, ma.UID)
	}
	for _, kind := range []string{"shm", "msg", "sem"} {
		ids := sysvOf(t, kind, ma.UID)
		t.Cleanup(func() { removeSysvIDs(kind, ids) })
		require.Len(t, ids, 1, "the entry made a %s object", kind)
	}
	ids := sysvOf(t, "shm", mb.UID)
	t.Cleanup(func() { removeSysvIDs("shm", ids) })
	require.Len(t, ids, 1)

	require.NoError(t, d.Deallocate(t.Context(), a))
	h.checkGone(t, *a)
	for _, p := range left {
		gone(t, p)
	}
	for _, kind := range []string{"shm", "msg", "sem"} {
		assert.Empty(t, sysvOf(t, kind, ma.UID), "no %s object of uid %d is left", kind, ma.UID)
	}
	got, err := os.ReadFile(target)
	require.NoError(t, err)
	assert.Equal(t, "not the user's\n", string(got), "the link's target is untouched")
	assert.FileExists(t, keep)
	assert.DirExists(t, pub)
	assert.DirExists(t, "/var/tmp")
	ownedBy(t, "/tmp/"+mb.ID+".txt", mb.UID)
	ownedBy(t, filepath.Join(mq, mb.ID), mb.UID)
	assert.Len(t, sysvOf(t, "shm", mb.UID), 1, "another machine's segment stays")

	require.NoError(t, d.Deallocate(t.Context(), b))
	h.checkGone(t, *b)
	gone(t, "/tmp/"+mb.ID+".txt")
	gone(t, filepath.Join(mq, mb.ID))
	assert.Empty(t, sysvOf(t, "shm", mb.UID))
}

// probeUID returns the uid useradd hands the next user it makes: it makes
// one and deletes it.
func probeUID(t *testing.T) int {
	t.Helper()
	name := randomName(t, "p")
	out, err := exec.Command("useradd", "--no-create-home", "--user-group", "--no-log-init", "--comment", "hf test probe", name).CombinedOutput()
	require.NoError(t, err, "useradd: %s", out)
	b, err := os.ReadFile("/etc/passwd")
	require.NoError(t, err)
	uid := -1
	for _, e := range parsePasswd(b) {
		if e.Name == name {
			uid = e.UID
		}
	}
	out, err = exec.Command("userdel", name).CombinedOutput()
	require.NoError(t, err, "userdel: %s", out)
	require.Positive(t, uid)
	return uid
}

// TestNewUserSweptBeforeUse: a new machine user whose uid was someone's
// before (deleted without a sweep: by hand, or by an older driver) does not
// get what they left: it is removed before anything runs as the new user.
func TestNewUserSweptBeforeUse(t *testing.T) {
	needRoot(t)
	h := newTestHost(t)
	d := h.driver(t, t.TempDir(), nil)
	// useradd gives the uid it just freed again unless another user is made
	// meanwhile (other tests on the host): try a few times.
	for attempt := range 5 {
		uid := probeUID(t)
		stale := filepath.Join("/tmp", randomName(t, "stale"))
		shm := filepath.Join("/dev/shm", randomName(t, "stale"))
		for _, p := range []string{stale, shm} {
			require.NoError(t, os.WriteFile(p, []byte("stale secret\n"), 0o600))
			require.NoError(t, os.Chown(p, uid, uid))
			t.Cleanup(func() { _ = os.Remove(p) })
		}
		seg, err := unix.SysvShmGet(unix.IPC_PRIVATE, 4096, unix.IPC_CREAT|0o600)
		require.NoError(t, err)
		t.Cleanup(func() { _, _ = unix.SysvShmCtl(seg, unix.IPC_RMID, nil) })
		var desc unix.SysvShmDesc
		_, err = unix.SysvShmCtl(seg, unix.IPC_STAT, &desc)
		require.NoError(t, err)
		desc.Perm.Uid = uint32(uid)
		_, err = unix.SysvShmCtl(seg, unix.IPC_SET, &desc)
		require.NoError(t, err)
		require.Contains(t, sysvOf(t, "shm", uid), seg)
		// A process the earlier owner left running.
		left := exec.Command("sleep", "600")
		left.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
		require.NoError(t, left.Start())
		leftDone := make(chan error, 1)
		go func() { leftDone <- left.Wait() }()
		t.Cleanup(func() { _ = left.Process.Kill(); <-leftDone })

		r := allocateEntry(t, d, "reuses", `cat `+stale+` `+shm+` > $HOME/seen 2>&1 || true; touch $HOME/ready; exec sleep 600`)
		m := machineOf(t, *r)
		if m.UID != uid {
			t.Logf("attempt %d: useradd gave uid %d, not %d (another user was made meanwhile)", attempt, m.UID, uid)
			require.NoError(t, d.Deallocate(context.Background(), r))
			continue
		}
		gone(t, stale)
		gone(t, shm)
		assert.NotContains(t, sysvOf(t, "shm", uid), seg, "the segment is removed")
		select {
		case err := <-leftDone:
			leftDone <- err // for the cleanup
			assert.ErrorContains(t, err, "signal: killed", "the earlier owner's process")
		case <-time.After(10 * time.Second):
			assert.Fail(t, "the earlier owner's process still runs as the new machine's user")
		}
		waitFile(t, filepath.Join(m.Home, "ready"))
		seen, err := os.ReadFile(filepath.Join(m.Home, "seen"))
		require.NoError(t, err)
		assert.NotContains(t, string(seen), "stale secret")
		assert.Equal(t, 2, strings.Count(string(seen), "No such file"), "%s", seen)
		require.NoError(t, d.Deallocate(t.Context(), r))
		h.checkGone(t, *r)
		return
	}
	t.Fatal("useradd never gave the freed uid again: users were made meanwhile")
}
