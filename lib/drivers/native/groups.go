package native

import (
	"fmt"
	"os"
	"regexp"
	"slices"

	"github.com/hf-fleet/hf/lib/types"
)

var groupRE = regexp.MustCompile(`^[a-z_][a-z0-9_-]*\$?$`)

// validGroupName reports whether g has the shape of a group name (the
// shadow tools' rule, at most 32 characters).
func validGroupName(g string) bool { return groupRE.MatchString(g) && len(g) <= 32 }

// powerfulGroups are groups whose members can do more on the host than a
// machine should, and what. Allowing one is the operator's call, made in the
// node's config; the driver says at start what it hands out.
var powerfulGroups = map[string]string{
	"docker":          "root on this host through the Docker socket",
	"lxd":             "root on this host through LXD containers",
	"incus-admin":     "root on this host through Incus containers",
	"libvirt":         "root on this host through libvirt's virtual machines",
	"disk":            "root on this host through its raw block devices",
	"kmem":            "reads kernel memory",
	"shadow":          "reads the password hashes in /etc/shadow",
	"adm":             "reads the system logs",
	"systemd-journal": "reads the system journal",
	"sudo":            "administrators' group: sudo rules and polkit actions",
	"wheel":           "administrators' group: sudo rules and polkit actions",
	"admin":           "administrators' group: sudo rules and polkit actions",
}

// groupGIDs reads the group file into name -> gid.
func (d *Driver) groupGIDs() (map[string]int, error) {
	b, err := os.ReadFile(d.groupPath)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", d.groupPath, err)
	}
	byName := map[string]int{}
	for _, g := range parseGroups(b) {
		byName[g.Name] = g.GID
	}
	return byName, nil
}

// checkAllowedGroups refuses an allowed group that is root's (gid 0, under
// any name) and warns of every allowed group that grants more than a
// machine should have. A group that does not exist yet is fine: templates
// naming it fail to allocate until it does.
func (d *Driver) checkAllowedGroups(cfg Config) error {
	if len(cfg.AllowedGroups) == 0 {
		return nil
	}
	gids, err := d.groupGIDs()
	if err != nil {
		return fmt.Errorf("allowed_groups: %w", err)
	}
	for i, g := range cfg.AllowedGroups {
		if gid, ok := gids[g]; ok && gid == 0 {
			return types.Invalid(fmt.Sprintf("allowed_groups[%d]", i), "%q has gid 0, root's group: never allowed", g)
		}
		if why, ok := powerfulGroups[g]; ok {
			d.log.Warn("native machines may join a group that grants host access", "group", g, "grants", why)
		}
	}
	return nil
}

// checkGroups refuses a template group the node does not allow; prefix is
// the template entry's field path.
func checkGroups(tc TemplateConfig, allowed []string, prefix string) error {
	for i, g := range tc.Groups {
		if !slices.Contains(allowed, g) {
			return types.Invalid(fmt.Sprintf("%s.groups[%d]", prefix, i),
				"group %q is not allowed on this node: the node's native driver config must list it in allowed_groups", g)
		}
	}
	return nil
}

// groupIDs resolves group names to ids for a machine's processes. Each must
// be allowed by cfg (checked again here: the template was checked when it was
// written, the config may have changed since) and must not be root's group
// under another name; the error names the group.
func (d *Driver) groupIDs(cfg Config, names []string) ([]uint32, error) {
	if len(names) == 0 {
		return nil, nil
	}
	gids, err := d.groupGIDs()
	if err != nil {
		return nil, err
	}
	out := make([]uint32, 0, len(names))
	for _, n := range names {
		gid, ok := gids[n]
		switch {
		case !slices.Contains(cfg.AllowedGroups, n):
			return nil, fmt.Errorf("group %q is not in this node's allowed_groups", n)
		case !ok:
			return nil, fmt.Errorf("group %q does not exist on this host (the template's groups)", n)
		case gid == 0:
			return nil, fmt.Errorf("group %q has gid 0, root's group: never allowed", n)
		}
		out = append(out, uint32(gid))
	}
	return out, nil
}
