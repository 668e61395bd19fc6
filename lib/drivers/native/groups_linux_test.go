package native

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// hostGroup is a group a test made on the host.
type hostGroup struct {
	name string
	gid  int
}

// makeGroup makes a host group for the test, removed when the test ends.
func makeGroup(t *testing.T) hostGroup {
	t.Helper()
	var b [3]byte
	_, _ = rand.Read(b[:])
	name := testPrefix + "g" + hex.EncodeToString(b[:])
	out, err := exec.Command("groupadd", name).CombinedOutput()
	require.NoError(t, err, "groupadd: %s", out)
	t.Cleanup(func() { _ = exec.Command("groupdel", name).Run() })
	g, ok := groupNamed(t, name)
	require.True(t, ok, "groupadd made no group %s", name)
	return hostGroup{name: name, gid: g.GID}
}

// groupNamed reads the group file's entry of name.
func groupNamed(t *testing.T, name string) (groupEntry, bool) {
	t.Helper()
	b, err := os.ReadFile("/etc/group")
	require.NoError(t, err)
	for _, g := range parseGroups(b) {
		if g.Name == name {
			return g, true
		}
	}
	return groupEntry{}, false
}

// setuidID is a copy of id(1) owned by root with the setuid bit, where
// machine users can run it: `setuidID -u` prints 0 unless no_new_privs keeps
// the bit from taking effect.
func setuidID(t *testing.T, h *testHost) string {
	t.Helper()
	src, err := exec.LookPath("id")
	require.NoError(t, err)
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	dst := filepath.Join(h.base, "setuid-id")
	require.NoError(t, os.WriteFile(dst, b, 0o755))
	require.NoError(t, os.Chown(dst, 0, 0))
	require.NoError(t, os.Chmod(dst, os.ModeSetuid|0o755))
	return dst
}

// TestMachineGroups: a template may put a machine in a host group only when
// the node's allowed_groups lists it; the entry and a shell then run in it
// alike, while the group file does not list the user (no sg, newgrp or login
// of the user's own enters it); and both run with no_new_privs, so a
// setuid-root program runs as the machine's user, unless allow_setuid.
func TestMachineGroups(t *testing.T) {
	needRoot(t)
	h := newTestHost(t)
	allowed, other := makeGroup(t), makeGroup(t)
	suid := setuidID(t, h)
	probe := `id -G; grep NoNewPrivs /proc/self/status; ` + suid + ` -u`

	t.Run("a group the node does not allow is refused", func(t *testing.T) {
		d := h.driver(t, t.TempDir(), map[string]any{"allowed_groups": []string{allowed.name}})
		for _, groups := range [][]string{{other.name}, {allowed.name, other.name}} {
			tmpl := machineTemplate("other", TemplateConfig{Entry: "exec sleep 600", Groups: groups})
			err := d.ValidateTemplate(tmpl)
			require.Error(t, err)
			assert.ErrorIs(t, err, types.ErrInvalid)
			assert.Contains(t, err.Error(), fmt.Sprintf(`spec.providerConfiguration.native.groups[%d]: group %q is not allowed on this node: `+
				`the node's native driver config must list it in allowed_groups`, len(groups)-1, other.name))
			r, err := d.Allocate(t.Context(), tmpl, nil)
			require.Error(t, err)
			assert.Nil(t, r)
			assert.Contains(t, err.Error(), "allowed_groups")
		}
		hostIsClean(t, h, d)
		for _, g := range []string{"docker", "root", "shadow", "disk", "sudo"} {
			err := d.ValidateTemplate(machineTemplate("powerful", TemplateConfig{Entry: "x", Groups: []string{g}}))
			assert.ErrorContains(t, err, `groups[0]: group "`+g+`" is not allowed on this node`)
		}
	})

	for _, tc := range []struct {
		name        string
		allowSetuid bool
		want        func(m machine) string
	}{
		{"no_new_privs", false, func(m machine) string {
			return fmt.Sprintf("%d %d\nNoNewPrivs:\t1\n%d\n", m.GID, allowed.gid, m.UID)
		}},
		// The setuid copy works where no_new_privs is off: the check above
		// is not vacuous.
		{"allow_setuid", true, func(m machine) string {
			return fmt.Sprintf("%d %d\nNoNewPrivs:\t0\n0\n", m.GID, allowed.gid)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := h.driver(t, t.TempDir(), map[string]any{"allowed_groups": []string{allowed.name}, "allow_setuid": tc.allowSetuid})
			tmpl := machineTemplate("grouped", TemplateConfig{
				Entry:  `{ ` + probe + `; } > $HOME/probe.tmp 2>&1; mv $HOME/probe.tmp $HOME/probe.txt; exec sleep 600`,
				Groups: []string{allowed.name},
			})
			require.NoError(t, d.ValidateTemplate(tmpl))
			r, err := d.Allocate(t.Context(), tmpl, nil)
			require.NoError(t, err)
			t.Cleanup(func() { _ = d.Deallocate(context.Background(), r) })
			m := machineOf(t, *r)
			want := tc.want(m)
			var got string
			require.Eventually(t, func() bool {
				b, err := os.ReadFile(filepath.Join(m.Home, "probe.txt"))
				got = string(b)
				return err == nil
			}, 10*time.Second, 20*time.Millisecond, "the entry wrote no probe.txt")
			assert.Equal(t, want, got, "the entry")
			for _, tty := range []bool{false, true} {
				out := strings.ReplaceAll(runShell(t, d, r, tty, probe+"; exit", 0), "\r\n", "\n")
				assert.True(t, strings.HasSuffix(out, want), "a shell (tty %v) as its entry: got %q", tty, out)
			}
			g, ok := groupNamed(t, allowed.name)
			require.True(t, ok)
			assert.Empty(t, g.Members, "the group file lists no machine user in %s", allowed.name)
			require.NoError(t, d.Deallocate(t.Context(), r))
			h.checkGone(t, *r)
		})
	}
}

// TestAllowedGroupOfRoot: a group of gid 0 is root's whatever its name: the
// driver refuses to start with it allowed, and a machine to join it should
// it become so later. (A group file of the test's own: an alias of gid 0 on
// the host would be one more way into root while the test runs.)
func TestAllowedGroupOfRoot(t *testing.T) {
	h := newTestHost(t)
	groups := filepath.Join(t.TempDir(), "group")
	require.NoError(t, os.WriteFile(groups, []byte("root:x:0:\nusers:x:100:\nwheel0:x:0:\n"), 0o644))
	d := asDaemonUser(newDriver(drivers.Env{Instance: Type, DataDir: t.TempDir(), NodeName: h.node}))
	d.groupPath = groups
	err := d.Prepare(t.Context(), h.config(map[string]any{"unprivileged": true, "allowed_groups": []string{"users", "wheel0"}}))
	require.Error(t, err)
	assert.ErrorIs(t, err, types.ErrInvalid)
	assert.Contains(t, err.Error(), `allowed_groups[1]: "wheel0" has gid 0, root's group: never allowed`)

	cfg := Config{AllowedGroups: []string{"users", "wheel0"}}
	gids, err := d.groupIDs(cfg, []string{"users"})
	require.NoError(t, err)
	assert.Equal(t, []uint32{100}, gids)
	_, err = d.groupIDs(cfg, []string{"users", "wheel0"})
	assert.EqualError(t, err, `group "wheel0" has gid 0, root's group: never allowed`)
	_, err = d.groupIDs(Config{AllowedGroups: []string{"users"}}, []string{"wheel0"})
	assert.EqualError(t, err, `group "wheel0" is not in this node's allowed_groups`)
}
