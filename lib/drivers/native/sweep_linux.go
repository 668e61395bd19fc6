package native

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// mqueueMagic is MQUEUE_MAGIC, the f_type of an mqueue file system.
const mqueueMagic = 0x19800202

// sweepUID removes what the user uid left where every user of the host may
// keep things that outlive its processes: its entries in the world-writable
// directories (d.sharedDirs), its POSIX message queues and its System V
// shared memory segments, message queues and semaphores. useradd hands a
// freed uid to the next user it makes, so whatever a machine left there
// would be the next machine's to read (a file of mode 0600 included), and
// files in /dev/shm keep the host's RAM. The caller makes sure that uid is a
// machine user of this driver's that runs nothing: at release, after its
// processes were killed and before the user is deleted; at allocation, for
// the fresh user before anything runs as it, in case an earlier owner of the
// uid (a user deleted by hand, or by a driver older than the sweep) left
// something behind.
//
// It looks at the top level of each directory and one level down in the
// world-writable directories of other owners there (/tmp/.X11-unix, another
// machine's /tmp/pub of mode 0777); it does not walk trees of others.
func (d *Driver) sweepUID(uid int) error {
	if uid <= 0 {
		return fmt.Errorf("sweep: refusing uid %d", uid)
	}
	var errs []error
	for _, dir := range d.sharedDirs {
		errs = append(errs, sweepDir(dir, uid))
	}
	errs = append(errs, d.sweepMqueue(uid))
	for _, k := range sysvKinds {
		errs = append(errs, removeSysv(filepath.Join(d.procRoot, "sysvipc", k.file), k, uid))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("remove what uid %d left: %w", uid, err)
	}
	return nil
}

// sweepDir removes the entries of dir that uid owns and the entries it owns
// in dir's world-writable sub-directories of other owners. Everything is
// done relative to dir (os.Root, openat and unlinkat underneath): no symlink
// is followed out of it, a symlink uid owns is removed, not its target, and
// a sub-directory swapped for a link meanwhile leads nowhere outside dir. A
// dir that does not exist has nothing to sweep.
func sweepDir(dir string, uid int) error {
	root, err := os.OpenRoot(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer root.Close()
	return sweepRoot(root, dir, uid, 1)
}

// sweepRoot is sweepDir in root (shown as where), going depth levels into
// world-writable directories.
func sweepRoot(root *os.Root, where string, uid, depth int) error {
	f, err := root.Open(".")
	if err != nil {
		return err
	}
	names, err := f.Readdirnames(-1)
	f.Close()
	if err != nil {
		return fmt.Errorf("read %s: %w", where, err)
	}
	var errs []error
	for _, name := range names {
		fi, err := root.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		switch {
		case !ok:
			continue
		case int(st.Uid) == uid:
			if err := root.RemoveAll(name); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", filepath.Join(where, name), err))
			}
		case depth > 0 && fi.IsDir() && fi.Mode().Perm()&0o002 != 0:
			sub, err := root.OpenRoot(name)
			if err != nil {
				continue // gone, or swapped for a link out of root
			}
			errs = append(errs, sweepRoot(sub, filepath.Join(where, name), uid, depth-1))
			sub.Close()
		}
	}
	return errors.Join(errs...)
}

// sweepMqueue removes the POSIX message queues uid owns. They live in the
// IPC namespace whether or not an mqueue file system is mounted where the
// driver looks (d.mqueuePath, /dev/mqueue); when none is, the namespace's
// queues are mounted in a private directory for the sweep and unmounted
// after. A kernel without POSIX message queues, or a daemon that may not
// mount, leaves them alone (with a warning, once).
func (d *Driver) sweepMqueue(uid int) error {
	var st unix.Statfs_t
	if unix.Statfs(d.mqueuePath, &st) == nil && int64(st.Type) == mqueueMagic {
		return sweepDir(d.mqueuePath, uid)
	}
	dir, err := os.MkdirTemp(d.env.DataDir, ".mqueue-")
	if err != nil {
		return fmt.Errorf("message queues: %w", err)
	}
	defer os.Remove(dir)
	if err := unix.Mount("mqueue", dir, "mqueue", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		if !errors.Is(err, unix.ENODEV) && d.mqueueWarned.CompareAndSwap(false, true) {
			d.log.Warn("cannot look for the posix message queues machines leave behind", "err", err)
		}
		return nil
	}
	defer unix.Unmount(dir, unix.MNT_DETACH)
	return sweepDir(dir, uid)
}

// sysvKind is one kind of System V IPC object: the file that lists them in
// /proc/sysvipc, its id column, and how to remove one.
type sysvKind struct {
	file, idColumn string
	remove         func(id int) error
}

var sysvKinds = []sysvKind{
	{"shm", "shmid", func(id int) error { _, err := unix.SysvShmCtl(id, unix.IPC_RMID, nil); return err }},
	{"msg", "msqid", func(id int) error { return errnoErr(unix.Syscall(unix.SYS_MSGCTL, uintptr(id), unix.IPC_RMID, 0)) }},
	{"sem", "semid", func(id int) error {
		return errnoErr(unix.Syscall6(unix.SYS_SEMCTL, uintptr(id), 0, unix.IPC_RMID, 0, 0, 0))
	}},
}

// errnoErr is the error of a raw system call (msgctl and semctl, which x/sys
// has no wrappers for).
func errnoErr(_, _ uintptr, errno syscall.Errno) error {
	if errno != 0 {
		return errno
	}
	return nil
}

// removeSysv removes the objects of kind k listed in file whose owner or
// creator is uid (either one may use an object of mode 0600). One that is
// gone by then is fine.
func removeSysv(file string, k sysvKind, uid int) error {
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // a kernel without System V IPC
	}
	if err != nil {
		return err
	}
	ids, err := sysvOwnedBy(b, k.idColumn, uid)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	var errs []error
	for _, id := range ids {
		if err := k.remove(id); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.EIDRM) {
			errs = append(errs, fmt.Errorf("remove %s %d: %w", k.file, id, err))
		}
	}
	return errors.Join(errs...)
}

// sysvOwnedBy reads a /proc/sysvipc table (a header line naming the
// columns) and returns the ids of the rows whose uid or cuid is uid.
func sysvOwnedBy(b []byte, idColumn string, uid int) ([]int, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	if !sc.Scan() {
		return nil, nil
	}
	header := strings.Fields(sc.Text())
	col := func(name string) int { return slices.Index(header, name) }
	idc, uc, cc := col(idColumn), col("uid"), col("cuid")
	if idc < 0 || uc < 0 || cc < 0 {
		return nil, fmt.Errorf("no %s, uid and cuid columns in %q", idColumn, sc.Text())
	}
	var ids []int
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) <= max(idc, uc, cc) {
			continue
		}
		if f[uc] != strconv.Itoa(uid) && f[cc] != strconv.Itoa(uid) {
			continue
		}
		if id, err := strconv.Atoi(f[idc]); err == nil {
			ids = append(ids, id)
		}
	}
	return ids, sc.Err()
}
