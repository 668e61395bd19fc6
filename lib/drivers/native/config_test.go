package native

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

// fakeLook finds the tools named in have under /usr/sbin.
func fakeLook(have ...string) func(string) (string, error) {
	return func(name string) (string, error) {
		for _, h := range have {
			if name == "/usr/sbin/"+h {
				return name, nil
			}
		}
		return "", errors.New("not found")
	}
}

func TestParseConfigDefaults(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name string
		raw  string
		h    hostFacts
		want Config
	}{
		{
			name: "not root: unprivileged, paths under the data dir",
			h:    hostFacts{DataDir: "/var/lib/hf/drivers/native", LookPath: fakeLook("useradd", "userdel")},
			want: Config{
				ShellPath: "/bin/sh", HomePath: "/home", UserPrefix: "hf-", CgroupPath: "/sys/fs/cgroup",
				StopGrace: types.D(5 * time.Second), Unprivileged: &yes, PidsLimit: 4096,
				ImagesPath:    "/var/lib/hf/drivers/native/images",
				WorkspacePath: "/var/lib/hf/drivers/native/workspace",
			},
		},
		{
			name: "root: users, tools found in sbin, a workspace others can reach",
			h:    hostFacts{Root: true, DataDir: "/d", LookPath: fakeLook("useradd", "userdel", "groupdel")},
			want: Config{
				ShellPath: "/bin/sh", HomePath: "/home", UserPrefix: "hf-", CgroupPath: "/sys/fs/cgroup",
				StopGrace: types.D(5 * time.Second), Unprivileged: &no, PidsLimit: 4096,
				UseraddPath: "/usr/sbin/useradd", UserdelPath: "/usr/sbin/userdel", GroupdelPath: "/usr/sbin/groupdel",
				ImagesPath: "/d/images", WorkspacePath: defaultPrivilegedWorkspace,
			},
		},
		{
			name: "everything set, macOS keys accepted",
			raw: `{"useradd_path": "/opt/bin/useradd", "userdel_path": "/opt/bin/userdel", "groupdel_path": "/opt/bin/groupdel",
				"shell_path": "/bin/bash", "dscl_path": "/usr/bin/dscl", "hdiutil_path": "/usr/bin/hdiutil",
				"createhomedir_path": "/usr/sbin/createhomedir", "images_path": "/cache", "workspace_path": "/ws",
				"home_path": "/srv/homes", "user_prefix": "lab_", "download_user": "u", "download_password": "p",
				"unprivileged": false, "cgroup_path": "/sys/fs/cgroup/unified", "stop_grace": "1s", "pids_limit": 100,
				"allowed_groups": ["users", "kvm"], "allow_setuid": true,
				"cpu_alter": -2, "ram_alter": -4, "cpu_overbook": 8, "ram_overbook": 16}`,
			h: hostFacts{Root: true, LookPath: fakeLook()},
			want: Config{
				UseraddPath: "/opt/bin/useradd", UserdelPath: "/opt/bin/userdel", GroupdelPath: "/opt/bin/groupdel",
				ShellPath: "/bin/bash", DsclPath: "/usr/bin/dscl", HdiutilPath: "/usr/bin/hdiutil",
				CreatehomedirPath: "/usr/sbin/createhomedir", ImagesPath: "/cache", WorkspacePath: "/ws",
				HomePath: "/srv/homes", UserPrefix: "lab_", DownloadUser: "u", DownloadPassword: "p",
				Unprivileged: &no, CgroupPath: "/sys/fs/cgroup/unified", StopGrace: types.D(time.Second), PidsLimit: 100,
				AllowedGroups: []string{"users", "kvm"}, AllowSetuid: true,
				Alter: drivers.Alter{CPUAlter: -2, RAMAlter: -4, CPUOverbook: 8, RAMOverbook: 16},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseConfig([]byte(tc.raw), tc.h)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, !*tc.want.Unprivileged, got.Privileged())
		})
	}
}

func TestParseConfigErrorsNameTheKey(t *testing.T) {
	root := hostFacts{Root: true, DataDir: "/d", LookPath: fakeLook("useradd", "userdel")}
	user := hostFacts{DataDir: "/d", LookPath: fakeLook()}
	for _, tc := range []struct {
		name, raw string
		h         hostFacts
		want      string
	}{
		{"unknown key", `{"user_prefx": "x"}`, user, `unknown key "user_prefx"`},
		{"wrong type", `{"unprivileged": "yes"}`, user, "unprivileged: want true or false"},
		{"privileged without root", `{"unprivileged": false}`, user, "unprivileged: false needs root"},
		{"unprivileged as root", `{"unprivileged": true}`, root, "unprivileged: true is refused as root: machines would run as root"},
		{"no useradd", `{}`, hostFacts{Root: true, DataDir: "/d", LookPath: fakeLook("userdel")},
			"useradd_path: useradd not found on PATH, /usr/sbin or /sbin"},
		{"no userdel", `{}`, hostFacts{Root: true, DataDir: "/d", LookPath: fakeLook("useradd")},
			"userdel_path: userdel not found"},
		{"relative tool", `{"shell_path": "sh"}`, user, `shell_path: must be an absolute path, got "sh"`},
		{"relative mac tool", `{"dscl_path": "dscl"}`, user, "dscl_path: must be an absolute path"},
		{"relative workspace", `{"workspace_path": "ws"}`, root, "workspace_path: must be an absolute path"},
		{"no data dir, no images path", `{}`, hostFacts{LookPath: fakeLook()}, "images_path: required"},
		{"no data dir, no workspace", `{"images_path": "/i"}`, hostFacts{LookPath: fakeLook()}, "workspace_path: required"},
		{"prefix with capitals", `{"user_prefix": "HF-"}`, user, `user_prefix: must start with a lower-case letter`},
		{"prefix with a colon", `{"user_prefix": "hf:"}`, user, "user_prefix: must start"},
		{"empty prefix", `{"user_prefix": ""}`, user, "user_prefix: must start"},
		{"long prefix", `{"user_prefix": "` + strings.Repeat("a", 21) + `"}`, user, "user_prefix: at most 20 characters"},
		{"password without user", `{"download_password": "p"}`, user, "download_password: set without download_user"},
		{"negative grace", `{"stop_grace": "-1s"}`, user, "stop_grace: must be between 0s and 10m0s"},
		{"zero pids", `{"pids_limit": 0}`, user, "pids_limit: must be at least 1"},
		{"bad alter", `{"cpu_overbook": -1}`, user, "cpu_overbook: must not be negative"},
		{"allowed root", `{"allowed_groups": ["users", "root"]}`, user, "allowed_groups[1]: root is never allowed: its members are root on this host"},
		{"allowed bad group", `{"allowed_groups": ["Users"]}`, user, `allowed_groups[0]: not a valid group name: "Users"`},
		{"allowed groups not a list", `{"allowed_groups": "docker"}`, user, "allowed_groups: want a list"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig([]byte(tc.raw), tc.h)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.ErrorIs(t, err, types.ErrInvalid)
		})
	}
}

func TestMarker(t *testing.T) {
	assert.Equal(t, "hf-native node-a/native", markerFor("node-a", "native"))
	assert.Equal(t, "hf-native node_a/native_big_", markerFor("node:a", "native,big\n"),
		"characters passwd comments cannot hold are replaced")
}

func TestOwnID(t *testing.T) {
	d := newDriver(drivers.Env{})
	d.cfg.UserPrefix = "hf-"
	for id, want := range map[string]bool{
		"hf-0123456789":  true,
		"hf-abcdefabcd":  true,
		"hf-012345678":   false, // too short
		"hf-0123456789a": false,
		"hf-ghijklmnop":  false, // not hex
		"xx-0123456789":  false,
		"hf-ABCDEF0123":  false,
		"root":           false,
	} {
		assert.Equal(t, want, d.ownID(id), id)
	}
	for range 100 {
		id := randomID("hf-")
		require.True(t, d.ownID(id), id)
		require.True(t, validID(id), id)
	}
	assert.False(t, validID("../etc"))
	assert.False(t, validID(""))
	assert.False(t, validID(strings.Repeat("a", 33)))
}

// Images and workspaces side by side under a new directory, as
// config.example.yml has them: the shared parent stays searchable, so the
// machine users reach their workspaces. Made images first, it was private
// and the node refused to start as root.
func TestMakeDirsSideBySide(t *testing.T) {
	top := filepath.Join(t.TempDir(), "native")
	yes := false
	cfg := Config{ImagesPath: filepath.Join(top, "images"), WorkspacePath: filepath.Join(top, "workspace"),
		HomePath: filepath.Join(top, "home"), Unprivileged: &yes}
	for d := filepath.Dir(top); d != os.TempDir() && d != "/"; d = filepath.Dir(d) { // t.TempDir's are 0700
		require.NoError(t, os.Chmod(d, 0o755))
	}
	require.NoError(t, makeDirs(cfg))
	st, err := os.Stat(top)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o755), st.Mode().Perm())
	st, err = os.Stat(cfg.ImagesPath)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "the images stay private")
}
