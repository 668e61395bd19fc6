package native

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"time"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// Config is the native driver's configuration (JSON, snake_case keys). Keys
// left out take the defaults described on each field.
type Config struct {
	// UseraddPath is the useradd tool (default: found on PATH, then /usr/sbin
	// and /sbin). Needed unless unprivileged.
	UseraddPath string `json:"useradd_path"`
	// UserdelPath is the userdel tool, found like useradd.
	UserdelPath string `json:"userdel_path"`
	// GroupdelPath is the groupdel tool, found like useradd; used only when
	// userdel leaves the user's own group behind. Optional.
	GroupdelPath string `json:"groupdel_path"`
	// ShellPath runs the entry as `shell -c entry` (default /bin/sh).
	ShellPath string `json:"shell_path"`

	// DsclPath, HdiutilPath and CreatehomedirPath are the macOS tools. They are
	// accepted so one config serves both systems, but macOS is not supported
	// yet: the driver refuses to prepare there.
	DsclPath          string `json:"dscl_path"`
	HdiutilPath       string `json:"hdiutil_path"`
	CreatehomedirPath string `json:"createhomedir_path"`

	// ImagesPath is the download cache (default <data dir>/images).
	ImagesPath string `json:"images_path"`
	// WorkspacePath holds a directory per machine with its unpacked images
	// (default <data dir>/workspace when unprivileged; /var/lib/hf-native/workspace
	// otherwise, because the machine users must be able to reach it and a
	// node's data dir is private to the daemon).
	WorkspacePath string `json:"workspace_path"`
	// HomePath is where the machine users' homes are made (default /home).
	HomePath string `json:"home_path"`
	// UserPrefix starts every machine user name and resource id (default
	// "hf-"): lower-case letters, digits, '_' and '-', at most 20 characters.
	UserPrefix string `json:"user_prefix"`
	// DownloadUser and DownloadPassword are sent as HTTP basic auth with every
	// image download when DownloadUser is set.
	DownloadUser     string `json:"download_user"`
	DownloadPassword string `json:"download_password"`
	// Unprivileged runs without per-machine users: workspaces and entries
	// belong to the daemon's user. It is for a daemon that does not run as
	// root (the default there) and is refused as root, where every machine
	// runs as its own fresh user.
	Unprivileged *bool `json:"unprivileged"`
	// CgroupPath is where the driver makes a cgroup per machine for its CPU
	// and memory limits (default /sys/fs/cgroup): a cgroup2 mount, or on a
	// cgroup v1 (or hybrid) host the directory that holds the cpu and memory
	// hierarchies. When it is neither, or not writable, limits are not
	// enforced.
	CgroupPath string `json:"cgroup_path"`
	// StopGrace is how long processes get between SIGTERM and SIGKILL when a
	// machine is deallocated (default 5s).
	StopGrace types.Duration `json:"stop_grace"`
	// PidsLimit bounds the processes (and threads) of one machine, so a fork
	// bomb stays inside it (default 4096): with the pids controller where the
	// cpu and memory limits are enforced, and in privileged mode on any host
	// as the machine user's RLIMIT_NPROC.
	PidsLimit int64 `json:"pids_limit"`
	// AllowedGroups are the host groups a template's groups may name (default
	// none: a template that names a group is refused). Every member of a
	// group has its access on this host, and some groups are root in all but
	// name (docker, lxd, libvirt, disk), or read what no machine should
	// (shadow, adm, systemd-journal): the driver warns at start when one of
	// those is allowed, and refuses root and any other group of gid 0.
	AllowedGroups []string `json:"allowed_groups"`
	// AllowSetuid lets a machine's processes gain privileges through setuid
	// and setgid programs and file capabilities (sudo, su, sg, newgrp). By
	// default (false) every entry and shell runs with no_new_privs, which
	// they and their children cannot clear.
	AllowSetuid bool `json:"allow_setuid"`

	drivers.Alter
}

// hostFacts is what the defaults depend on, injected so tests need no root.
type hostFacts struct {
	// Root is true when the daemon runs as root.
	Root bool
	// DataDir is the driver instance's data dir ("" keeps nothing).
	DataDir string
	// LookPath finds a tool on PATH (exec.LookPath).
	LookPath func(string) (string, error)
}

const (
	defaultPrivilegedWorkspace = "/var/lib/hf-native/workspace"
	maxPrefix                  = 20
	maxStopGrace               = 10 * time.Minute
	defaultPidsLimit           = 4096
)

var prefixRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]*$`)

// parseConfig decodes raw strictly, fills the defaults and validates.
func parseConfig(raw []byte, h hostFacts) (Config, error) {
	c := Config{
		ShellPath:  "/bin/sh",
		HomePath:   "/home",
		UserPrefix: "hf-",
		CgroupPath: "/sys/fs/cgroup",
		StopGrace:  types.D(5 * time.Second),
		PidsLimit:  defaultPidsLimit,
	}
	if err := drivers.DecodeConfig(raw, &c); err != nil {
		return Config{}, err
	}
	if c.Unprivileged == nil {
		unpriv := !h.Root
		c.Unprivileged = &unpriv
	}
	if c.ImagesPath == "" && h.DataDir != "" {
		c.ImagesPath = filepath.Join(h.DataDir, "images")
	}
	if c.WorkspacePath == "" {
		if !*c.Unprivileged {
			c.WorkspacePath = defaultPrivilegedWorkspace
		} else if h.DataDir != "" {
			c.WorkspacePath = filepath.Join(h.DataDir, "workspace")
		}
	}
	if !*c.Unprivileged {
		look := h.LookPath
		if look == nil {
			look = exec.LookPath
		}
		for _, t := range []struct {
			p    *string
			name string
		}{{&c.UseraddPath, "useradd"}, {&c.UserdelPath, "userdel"}, {&c.GroupdelPath, "groupdel"}} {
			if *t.p == "" {
				*t.p = findTool(t.name, look)
			}
		}
	}
	return c, c.validate(h)
}

// findTool looks name up on PATH and then in the sbin directories a normal
// user's PATH often lacks; "" when it is nowhere.
func findTool(name string, look func(string) (string, error)) string {
	for _, cand := range []string{name, "/usr/sbin/" + name, "/sbin/" + name} {
		if p, err := look(cand); err == nil {
			return p
		}
	}
	return ""
}

// Privileged reports whether the driver makes a user per machine.
func (c Config) Privileged() bool { return c.Unprivileged != nil && !*c.Unprivileged }

// validate checks the configuration; the error names the key.
func (c Config) validate(h hostFacts) error {
	if c.Privileged() && !h.Root {
		return types.Invalid("unprivileged", "false needs root: hf-node does not run as root here")
	}
	if !c.Privileged() && h.Root {
		// Unprivileged machines run as the daemon's user: as root, that would
		// hand every machine (and every claim's entry) root.
		return types.Invalid("unprivileged", "true is refused as root: machines would run as root; "+
			"as root the driver runs every machine as its own fresh user (leave the key out)")
	}
	if c.Privileged() {
		for _, t := range []struct{ key, v, tool string }{
			{"useradd_path", c.UseraddPath, "useradd"},
			{"userdel_path", c.UserdelPath, "userdel"},
		} {
			if t.v == "" {
				return types.Invalid(t.key, "%s not found on PATH, /usr/sbin or /sbin; install it or set the key", t.tool)
			}
		}
	}
	for _, t := range []struct {
		key, v   string
		required bool
	}{
		{"useradd_path", c.UseraddPath, false},
		{"userdel_path", c.UserdelPath, false},
		{"groupdel_path", c.GroupdelPath, false},
		{"shell_path", c.ShellPath, true},
		{"dscl_path", c.DsclPath, false},
		{"hdiutil_path", c.HdiutilPath, false},
		{"createhomedir_path", c.CreatehomedirPath, false},
		{"images_path", c.ImagesPath, true},
		{"workspace_path", c.WorkspacePath, true},
		{"home_path", c.HomePath, true},
		{"cgroup_path", c.CgroupPath, true},
	} {
		if t.v == "" {
			if t.required {
				return types.Invalid(t.key, "required (the driver has no data dir to default it under)")
			}
			continue
		}
		if !filepath.IsAbs(t.v) {
			return types.Invalid(t.key, "must be an absolute path, got %q", t.v)
		}
	}
	if !prefixRE.MatchString(c.UserPrefix) {
		return types.Invalid("user_prefix", "must start with a lower-case letter or '_' and hold only a-z, 0-9, '_' and '-', got %q", c.UserPrefix)
	}
	if len(c.UserPrefix) > maxPrefix {
		return types.Invalid("user_prefix", "at most %d characters (user names stay under 32), got %d", maxPrefix, len(c.UserPrefix))
	}
	if c.DownloadPassword != "" && c.DownloadUser == "" {
		return types.Invalid("download_password", "set without download_user")
	}
	if c.PidsLimit < 1 {
		return types.Invalid("pids_limit", "must be at least 1")
	}
	for i, g := range c.AllowedGroups {
		key := fmt.Sprintf("allowed_groups[%d]", i)
		if !validGroupName(g) {
			return types.Invalid(key, "not a valid group name: %q", g)
		}
		if g == "root" {
			return types.Invalid(key, "root is never allowed: its members are root on this host")
		}
	}
	if c.StopGrace.Duration < 0 || c.StopGrace.Duration > maxStopGrace {
		return types.Invalid("stop_grace", "must be between 0s and %s", maxStopGrace)
	}
	return c.Alter.Validate()
}
