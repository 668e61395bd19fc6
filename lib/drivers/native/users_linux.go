package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// toolTimeout bounds one run of useradd, userdel or groupdel.
const toolTimeout = 30 * time.Second

// runTool runs a user-management tool; shadow's tools take a lock on the
// passwd files and give up when another process holds it, so a lock error is
// retried a few times. The caller holds userMu, which keeps this driver's own
// calls from racing each other.
func (d *Driver) runTool(ctx context.Context, path string, args ...string) error {
	var last error
	for attempt := range 5 {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
			}
		}
		tctx, cancel := context.WithTimeout(ctx, toolTimeout)
		out, err := exec.CommandContext(tctx, path, args...).CombinedOutput()
		cancel()
		if err == nil {
			return nil
		}
		msg := strings.TrimSpace(string(out))
		last = fmt.Errorf("%s %s: %w: %s", path, strings.Join(args, " "), err, msg)
		if !strings.Contains(msg, "lock") {
			return last
		}
	}
	return last
}

// createUser makes the machine user name with its own group and a home at
// home (mode 0700), and returns its passwd entry. The user is a member of no
// other group in the group file: the driver gives the template's groups to
// the processes it starts (entry and shell) and to nothing else, so sg,
// newgrp, su or a login the user sets up for itself (an ssh key in its home)
// cannot enter them.
func (d *Driver) createUser(ctx context.Context, cfg Config, name, home string) (passwdEntry, error) {
	args := []string{
		"--create-home", "--home-dir", home,
		"--comment", d.marker,
		"--shell", cfg.ShellPath,
		"--user-group",
		"--no-log-init",
	}
	args = append(args, name)
	d.userMu.Lock()
	err := d.runTool(ctx, cfg.UseraddPath, args...)
	d.userMu.Unlock()
	if err != nil {
		return passwdEntry{}, fmt.Errorf("create user %s: %w", name, err)
	}
	e, ok, err := d.userByName(name)
	if err != nil {
		return passwdEntry{}, fmt.Errorf("create user %s: %w", name, err)
	}
	if !ok {
		return passwdEntry{}, fmt.Errorf("create user %s: useradd succeeded but %s has no such user", name, d.passwdPath)
	}
	if e.UID == 0 || e.GECOS != d.marker {
		return passwdEntry{}, fmt.Errorf("create user %s: unexpected passwd entry (uid %d, comment %q)", name, e.UID, e.GECOS)
	}
	if err := os.Chmod(home, 0o700); err != nil {
		return passwdEntry{}, fmt.Errorf("create user %s: %w", name, err)
	}
	return e, nil
}

// deleteUser removes the machine user name, its home and its own group, if
// the user exists and carries this driver's marker; any other user of that
// name is left alone with an error. known says the state file lists the
// machine, so a group of that name left by an earlier attempt is ours too.
func (d *Driver) deleteUser(ctx context.Context, cfg Config, name string, known bool) error {
	d.userMu.Lock()
	defer d.userMu.Unlock()
	e, ok, err := d.userByName(name)
	if err != nil {
		return err
	}
	if ok {
		if e.GECOS != d.marker {
			return fmt.Errorf("user %s is not one of this driver's (comment %q): left alone", name, e.GECOS)
		}
		// --force: the user's processes are gone, but a zombie not yet reaped
		// by its new parent would make userdel refuse.
		if err := d.runTool(ctx, cfg.UserdelPath, "--remove", "--force", name); err != nil {
			return fmt.Errorf("delete user %s: %w", name, err)
		}
	}
	if !ok && !known {
		return nil
	}
	// userdel removes the user's own group when the host's login.defs says so
	// (USERGROUPS_ENAB); remove it here when it did not.
	b, err := os.ReadFile(d.groupPath)
	if err != nil {
		return fmt.Errorf("delete user %s: read %s: %w", name, d.groupPath, err)
	}
	for _, g := range parseGroups(b) {
		if g.Name != name || len(g.Members) > 0 {
			continue
		}
		if cfg.GroupdelPath == "" {
			return errors.New("delete user " + name + ": its group is left and no groupdel was found (set groupdel_path)")
		}
		if err := d.runTool(ctx, cfg.GroupdelPath, name); err != nil {
			return fmt.Errorf("delete group %s: %w", name, err)
		}
	}
	return nil
}
