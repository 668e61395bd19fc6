package docker

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/types"
)

func TestParseConfig(t *testing.T) {
	def := DefaultConfig()
	with := func(f func(*Config)) Config { c := DefaultConfig(); f(&c); return c }
	for _, tc := range []struct {
		name string
		cfg  string
		want Config
	}{
		{"empty gives defaults", ``, def},
		{"null gives defaults", `null`, def},
		{"defaults", `{}`, Config{Network: "hf", LabelNamespace: "hf", StartTimeout: types.D(time.Minute),
			StartGrace: types.D(200 * time.Millisecond), StopTimeout: types.D(5 * time.Second),
			User: "65534:65534", PidsLimit: 4096}},
		{"everything", `{"host": "tcp://127.0.0.1:2375", "network": "lab_net", "images_path": "/var/cache/hf",
			"label_namespace": "hf.node-2", "allow_privileged": true, "start_timeout": "2m", "start_grace": "0s",
			"stop_timeout": 1, "download_user": "u", "download_password": "p",
			"user": "0:0", "allow_root": true, "pids_limit": 64, "network_icc": true,
			"cpu_alter": -1, "ram_alter": -2, "cpu_overbook": 4, "ram_overbook": 8}`,
			Config{Host: "tcp://127.0.0.1:2375", Network: "lab_net", ImagesPath: "/var/cache/hf",
				LabelNamespace: "hf.node-2", AllowPrivileged: true, StartTimeout: types.D(2 * time.Minute),
				User: "0:0", AllowRoot: true, PidsLimit: 64, NetworkICC: true,
				StopTimeout: types.D(time.Second), DownloadUser: "u", DownloadPassword: "p",
				Alter: drivers.Alter{CPUAlter: -1, RAMAlter: -2, CPUOverbook: 4, RAMOverbook: 8}}},
		{"unix socket", `{"host": "unix:///run/user/1000/docker.sock"}`,
			with(func(c *Config) { c.Host = "unix:///run/user/1000/docker.sock" })},
		{"bridge network", `{"network": "bridge"}`, with(func(c *Config) { c.Network = "bridge" })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tc.cfg))
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		name, cfg, want string
	}{
		{"unknown key", `{"socket": "x"}`, `unknown key "socket"`},
		{"bad host scheme", `{"host": "ssh://me@box"}`, `host: "ssh://me@box": scheme "ssh" not supported`},
		{"host without scheme", `{"host": "localhost"}`, `host: "localhost"`},
		{"empty network", `{"network": ""}`, `network: is required`},
		{"host network", `{"network": "host"}`, `network: "host" cannot publish ports`},
		{"bad network name", `{"network": "my net"}`, `network: "my net" is not a valid network name`},
		{"bad namespace", `{"label_namespace": "HF"}`, `label_namespace: "HF": want lower-case`},
		{"empty namespace", `{"label_namespace": ""}`, `label_namespace: ""`},
		{"zero start timeout", `{"start_timeout": "0s"}`, `start_timeout: must be positive`},
		{"negative grace", `{"start_grace": "-1s"}`, `start_grace: must not be negative`},
		{"grace past timeout", `{"start_grace": "2m"}`, `start_grace: must be shorter than start_timeout`},
		{"negative stop timeout", `{"stop_timeout": "-1s"}`, `stop_timeout: must not be negative`},
		{"bad duration", `{"stop_timeout": "soon"}`, `stop_timeout: duration "soon"`},
		{"password without user", `{"download_password": "p"}`, `download_password: needs download_user`},
		{"privileged not bool", `{"allow_privileged": "yes"}`, `allow_privileged: want true or false`},
		{"negative overbook", `{"cpu_overbook": -1}`, `cpu_overbook: must not be negative`},
		{"not an object", `[]`, `want an object`},
		{"user by name", `{"user": "nobody"}`, `user: "nobody": want a numeric uid or uid:gid`},
		{"empty user", `{"user": ""}`, `user: "": want a numeric uid`},
		{"root user", `{"user": "0"}`, `user: "0" is root: not allowed on this node (allow_root is false)`},
		{"root with a group", `{"user": "00:1000"}`, `user: "00:1000" is root`},
		{"uid out of range", `{"user": "4294967296"}`, `user: "4294967296": uid out of range`},
		{"gid out of range", `{"user": "1000:4294967296"}`, `user: "1000:4294967296": gid out of range`},
		{"zero pids", `{"pids_limit": 0}`, `pids_limit: must be at least 1`},
		{"pids not a number", `{"pids_limit": "many"}`, `pids_limit:`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(tc.cfg))
			require.Error(t, err)
			assert.ErrorIs(t, err, types.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestPrepareRejectsBadConfigFirst(t *testing.T) {
	d := New(drivers.Env{Instance: "docker", NodeName: "n"})
	err := d.Prepare(t.Context(), []byte(`{"network": "host"}`))
	require.ErrorIs(t, err, types.ErrInvalid)
	assert.Contains(t, err.Error(), "prepare docker: config: network:")
}

func TestResolveHost(t *testing.T) {
	assert.Equal(t, "tcp://a:1", resolveHost("tcp://a:1", "unix:///env.sock"))
	assert.Equal(t, "unix:///env.sock", resolveHost("", "unix:///env.sock"))
	assert.Equal(t, "unix:///var/run/docker.sock", resolveHost("", ""))
}

// template builds a template with the given providerConfiguration entries.
func template(name string, res types.Resources, pc map[string]string) types.MachineTemplate {
	t := types.MachineTemplate{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate},
		Metadata: types.ObjectMeta{Name: name},
		Spec:     types.MachineTemplateSpec{Resources: res, ProviderConfiguration: map[string]json.RawMessage{}},
	}
	for k, v := range pc {
		t.Spec.ProviderConfiguration[k] = json.RawMessage(v)
	}
	return t
}

func TestValidateTemplate(t *testing.T) {
	sum := "sha256:" + strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name       string
		instance   string
		privileged bool // allow_privileged
		pc         map[string]string
		want       string // empty: valid
	}{
		{"local tag", "docker", false, map[string]string{"docker": `{"image": {"tag": "hf/box:1"}}`}, ""},
		{"image id", "docker", false, map[string]string{"docker": `{"image": {"tag": "sha256:` + strings.Repeat("cd", 32) + `"}}`}, ""},
		{"tarball", "docker", false, map[string]string{"docker": `{"image": {"url": "https://files.lab/box.tar", "sum": "` + sum + `"}}`}, ""},
		{"all options", "docker", false, map[string]string{"docker": `{"image": {"tag": "box"}, "command": ["sleep", "1"],
			"entrypoint": ["/bin/sh", "-c"], "env": {"A": "1", "B_C": ""}, "ports": ["8080/tcp", "53/udp", "22"],
			"volumes": ["/data", "/home/user"], "privileged": false}`}, ""},
		{"privileged allowed", "docker", true, map[string]string{"docker": `{"image": {"tag": "box"}, "privileged": true}`}, ""},
		{"instance entry", "docker/big", false, map[string]string{"docker/big": `{"image": {"tag": "box"}}`}, ""},
		{"type entry serves an instance", "docker/big", false, map[string]string{"docker": `{"image": {"tag": "box"}}`}, ""},

		{"no entry", "docker", false, map[string]string{"test": `{}`}, `spec.providerConfiguration: has no entry for "docker"`},
		{"no entry for instance", "docker/big", false, map[string]string{"test": `{}`},
			`spec.providerConfiguration: has no entry for "docker/big" or "docker"`},
		{"no image", "docker", false, map[string]string{"docker": `{}`}, `spec.providerConfiguration.docker.image: needs a tag or a url`},
		{"unknown key", "docker", false, map[string]string{"docker": `{"image": {"tag": "box"}, "cmd": ["x"]}`},
			`spec.providerConfiguration.docker: unknown key "cmd"`},
		{"unknown image key", "docker", false, map[string]string{"docker": `{"image": {"name": "box"}}`},
			`spec.providerConfiguration.docker: unknown key "name"`},
		{"tag and url", "docker", false, map[string]string{"docker": `{"image": {"tag": "box", "url": "http://x/y"}}`},
			`spec.providerConfiguration.docker.image: give a tag or a url, not both`},
		{"bad tag", "docker", false, map[string]string{"docker": `{"image": {"tag": "Box:: 1"}}`},
			`spec.providerConfiguration.docker.image.tag: "Box:: 1"`},
		{"sum with tag", "docker", false, map[string]string{"docker": `{"image": {"tag": "box", "sum": "` + sum + `"}}`},
			`spec.providerConfiguration.docker.image.sum: is only for a url`},
		{"url without sum", "docker", false, map[string]string{"docker": `{"image": {"url": "http://x/y.tar"}}`},
			`spec.providerConfiguration.docker.image.sum: is required with a url`},
		{"bad sum", "docker", false, map[string]string{"docker": `{"image": {"url": "http://x/y.tar", "sum": "md5:00"}}`},
			`spec.providerConfiguration.docker.image.sum: "md5:00"`},
		{"ftp url", "docker", false, map[string]string{"docker": `{"image": {"url": "ftp://x/y.tar", "sum": "` + sum + `"}}`},
			`spec.providerConfiguration.docker.image.url: "ftp://x/y.tar": want an http or https URL`},
		{"command not a list", "docker", false, map[string]string{"docker": `{"image": {"tag": "box"}, "command": "sleep 1"}`},
			`spec.providerConfiguration.docker.command: want a list`},
		{"env with =", "docker", false, map[string]string{"docker": `{"image": {"tag": "box"}, "env": {"A=B": "1"}}`},
			`spec.providerConfiguration.docker.env.A=B: variable name "A=B" must not contain '='`},
		{"port out of range", "docker", false, map[string]string{"docker": `{"image": {"tag": "box"}, "ports": ["70000"]}`},
			`spec.providerConfiguration.docker.ports[0]: "70000": want a port number`},
		{"port protocol", "docker", false, map[string]string{"docker": `{"image": {"tag": "box"}, "ports": ["80/tcp", "80/http"]}`},
			`spec.providerConfiguration.docker.ports[1]: "80/http": protocol must be tcp, udp or sctp`},
		{"port twice", "docker", false, map[string]string{"docker": `{"image": {"tag": "box"}, "ports": ["80", "80/tcp"]}`},
			`spec.providerConfiguration.docker.ports[1]: "80/tcp" is listed twice`},
		{"relative volume", "docker", false, map[string]string{"docker": `{"image": {"tag": "box"}, "volumes": ["data"]}`},
			`spec.providerConfiguration.docker.volumes[0]: "data": want an absolute path`},
		{"root volume", "docker", false, map[string]string{"docker": `{"image": {"tag": "box"}, "volumes": ["/data", "/"]}`},
			`spec.providerConfiguration.docker.volumes[1]: cannot be the root directory`},
		{"bind-like volume", "docker", false, map[string]string{"docker": `{"image": {"tag": "box"}, "volumes": ["/etc:/data"]}`},
			`spec.providerConfiguration.docker.volumes[0]: "/etc:/data": must not contain`},
		{"volume twice", "docker", false, map[string]string{"docker": `{"image": {"tag": "box"}, "volumes": ["/data", "/data/"]}`},
			`spec.providerConfiguration.docker.volumes[1]: "/data/" is listed twice`},
		{"privileged not allowed", "docker", false, map[string]string{"docker": `{"image": {"tag": "box"}, "privileged": true}`},
			`spec.providerConfiguration.docker.privileged: not allowed on this node (allow_privileged is false)`},
		{"privileged not allowed on instance", "docker/x", false, map[string]string{"docker/x": `{"image": {"tag": "box"}, "privileged": true}`},
			`spec.providerConfiguration.docker/x.privileged: not allowed`},
		{"user", "docker", false, map[string]string{"docker": `{"image": {"tag": "box"}, "user": "1000:1000"}`}, ""},
		{"user by name", "docker", false, map[string]string{"docker": `{"image": {"tag": "box"}, "user": "root"}`},
			`spec.providerConfiguration.docker.user: "root": want a numeric uid or uid:gid`},
		{"root user not allowed", "docker", false, map[string]string{"docker": `{"image": {"tag": "box"}, "user": "0:0"}`},
			`spec.providerConfiguration.docker.user: "0:0" is root: not allowed on this node (allow_root is false)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newDriver(drivers.Env{Instance: tc.instance})
			d.cfg.AllowPrivileged = tc.privileged
			err := d.ValidateTemplate(template("t", types.Resources{CPU: 1, RAMGB: 1}, tc.pc))
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, types.ErrInvalid)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestRootNeedsAllowRoot(t *testing.T) {
	d := newDriver(drivers.Env{Instance: "docker"})
	tmpl := template("t", types.Resources{CPU: 1}, map[string]string{"docker": `{"image": {"tag": "box"}, "user": "0"}`})
	require.ErrorIs(t, d.ValidateTemplate(tmpl), types.ErrInvalid)
	d.cfg.AllowRoot = true
	require.NoError(t, d.ValidateTemplate(tmpl))
	_, err := ParseConfig([]byte(`{"user": "0", "allow_root": true}`))
	require.NoError(t, err)
}

func TestNotPrepared(t *testing.T) {
	d := New(drivers.Env{NodeName: "n"})
	tmpl := template("t", types.Resources{CPU: 1}, map[string]string{"docker": `{"image": {"tag": "box"}}`})
	_, err := d.Allocate(t.Context(), tmpl, nil)
	assert.ErrorIs(t, err, drivers.ErrNotPrepared)
	_, err = d.Status(t.Context(), &types.Resource{ID: "x"})
	assert.ErrorIs(t, err, drivers.ErrNotPrepared)
	assert.ErrorIs(t, d.Deallocate(t.Context(), &types.Resource{ID: "x"}), drivers.ErrNotPrepared)
	_, err = d.List(t.Context())
	assert.ErrorIs(t, err, drivers.ErrNotPrepared)
	assert.Equal(t, drivers.ErrNotPrepared.Error(), d.(*Driver).StatusText())
	assert.Equal(t, "docker", d.Name())
	assert.False(t, d.IsRemote())
}
