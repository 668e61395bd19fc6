//go:build unix

package docker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// lockNetwork makes the nodes of one host that share an engine create its
// network one at a time: the second lists the network the first created,
// however loaded the engine is. It holds an advisory lock (flock) on a file
// in dir (networkLockDir) named for the user, the engine and the network,
// and waits for it at most networkLockWait; without the lock (it cannot be
// opened, or someone holds it that long) it goes on unlocked, and the
// settle-and-pick of ensureNetwork still resolves the race. Nodes on other
// hosts sharing a remote engine rely on that alone.
func lockNetwork(ctx context.Context, dir, engine, name string) (unlock func()) {
	sum := sha256.Sum256([]byte(engine + "\x00" + name))
	path := filepath.Join(dir, "hf-docker-network-"+strconv.Itoa(os.Getuid())+"-"+hex.EncodeToString(sum[:8])+".lock")
	deadline := time.Now().Add(networkLockWait)
	for {
		f, err := tryLockFile(path)
		if err == nil {
			// The holder removes the file before it lets go, so no file is
			// left behind; whoever waited on the removed file tries again.
			return func() {
				_ = os.Remove(path)
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}
		}
		if !errors.Is(err, errLockBusy) || time.Now().After(deadline) {
			return func() {}
		}
		select {
		case <-ctx.Done():
			return func() {}
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// networkLockDir is where the network locks of this user live: a directory
// no other user can write to where there is one (/run for root, the user's
// runtime dir), so that nobody else can hold or plant the lock; else the
// temporary directory, where tryLockFile takes only a regular file.
func networkLockDir() string {
	if os.Getuid() == 0 {
		return "/run"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return d
	}
	return os.TempDir()
}

var errLockBusy = errors.New("lock busy")

// tryLockFile opens path and takes its lock without waiting: errLockBusy
// when another holds it, or when the file was removed or replaced between
// the open and the lock (its holder let go: try again).
func tryLockFile(path string) (*os.File, error) {
	// O_NOFOLLOW: a link planted in a shared temporary directory is not
	// followed; O_NONBLOCK: nor does a planted FIFO hold the open; no
	// O_TRUNC: the file is never written.
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o600)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		_ = f.Close()
		return nil, fmt.Errorf("lock %s: not a regular file", path)
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLockBusy
		}
		return nil, err
	}
	held, err1 := f.Stat()
	now, err2 := os.Lstat(path)
	if err1 != nil || err2 != nil || !os.SameFile(held, now) {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
		return nil, errLockBusy
	}
	return f, nil
}
