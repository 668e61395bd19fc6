package config_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"

	"github.com/hf-fleet/hf/lib/config"
)

// testEnv is the environment every test starts from: never the process's.
var testEnv = []string{"HOME=/home/tester", "PATH=/usr/bin"}

// writeFile writes a config file and returns its path; "" writes nothing.
func writeFile(t *testing.T, content string) string {
	t.Helper()
	if content == "" {
		return ""
	}
	p := filepath.Join(t.TempDir(), "hf.yml")
	require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// load runs Load with a file (when content is not empty), extra environment
// and command-line arguments parsed by a FlagSet from BindFlags.
func load(t *testing.T, content string, env, args []string) (config.Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("hf-node", pflag.ContinueOnError)
	config.BindFlags(fs)
	require.NoError(t, fs.Parse(args))
	return config.Load(config.LoadOptions{
		File:  writeFile(t, content),
		Flags: fs,
		Env:   append(append([]string{}, testEnv...), env...),
	})
}

func lookup(env []string) func(string) string {
	return func(k string) string {
		for i := len(env) - 1; i >= 0; i-- {
			if len(env[i]) > len(k) && env[i][:len(k)+1] == k+"=" {
				return env[i][len(k)+1:]
			}
		}
		return ""
	}
}

// wantDefaults is the configuration with nothing given, written out in full.
func wantDefaults() config.Config {
	return config.Config{
		DataDir: config.DefaultDataDir(os.Geteuid(), lookup(testEnv)),
		Log:     config.LogConfig{Level: "info", Format: "text"},
		API: config.APIConfig{Address: "127.0.0.1:7700", MaxClaimsPerUser: 100, MaxStreamsPerToken: 16, UserWritesPerSecond: 20, ResumeWindow: time.Minute,
			ShellKeepalive: 10 * time.Second},
		Cluster: config.ClusterConfig{
			Bind:                "127.0.0.1:7701",
			Join:                []string{},
			Profile:             config.ProfileLAN,
			GossipInterval:      200 * time.Millisecond,
			ProbeInterval:       250 * time.Millisecond,
			ProbeTimeout:        200 * time.Millisecond,
			SuspicionMult:       4,
			RejoinInterval:      10 * time.Second,
			AntiEntropyInterval: 30 * time.Second,
			Fanout:              3,
		},
		Scheduler: config.SchedulerConfig{
			Placement:          config.PlacementPack,
			BindTimeout:        5 * time.Minute,
			OfferTimeout:       2 * time.Second,
			LostGrace:          30 * time.Second,
			PoolMaxAssigned:    8 * time.Hour,
			PoolMaxAge:         24 * time.Hour,
			ActivityResolution: time.Minute,
			MinCPU:             0.05,
			MinRAMGB:           0.05,
			MaxRebinds:         5,
			MaxRefusedPasses:   3,
		},
		Store:          config.StoreConfig{GCInterval: 5 * time.Minute, TombstoneTTL: 24 * time.Hour, TombstoneMinAge: 10 * time.Minute},
		Drivers:        []config.DriverConfig{{Name: "test"}},
		DefaultDrivers: true,
	}
}

func TestLoadDefaults(t *testing.T) {
	tests := []struct {
		name    string
		content string
		args    []string
	}{
		{"no file", "", nil},
		{"empty file", "# nothing here\n", nil},
		{"null document", "~\n", nil},
		{"document markers", "---\nname:\n...\n---\n", nil},
		{"flags with defaults not given", "", []string{}},
		{"keys without values", "name:\ndata_dir: \"\"\nlog:\ncluster:\n  join:\n  bind:\ndrivers: []\nlabels:\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, tt.content, nil, tt.args)
			require.NoError(t, err)
			want := wantDefaults()
			if c.Cluster.Join == nil {
				want.Cluster.Join = nil
			}
			assert.Equal(t, want, c)
			assert.NoError(t, c.Validate())
		})
	}
}

func TestDefaultMatchesLoad(t *testing.T) {
	d := config.Default()
	require.NoError(t, d.Validate(), "Default() with zero timings is valid")
	d.Cluster.ApplyProfile()
	d.DataDir = wantDefaults().DataDir
	c, err := config.Load(config.LoadOptions{Env: testEnv})
	require.NoError(t, err)
	c.Cluster.Join = nil
	assert.Equal(t, d, c)
}

// TestLoadFileRoundTrip marshals a Config with every key changed from its
// default and loads it back: every key is read from the file.
func TestLoadFileRoundTrip(t *testing.T) {
	want := config.Config{
		Name:    "node-a",
		DataDir: "/srv/hf",
		Labels:  map[string]string{"rack": "r1", "topology.example.com/Zone": "A"},
		Log:     config.LogConfig{Level: "debug", Format: "json"},
		API: config.APIConfig{
			Address:    "0.0.0.0:8800",
			AdminToken: "admin-token-0123456789",
			Tokens: []config.TokenConfig{
				{Name: "ci", Token: "ci-token-0123456789", Role: config.RoleUser, User: "ci-bot"},
				{Name: "ops", Token: "ops-token-0123456789", Role: config.RoleAdmin},
			},
			MaxClaimsPerUser:   5,
			MaxStreamsPerToken: 3,
			TLSHosts:           []string{"hf.example.com", "*.lb.example.com", "192.0.2.10", "2001:db8::1"},
			CORSOrigins:        []string{"https://fleet.example.com"},
			ResumeWindow:       5 * time.Minute,
			ShellKeepalive:     3 * time.Second,
		},
		Cluster: config.ClusterConfig{
			Bind:                "10.0.0.1:7800",
			Advertise:           "192.0.2.1:7800",
			Join:                []string{"10.0.0.2", "hf-3.example.com:7800"},
			Key:                 "MDEyMzQ1Njc4OWFiY2RlZg==",
			Label:               "prod",
			Profile:             config.ProfileWAN,
			GossipInterval:      time.Second,
			ProbeInterval:       3 * time.Second,
			ProbeTimeout:        time.Second,
			SuspicionMult:       5,
			RejoinInterval:      time.Minute,
			AntiEntropyInterval: 2 * time.Minute,
			Fanout:              5,
		},
		Scheduler: config.SchedulerConfig{
			Placement:          config.PlacementSpread,
			BindTimeout:        10 * time.Minute,
			OfferTimeout:       3 * time.Second,
			LostGrace:          time.Minute,
			PoolMaxIdle:        time.Hour,
			PoolMaxAssigned:    2 * time.Hour,
			PoolMaxAge:         3 * time.Hour,
			ActivityResolution: 30 * time.Second,
			MinCPU:             0.1,
			MinRAMGB:           0.25,
			MaxRebinds:         2,
		},
		Store: config.StoreConfig{GCInterval: time.Hour, TombstoneTTL: 48 * time.Hour, TombstoneMinAge: 10 * time.Minute, SyncWrites: true},
		Drivers: []config.DriverConfig{
			{Name: "test", Config: map[string]any{"cpus": 4, "ram_gb": 8}},
			{Name: "docker", Instance: "docker/gpu", Config: map[string]any{"cpu_alter": -1, "Images_Path": "/x", "nested": map[string]any{"a.b": []any{1, "two"}}}},
		},
	}
	b, err := yaml.Marshal(want)
	require.NoError(t, err)
	got, err := load(t, string(b), nil, nil)
	require.NoError(t, err, "file:\n%s", b)
	assert.Equal(t, want, got)
}

func TestLoadLayers(t *testing.T) {
	const file = `
data_dir: /from/file
log:
  level: warn
api:
  address: 127.0.0.1:9000
  admin_token: file-admin-token-0123
cluster:
  join: [file-1, file-2]
  profile: local
scheduler:
  placement: spread
labels:
  rack: r1
  zone: file
`
	tests := []struct {
		name    string
		content string
		env     []string
		args    []string
		check   func(t *testing.T, c config.Config)
	}{
		{
			name: "file values", content: file,
			check: func(t *testing.T, c config.Config) {
				assert.Equal(t, "/from/file", c.DataDir)
				assert.Equal(t, "warn", c.Log.Level)
				assert.Equal(t, "127.0.0.1:9000", c.API.Address)
				assert.Equal(t, []string{"file-1", "file-2"}, c.Cluster.Join)
				assert.Equal(t, config.PlacementSpread, c.Scheduler.Placement)
				assert.Equal(t, map[string]string{"rack": "r1", "zone": "file"}, c.Labels)
				// untouched keys keep their defaults
				assert.Equal(t, "text", c.Log.Format)
				assert.Equal(t, 5*time.Minute, c.Scheduler.BindTimeout)
			},
		},
		{
			name: "local profile fills timings", content: file,
			check: func(t *testing.T, c config.Config) {
				want, ok := config.ProfileTimings(config.ProfileLocal)
				require.True(t, ok)
				assert.Equal(t, want, c.Cluster.Timings())
				assert.Equal(t, want.ProbeInterval, c.Cluster.ProbeInterval)
			},
		},
		{
			name: "explicit timing beats profile", content: "cluster: {profile: wan, probe_timeout: 1s}",
			check: func(t *testing.T, c config.Config) {
				assert.Equal(t, time.Second, c.Cluster.ProbeTimeout)
				assert.Equal(t, 5*time.Second, c.Cluster.ProbeInterval)
				assert.Equal(t, 6, c.Cluster.SuspicionMult)
			},
		},
		{
			name: "env overrides file", content: file,
			env: []string{"HF_DATA_DIR=/from/env", "HF_LOG_LEVEL=error", "HF_API_ADDRESS=:7000", "HF_SCHEDULER_PLACEMENT=pack",
				"HF_CLUSTER_PROFILE=wan", "HF_CLUSTER_SUSPICION_MULT=7", "HF_SCHEDULER_BIND_TIMEOUT=1m", "HF_CLUSTER_KEY=MDEyMzQ1Njc4OWFiY2RlZg=="},
			check: func(t *testing.T, c config.Config) {
				assert.Equal(t, "/from/env", c.DataDir)
				assert.Equal(t, "error", c.Log.Level)
				assert.Equal(t, ":7000", c.API.Address)
				assert.Equal(t, config.PlacementPack, c.Scheduler.Placement)
				assert.Equal(t, config.ProfileWAN, c.Cluster.Profile)
				assert.Equal(t, 7, c.Cluster.SuspicionMult)
				assert.Equal(t, time.Minute, c.Scheduler.BindTimeout)
				assert.Equal(t, "MDEyMzQ1Njc4OWFiY2RlZg==", c.Cluster.Key)
				assert.Equal(t, "127.0.0.1:7701", c.Cluster.Bind, "default kept")
			},
		},
		{
			name: "flag overrides env", content: file,
			env:  []string{"HF_DATA_DIR=/from/env", "HF_LOG_LEVEL=error", "HF_API_ADDRESS=:7000", "HF_NAME=env-name", "HF_CLUSTER_BIND=:1"},
			args: []string{"--data-dir=/from/flag", "--log-level", "debug", "--api", "127.0.0.1:0", "--name", "flag-name", "--gossip", "127.0.0.1:0", "--advertise", "192.0.2.7:7701", "--log-format", "json"},
			check: func(t *testing.T, c config.Config) {
				assert.Equal(t, "/from/flag", c.DataDir)
				assert.Equal(t, "debug", c.Log.Level)
				assert.Equal(t, "json", c.Log.Format)
				assert.Equal(t, "127.0.0.1:0", c.API.Address)
				assert.Equal(t, "flag-name", c.Name)
				assert.Equal(t, "127.0.0.1:0", c.Cluster.Bind)
				assert.Equal(t, "192.0.2.7:7701", c.Cluster.Advertise)
			},
		},
		{
			name: "flags not given do not override", content: file,
			env:  []string{"HF_LOG_LEVEL=error"},
			args: []string{"--name", "n1"},
			check: func(t *testing.T, c config.Config) {
				assert.Equal(t, "error", c.Log.Level, "--log-level has a default but was not given")
				assert.Equal(t, "127.0.0.1:9000", c.API.Address, "--api has a default but was not given")
			},
		},
		{
			name: "HF_ADMIN_TOKEN alias", content: file,
			env: []string{"HF_ADMIN_TOKEN=alias-admin-token-0123"},
			check: func(t *testing.T, c config.Config) {
				assert.Equal(t, "alias-admin-token-0123", c.API.AdminToken)
			},
		},
		{
			name: "HF_API_ADMIN_TOKEN beats its alias",
			env:  []string{"HF_API_ADMIN_TOKEN=canonical-token-0123", "HF_ADMIN_TOKEN=alias-admin-token-0123"},
			check: func(t *testing.T, c config.Config) {
				assert.Equal(t, "canonical-token-0123", c.API.AdminToken)
			},
		},
		{
			name: "HF_CLUSTER_JOIN comma list replaces the file's", content: file,
			env: []string{"HF_CLUSTER_JOIN=10.0.0.1, 10.0.0.2:7701,,hf-3.example.com"},
			check: func(t *testing.T, c config.Config) {
				assert.Equal(t, []string{"10.0.0.1", "10.0.0.2:7701", "hf-3.example.com"}, c.Cluster.Join)
			},
		},
		{
			name: "--join repeated and comma-separated beats env", content: file,
			env:  []string{"HF_CLUSTER_JOIN=10.0.0.9"},
			args: []string{"--join", "10.0.0.1", "--join", "10.0.0.2:7701,10.0.0.3"},
			check: func(t *testing.T, c config.Config) {
				assert.Equal(t, []string{"10.0.0.1", "10.0.0.2:7701", "10.0.0.3"}, c.Cluster.Join)
			},
		},
		{
			name: "labels merge file < env < flags", content: file,
			env:  []string{"HF_LABELS=zone=env,gpu=yes"},
			args: []string{"--label", "zone=flag", "--label", "disk=ssd,arch=arm64"},
			check: func(t *testing.T, c config.Config) {
				assert.Equal(t, map[string]string{"rack": "r1", "zone": "flag", "gpu": "yes", "disk": "ssd", "arch": "arm64"}, c.Labels)
			},
		},
		{
			name:    "labels keep case and dots",
			content: "labels: {topology.example.com/Zone: A, GPU: 'true', count: 2}",
			check: func(t *testing.T, c config.Config) {
				assert.Equal(t, map[string]string{"topology.example.com/Zone": "A", "GPU": "true", "count": "2"}, c.Labels)
			},
		},
		{
			name:    "a bool is text as written, a whole number in any notation a number",
			content: "labels: {gpu: true, ssd: false}\nmemory_limit_mb: 1e3\n",
			check: func(t *testing.T, c config.Config) {
				assert.Equal(t, map[string]string{"gpu": "true", "ssd": "false"}, c.Labels)
				assert.Equal(t, 1000, c.MemoryLimitMB)
			},
		},
		{
			name:    "label value that looks like a date stays as written",
			content: "labels: {since: 2024-01-01}",
			check: func(t *testing.T, c config.Config) {
				assert.Equal(t, map[string]string{"since": "2024-01-01"}, c.Labels)
			},
		},
		{
			// Weak typing is the environment's and the flags': their
			// values are text, and parsed.
			name:    "durations are quoted in the file, numbers and bools in the environment",
			content: "scheduler: {bind_timeout: \"5m\"}\ncluster: {gossip_interval: '300ms'}\n",
			env:     []string{"HF_SCHEDULER_MAX_REBINDS=5", "HF_STORE_SYNC_WRITES=true", "HF_API_USER_WRITES_PER_SECOND=2.5"},
			check: func(t *testing.T, c config.Config) {
				assert.Equal(t, 5*time.Minute, c.Scheduler.BindTimeout)
				assert.Equal(t, 300*time.Millisecond, c.Cluster.GossipInterval)
				assert.Equal(t, 5, c.Scheduler.MaxRebinds)
				assert.True(t, c.Store.SyncWrites)
				assert.Equal(t, 2.5, c.API.UserWritesPerSecond)
			},
		},
		{
			name: "unknown and empty HF_ variables are ignored", content: file,
			env: []string{"HF_TOKEN=hugging-face", "HF_HOME=/x", "HF_CLUSTER_JION=", "HF_API=", "HF_LOG_LEVEL=", "HF_DRIVERS="},
			check: func(t *testing.T, c config.Config) {
				assert.Equal(t, "warn", c.Log.Level)
			},
		},
		{
			name:    "driver config keeps its keys as written",
			content: "drivers:\n- name: docker\n  config: {cpu_alter: -1, Env: {PATH: /bin}, 1: one}\n",
			check: func(t *testing.T, c config.Config) {
				require.Len(t, c.Drivers, 1)
				assert.Equal(t, map[string]any{"cpu_alter": -1, "Env": map[string]any{"PATH": "/bin"}, "1": "one"}, c.Drivers[0].Config)
			},
		},
		{
			name: "anchors and merge keys",
			content: `
drivers:
  - name: docker
    config: &d {cpu_alter: -1, ram_alter: -2}
  - name: docker
    instance: docker/b
    config:
      <<: *d
      ram_alter: -4
`,
			check: func(t *testing.T, c config.Config) {
				require.Len(t, c.Drivers, 2)
				assert.Equal(t, map[string]any{"cpu_alter": -1, "ram_alter": -4}, c.Drivers[1].Config)
			},
		},
		{
			// The file's values are checked with the environment filling in
			// what the file leaves out, not with the defaults alone.
			name:    "file values checked with the layers that complete them",
			content: "cluster: {probe_interval: 5s, probe_timeout: 3s}\nstore: {tombstone_ttl: 2m}\n",
			env:     []string{"HF_STORE_TOMBSTONE_MIN_AGE=1m", "HF_CLUSTER_PROBE_INTERVAL=2s", "HF_CLUSTER_PROBE_TIMEOUT=1s"},
			check: func(t *testing.T, c config.Config) {
				assert.Equal(t, 2*time.Minute, c.Store.TombstoneTTL)
				assert.Equal(t, time.Second, c.Cluster.ProbeTimeout)
			},
		},
		{
			name: "data_dir default follows XDG_DATA_HOME for non-root", env: []string{"XDG_DATA_HOME=/xdg"},
			check: func(t *testing.T, c config.Config) {
				assert.Equal(t, config.DefaultDataDir(os.Geteuid(), lookup(append(testEnv, "XDG_DATA_HOME=/xdg"))), c.DataDir)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, tt.content, tt.env, tt.args)
			require.NoError(t, err)
			tt.check(t, c)
			assert.NoError(t, c.Validate())
		})
	}
}

func TestLoadFileSources(t *testing.T) {
	content := "log: {level: debug}\n"
	t.Run("--config flag names the file", func(t *testing.T) {
		fs := pflag.NewFlagSet("hf-node", pflag.ContinueOnError)
		config.BindFlags(fs)
		require.NoError(t, fs.Parse([]string{"--config", writeFile(t, content)}))
		c, err := config.Load(config.LoadOptions{Flags: fs, Env: testEnv})
		require.NoError(t, err)
		assert.Equal(t, "debug", c.Log.Level)
	})
	t.Run("HF_CONFIG names the file", func(t *testing.T) {
		c, err := config.Load(config.LoadOptions{Env: append([]string{"HF_CONFIG=" + writeFile(t, content)}, testEnv...)})
		require.NoError(t, err)
		assert.Equal(t, "debug", c.Log.Level)
	})
	t.Run("File beats --config and HF_CONFIG", func(t *testing.T) {
		fs := pflag.NewFlagSet("hf-node", pflag.ContinueOnError)
		config.BindFlags(fs)
		require.NoError(t, fs.Parse([]string{"--config", "/nonexistent/flag.yml"}))
		c, err := config.Load(config.LoadOptions{File: writeFile(t, content), Flags: fs, Env: []string{"HF_CONFIG=/nonexistent/env.yml"}})
		require.NoError(t, err)
		assert.Equal(t, "debug", c.Log.Level)
	})
}

func TestBindFlags(t *testing.T) {
	fs := pflag.NewFlagSet("hf-node", pflag.ContinueOnError)
	config.BindFlags(fs)
	for _, name := range []string{"config", "data-dir", "name", "api", "gossip", "advertise", "join", "log-level", "log-format", "label"} {
		assert.NotNil(t, fs.Lookup(name), name)
	}
	require.NoError(t, fs.Parse([]string{"--label", "a=1", "--label", "b=2"}))
	assert.Equal(t, "[a=1,b=2]", fs.Lookup("label").Value.String())
}
