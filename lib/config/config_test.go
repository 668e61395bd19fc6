package config_test

import (
	"encoding/json"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/config"
	"github.com/hf-fleet/hf/lib/types"
)

func TestDriverConfigJSON(t *testing.T) {
	// What a native driver would decode its JSON config into.
	type nativeConfig struct {
		CPUAlter      int     `json:"cpu_alter"`
		RAMAlter      float64 `json:"ram_alter"`
		ImagesPath    string  `json:"images_path"`
		WorkspacePath string  `json:"workspace_path"`
		Mounts        []struct {
			Src string `json:"src"`
		} `json:"mounts"`
	}
	content := `
drivers:
  - name: native
    config:
      cpu_alter: -2
      ram_alter: -1.5
      images_path: /var/lib/hf/images
      workspace_path: /srv/ws
      mounts: [{src: /a}, {src: /b}]
  - name: test
`
	c, err := load(t, content, nil, nil)
	require.NoError(t, err)
	require.Len(t, c.Drivers, 2)

	js, err := c.Drivers[0].ConfigJSON()
	require.NoError(t, err)
	var got nativeConfig
	require.NoError(t, json.Unmarshal(js, &got))
	assert.Equal(t, -2, got.CPUAlter)
	assert.InDelta(t, -1.5, got.RAMAlter, 0)
	assert.Equal(t, "/var/lib/hf/images", got.ImagesPath)
	assert.Equal(t, "/srv/ws", got.WorkspacePath)
	require.Len(t, got.Mounts, 2)
	assert.Equal(t, "/b", got.Mounts[1].Src)

	// and back: JSON -> map -> JSON is stable
	var m map[string]any
	require.NoError(t, json.Unmarshal(js, &m))
	js2, err := config.DriverConfig{Name: "native", Config: m}.ConfigJSON()
	require.NoError(t, err)
	assert.JSONEq(t, string(js), string(js2))

	tests := []struct {
		name    string
		d       config.DriverConfig
		want    string
		wantErr bool
	}{
		{"no config is an empty object", c.Drivers[1], `{}`, false},
		{"empty map", config.DriverConfig{Name: "test", Config: map[string]any{}}, `{}`, false},
		{"nested", config.DriverConfig{Name: "test", Config: map[string]any{"a": map[string]any{"b": []any{1, "x"}}}}, `{"a":{"b":[1,"x"]}}`, false},
		{"NaN cannot be JSON", config.DriverConfig{Name: "test", Config: map[string]any{"x": math.NaN()}}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			js, err := tt.d.ConfigJSON()
			if tt.wantErr {
				require.Error(t, err)
				assert.Contains(t, err.Error(), "driver test config")
				return
			}
			require.NoError(t, err)
			assert.JSONEq(t, tt.want, string(js))
		})
	}
}

func TestInstanceName(t *testing.T) {
	tests := []struct {
		d    config.DriverConfig
		want string
	}{
		{config.DriverConfig{Name: "docker"}, "docker"},
		{config.DriverConfig{Name: "docker", Instance: "docker/gpu"}, "docker/gpu"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.d.InstanceName())
		})
	}
}

func TestKeyBytes(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		wantLen int
		wantErr bool
	}{
		{"none", "", 0, false},
		{"16 bytes", "MDEyMzQ1Njc4OWFiY2RlZg==", 16, false},
		{"24 bytes", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3", 24, false},
		{"32 bytes", "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=", 32, false},
		{"5 bytes", "c2hvcnQ=", 0, true},
		{"not base64", "!!!", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := config.ClusterConfig{Key: tt.key}.KeyBytes()
			if tt.wantErr {
				assert.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Len(t, b, tt.wantLen)
		})
	}
}

func TestTimings(t *testing.T) {
	lan, _ := config.ProfileTimings(config.ProfileLAN)
	wan, _ := config.ProfileTimings(config.ProfileWAN)
	tests := []struct {
		name string
		c    config.ClusterConfig
		want config.Timings
	}{
		{"profile only", config.ClusterConfig{Profile: config.ProfileWAN}, wan},
		{"unknown profile falls back to lan", config.ClusterConfig{Profile: "moon"}, lan},
		{"overrides", config.ClusterConfig{Profile: config.ProfileLAN, ProbeInterval: time.Second, SuspicionMult: 9},
			config.Timings{GossipInterval: lan.GossipInterval, ProbeInterval: time.Second, ProbeTimeout: lan.ProbeTimeout, SuspicionMult: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, tt.c.Timings())
			c := tt.c
			c.ApplyProfile()
			c.ApplyProfile() // idempotent
			assert.Equal(t, tt.want, config.Timings{GossipInterval: c.GossipInterval, ProbeInterval: c.ProbeInterval, ProbeTimeout: c.ProbeTimeout, SuspicionMult: c.SuspicionMult})
		})
	}
	for _, p := range []config.Profile{config.ProfileLocal, config.ProfileLAN, config.ProfileWAN} {
		tm, ok := config.ProfileTimings(p)
		require.True(t, ok)
		assert.Less(t, tm.ProbeTimeout, tm.ProbeInterval, p)
	}
}

func TestDefaultDataDir(t *testing.T) {
	env := func(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }
	tests := []struct {
		name string
		euid int
		env  map[string]string
		want string
	}{
		{"root", 0, map[string]string{"HOME": "/root", "XDG_DATA_HOME": "/x"}, "/var/lib/hf"},
		{"xdg", 1000, map[string]string{"HOME": "/home/u", "XDG_DATA_HOME": "/data"}, "/data/hf"},
		{"relative xdg is ignored", 1000, map[string]string{"HOME": "/home/u", "XDG_DATA_HOME": "data"}, "/home/u/.local/share/hf"},
		{"home", 1000, map[string]string{"HOME": "/home/u"}, "/home/u/.local/share/hf"},
		{"nothing", 1000, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, config.DefaultDataDir(tt.euid, env(tt.env)))
		})
	}
}

func TestSmallHelpers(t *testing.T) {
	for lvl, want := range map[string]slog.Level{"debug": slog.LevelDebug, "info": slog.LevelInfo, "warn": slog.LevelWarn, "error": slog.LevelError, "": slog.LevelInfo} {
		assert.Equal(t, want, config.LogConfig{Level: lvl}.SlogLevel(), lvl)
	}
	assert.Equal(t, "HF_CLUSTER_ANTI_ENTROPY_INTERVAL", config.EnvName("cluster.anti_entropy_interval"))
	assert.Equal(t, "HF_DATA_DIR", config.EnvName("data_dir"))
	assert.Equal(t, "ci", config.TokenConfig{Name: "ci"}.UserName())
	assert.Equal(t, "bob", config.TokenConfig{Name: "ci", User: "bob"}.UserName())
}

func TestRedacted(t *testing.T) {
	c := config.Default()
	c.API.AdminToken = "admin-token-0123456789"
	c.Cluster.Key = "MDEyMzQ1Njc4OWFiY2RlZg=="
	c.API.Tokens = []config.TokenConfig{{Name: "ci", Token: "ci-token-0123456789", Role: config.RoleUser}}
	r := c.Redacted()
	assert.Equal(t, config.RedactedValue, r.API.AdminToken)
	assert.Equal(t, config.RedactedValue, r.Cluster.Key)
	assert.Equal(t, config.RedactedValue, r.API.Tokens[0].Token)
	assert.Equal(t, "ci", r.API.Tokens[0].Name)
	c.Drivers = []config.DriverConfig{{Name: "aws", Config: map[string]any{
		"region":      "eu-west-1",
		"credentials": map[string]any{"Access_Key_ID": "AKIA", "secret_access_key": "s3cr3t"},
		"profiles":    []any{map[string]any{"password": "pw", "user": "u"}},
		"api_token":   nil,
	}}}
	r = c.Redacted()
	assert.Equal(t, config.RedactedValue, r.API.Tokens[0].Token)
	assert.Equal(t, map[string]any{
		"region":      "eu-west-1",
		"credentials": config.RedactedValue,
		"profiles":    []any{map[string]any{"password": config.RedactedValue, "user": "u"}},
		"api_token":   nil,
	}, r.Drivers[0].Config)
	assert.Equal(t, "ci-token-0123456789", c.API.Tokens[0].Token, "the original is untouched")
	assert.Equal(t, "pw", c.Drivers[0].Config["profiles"].([]any)[0].(map[string]any)["password"], "the original is untouched")
	for key, want := range map[string]bool{"password": true, "AWS_SECRET": true, "ssh_private_key": true, "images_path": false, "cpu_alter": false, "key_name": false} {
		assert.Equal(t, want, config.IsSecretKey(key), key)
	}
	assert.Empty(t, config.Default().Redacted().API.AdminToken, "no secret, nothing to redact")
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *config.Config)
		field  string // "" = valid
	}{
		{"default", func(*config.Config) {}, ""},
		{"zero timings mean the profile", func(c *config.Config) { c.Cluster.ProbeInterval, c.Cluster.ProbeTimeout = 0, 0 }, ""},
		{"no drivers", func(c *config.Config) { c.Drivers = nil }, ""},
		{"two instances of one type", func(c *config.Config) {
			c.Drivers = []config.DriverConfig{{Name: "docker"}, {Name: "docker", Instance: "docker/gpu"}}
		}, ""},
		{"ipv6 addresses", func(c *config.Config) {
			c.API.Address, c.Cluster.Bind, c.Cluster.Join = "[::1]:7700", "[::]:7701", []string{"::1", "[fe80::1%eth0]:7701"}
		}, ""},
		{"all interfaces", func(c *config.Config) { c.API.Address = ":7700" }, ""},
		{"name", func(c *config.Config) { c.Name = "-x" }, "name"},
		{"data dir", func(c *config.Config) { c.DataDir = "" }, "data_dir"},
		{"label", func(c *config.Config) { c.Labels = map[string]string{"a": "b c"} }, "labels.a"},
		{"placement", func(c *config.Config) { c.Scheduler.Placement = "" }, "scheduler.placement"},
		{"bind timeout", func(c *config.Config) { c.Scheduler.BindTimeout = 0 }, "scheduler.bind_timeout"},
		{"gc interval", func(c *config.Config) { c.Store.GCInterval = -time.Second }, "store.gc_interval"},
		{"suspicion mult", func(c *config.Config) { c.Cluster.SuspicionMult = -1 }, "cluster.suspicion_mult"},
		{"fanout zero", func(c *config.Config) { c.Cluster.Fanout = 0 }, "cluster.fanout"},
		{"fanout below -1", func(c *config.Config) { c.Cluster.Fanout = -2 }, "cluster.fanout"},
		{"empty join entry", func(c *config.Config) { c.Cluster.Join = []string{""} }, "cluster.join[0]"},
		{"driver name", func(c *config.Config) { c.Drivers = []config.DriverConfig{{Name: "Docker"}} }, "drivers[0].name"},
		{"duplicate instance", func(c *config.Config) {
			c.Drivers = []config.DriverConfig{{Name: "docker", Instance: "x"}, {Name: "docker"}, {Name: "test", Instance: "x"}}
		}, "drivers[2].instance"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.Default()
			c.DataDir = "/srv/hf"
			tt.mutate(&c)
			err := c.Validate()
			if tt.field == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, types.ErrInvalid)
			var fe *types.FieldError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tt.field, fe.Field)
			assert.Contains(t, err.Error(), "config: "+tt.field+": ")
		})
	}
}

func TestPprofAddressIsLoopbackOnly(t *testing.T) {
	for addr, ok := range map[string]bool{"127.0.0.1:6060": true, "[::1]:0": true, "localhost:6060": true,
		"0.0.0.0:6060": false, ":6060": false, "10.0.0.1:6060": false} {
		c := config.Default()
		c.DataDir = "/tmp/hf"
		c.Debug.PprofAddress = addr
		err := c.Validate()
		if ok {
			assert.NoError(t, err, addr)
		} else if assert.Error(t, err, addr) {
			assert.Contains(t, err.Error(), "debug.pprof_address", addr)
		}
	}
}

func TestMemoryLimit(t *testing.T) {
	for mb, ok := range map[int]bool{0: true, 32: true, 512: true, 31: false, 1: false, -1: false} {
		c := config.Default()
		c.DataDir = "/tmp/hf"
		c.MemoryLimitMB = mb
		err := c.Validate()
		if ok {
			assert.NoError(t, err, mb)
		} else if assert.Error(t, err, mb) {
			assert.Contains(t, err.Error(), "memory_limit_mb", mb)
		}
	}
	c, err := config.Load(config.LoadOptions{Env: []string{"HF_MEMORY_LIMIT_MB=256", "HOME=/tmp"}})
	require.NoError(t, err)
	assert.Equal(t, 256, c.MemoryLimitMB, "the key is read from the environment as every other")
}
