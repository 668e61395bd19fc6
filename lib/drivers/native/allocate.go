package native

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// rollbackTimeout bounds the clean-up of a failed allocation, which runs even
// when the allocation's context was cancelled.
const rollbackTimeout = 2 * time.Minute

// Allocate implements drivers.Driver. It downloads the template's images (once
// per sha256 on this host), records the machine in the state file, makes the
// user (privileged), the workspace with the unpacked images and the cgroup,
// and starts the entry. Any failure undoes everything made so far.
func (d *Driver) Allocate(ctx context.Context, t types.MachineTemplate, meta map[string]string) (*types.Resource, error) {
	d.mu.Lock()
	cfg, prepared, fetcher, cg := d.cfg, d.prepared, d.fetcher, d.cgroups
	d.mu.Unlock()
	if !prepared {
		return nil, fmt.Errorf("allocate: %w", drivers.ErrNotPrepared)
	}
	tc, err := d.templateConfig(t)
	if err != nil {
		return nil, fmt.Errorf("allocate: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("allocate: %w", err)
	}
	// Downloads first: a bad image fails before anything is made.
	archives := make([]string, len(tc.Images))
	for i, img := range tc.Images {
		if archives[i], err = fetcher.Get(ctx, img.URL, img.Sum); err != nil {
			return nil, fmt.Errorf("allocate: image %q: %w", img.Tag, err)
		}
	}
	var gids []uint32
	if cfg.Privileged() {
		if gids, err = d.groupIDs(cfg, tc.Groups); err != nil {
			return nil, fmt.Errorf("allocate: %w", err)
		}
	}

	m, err := d.reserve(cfg, t, tc.Groups)
	if err != nil {
		return nil, fmt.Errorf("allocate: %w", err)
	}
	log := d.log.With("resource", m.ID, "template", t.Metadata.Name)
	if err := d.build(ctx, cfg, cg, m, t, tc, archives, gids, meta); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		if rerr := d.release(rctx, m, true); rerr != nil {
			// The record stays in the state file, so List keeps reporting the
			// leftovers and the node releases them later.
			log.Warn("undo failed allocation", "err", rerr)
			return nil, fmt.Errorf("allocate %s: %w (and its clean-up failed: %v)", m.ID, err, rerr)
		}
		return nil, fmt.Errorf("allocate %s: %w", m.ID, err)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	h := d.held[m.ID]
	h.m.Phase = phaseReady
	if err := d.saveLocked(); err != nil {
		// The machine runs; the record of it as allocating is on disk, so a
		// restart still finds it. Report the allocation as done.
		log.Warn("save state", "err", err)
	}
	log.Info("machine allocated", "user", m.User, "pid", m.PID)
	r := d.resource(h.m, h.res)
	return &r, nil
}

// reserve picks a free id and records the machine as allocating, before
// anything is made for it; groups are the template's host groups, which the
// record keeps for the machine's shells.
func (d *Driver) reserve(cfg Config, t types.MachineTemplate, groups []string) (*machine, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var id string
	for {
		id = randomID(cfg.UserPrefix)
		if _, taken := d.held[id]; taken {
			continue
		}
		if _, err := os.Lstat(filepath.Join(cfg.WorkspacePath, id)); !errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if cfg.Privileged() {
			if _, exists, err := d.userByName(id); err != nil {
				return nil, err
			} else if exists {
				continue
			}
		}
		break
	}
	ws := filepath.Join(cfg.WorkspacePath, id)
	m := &machine{ID: id, Phase: phaseAllocating, Unprivileged: !cfg.Privileged(), Workspace: ws, Template: t.Metadata.Name}
	if cfg.Privileged() {
		m.User, m.Home = id, filepath.Join(cfg.HomePath, id)
		m.Groups = groups
	} else {
		m.UID, m.GID, m.Home = os.Getuid(), os.Getgid(), ws
		if u, err := user.Current(); err == nil {
			m.User = u.Username
		} else {
			m.User = strconv.Itoa(m.UID)
		}
	}
	// The held record is the driver's own copy; build works on m and hands
	// its changes over under the lock.
	rec := *m
	d.held[id] = &held{m: &rec, res: t.Spec.Resources}
	if err := d.saveLocked(); err != nil {
		delete(d.held, id)
		return nil, err
	}
	return m, nil
}

// update changes the held record of m under the lock and saves it.
func (d *Driver) update(id string, f func(m *machine)) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	h, ok := d.held[id]
	if !ok {
		return fmt.Errorf("machine %s vanished from the state", id)
	}
	f(h.m)
	return d.saveLocked()
}

// build makes the machine m: user, workspace, images, cgroup, entry.
func (d *Driver) build(ctx context.Context, cfg Config, cg cgroupSetup, m *machine, t types.MachineTemplate, tc TemplateConfig,
	archives []string, gids []uint32, meta map[string]string) error {
	res := t.Spec.Resources
	var own *owner
	if cfg.Privileged() {
		pw, err := d.createUser(ctx, cfg, m.ID, m.Home)
		if err != nil {
			return err
		}
		if err := d.update(m.ID, func(hm *machine) { hm.UID, hm.GID = pw.UID, pw.GID }); err != nil {
			return err
		}
		m.UID, m.GID = pw.UID, pw.GID
		own = &owner{UID: pw.UID, GID: pw.GID}
		// useradd hands out uids that were someone's before: what an
		// earlier owner left in /tmp and the like would be this machine's
		// to read. Release sweeps too, but not for a user deleted some
		// other way (by hand, by a driver older than the sweep). Nothing
		// runs as the new user yet, so any process of its uid is such an
		// owner's, left running: it would read and signal this machine's
		// things as its user. It is killed at once, before the sweep.
		now := cfg
		now.StopGrace.Duration = 0
		if err := d.killAll(ctx, now, procMatch{id: m.ID, uid: pw.UID}); err != nil {
			return fmt.Errorf("user %s: processes an earlier owner of uid %d left: %w", m.ID, pw.UID, err)
		}
		if err := d.sweepUID(pw.UID); err != nil {
			return fmt.Errorf("user %s: %w", m.ID, err)
		}
	}
	wsMode := os.FileMode(0o700)
	if cfg.Privileged() {
		// root's, and the machine's group's: the user may read it (its
		// entry's log among it) and writes in its disks; no other machine's
		// user may look in.
		wsMode = 0o750
	}
	if err := os.Mkdir(m.Workspace, wsMode); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	if own != nil {
		if err := os.Chown(m.Workspace, 0, own.GID); err != nil {
			return fmt.Errorf("workspace: %w", err)
		}
	}
	if err := os.WriteFile(filepath.Join(m.Workspace, markerFile), []byte(d.marker+"\n"), 0o644); err != nil {
		return fmt.Errorf("workspace: %w", err)
	}
	var limit int64
	if res.DiskGB > 0 {
		limit = int64(math.Ceil(res.DiskGB * gib))
	}
	disks := map[string]string{}
	for i, img := range tc.Images {
		dir := filepath.Join(m.Workspace, img.Tag)
		if err := os.Mkdir(dir, 0o700); err != nil {
			return fmt.Errorf("image %q: %w", img.Tag, err)
		}
		start := time.Now()
		st, err := unpack(ctx, archives[i], dir, own, limit)
		if err != nil {
			return fmt.Errorf("image %q (%s): %w", img.Tag, img.URL, err)
		}
		if limit > 0 {
			limit -= st.Bytes
		}
		disks[img.Tag] = dir
		d.log.Debug("image unpacked", "resource", m.ID, "tag", img.Tag, "format", st.Format, "files", st.Files,
			"bytes", st.Bytes, "skipped", st.Skipped, "took", time.Since(start).Round(time.Millisecond))
	}
	script, err := tc.renderEntry(EntryData{Disks: disks, User: m.User, Home: m.Home, Workspace: m.Workspace})
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	spec := procSpec{
		Shell: cfg.ShellPath, Script: script, Dir: m.Home,
		Env:        entryEnv(t, tc.Env, meta, m.ID, m.User, m.Home, cfg.ShellPath),
		Log:        filepath.Join(m.Workspace, logFile),
		NoNewPrivs: !cfg.AllowSetuid,
	}
	if cg.Parent != "" {
		v1 := len(cg.V1) > 0
		dirs, err := createCgroup(cg, m.ID, res, cfg.PidsLimit)
		if len(dirs) > 0 {
			m.setCgroups(dirs, v1)
			if uerr := d.update(m.ID, func(hm *machine) { hm.setCgroups(dirs, v1) }); uerr != nil && err == nil {
				err = uerr
			}
		}
		if err != nil {
			return err
		}
		spec.Cgroup, spec.CgroupV1 = m.Cgroup, m.CgroupV1
	}
	if cfg.Privileged() {
		spec.Cred = &syscall.Credential{Uid: uint32(m.UID), Gid: uint32(m.GID), Groups: gids}
	}

	// The child must be in children before the reaper can look, and its pid
	// in the state file before a crash could lose it.
	d.mu.Lock()
	defer d.mu.Unlock()
	pid, start, err := startProcess(spec, d.procRoot)
	if pid > 0 {
		d.children[pid] = m.ID
		h := d.held[m.ID]
		h.m.PID, h.m.PIDStart, h.m.Disks = pid, start, disks
		m.PID, m.PIDStart, m.Disks = pid, start, disks
		if serr := d.saveLocked(); serr != nil && err == nil {
			err = serr
		}
	}
	return err
}
