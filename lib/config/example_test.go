package config_test

import (
	"os"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"

	"github.com/hf-fleet/hf/lib/config"
	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/cloud"
	"github.com/hf-fleet/hf/lib/drivers/docker"
	"github.com/hf-fleet/hf/lib/drivers/native"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
)

const examplePath = "../../config.example.yml"

func TestExampleLoadsAndValidates(t *testing.T) {
	c, err := config.Load(config.LoadOptions{File: examplePath, Env: testEnv})
	require.NoError(t, err)
	require.NoError(t, c.Validate())

	// The example shows the defaults: apart from its demo driver settings,
	// loading it changes nothing.
	require.Len(t, c.Drivers, 1)
	assert.Equal(t, "test", c.Drivers[0].Name)
	assert.Equal(t, "test", c.Drivers[0].InstanceName())
	js, err := c.Drivers[0].ConfigJSON()
	require.NoError(t, err)
	assert.JSONEq(t, `{"cpus": 4, "ram_gb": 8}`, string(js))
	c.Drivers = []config.DriverConfig{{Name: "test"}}
	c.DefaultDrivers = true // the example configures its driver; the defaults do not
	assert.Empty(t, c.API.Tokens)
	c.API.Tokens = nil
	assert.Empty(t, c.API.TLSHosts)
	c.API.TLSHosts = nil
	assert.Empty(t, c.API.CORSOrigins)
	c.API.CORSOrigins = nil
	assert.Equal(t, wantDefaults(), c)
}

// configKeys walks Config's mapstructure tags: "cluster.join",
// "api.tokens[].role", ... Free-form maps are not descended into.
func configKeys(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		key := tag
		if prefix != "" {
			key = prefix + "." + tag
		}
		out = append(out, key)
		ft := f.Type
		switch {
		case ft.Kind() == reflect.Struct:
			out = append(out, configKeys(ft, key)...)
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct:
			out = append(out, configKeys(ft.Elem(), key+"[]")...)
		}
	}
	return out
}

// yamlKeys collects the key paths of a parsed document the same way.
func yamlKeys(v any, prefix string, out map[string]bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, val := range x {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			out[key] = true
			yamlKeys(val, key, out)
		}
	case []any:
		for _, e := range x {
			yamlKeys(e, prefix+"[]", out)
		}
	}
}

// TestExampleHasEveryKey keeps config.example.yml from going stale: each key of
// Config must be set in it, or, inside a list the example leaves empty
// (api.tokens), shown in a commented-out example.
func TestExampleHasEveryKey(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, yaml.Unmarshal(data, &doc))
	active := map[string]bool{}
	yamlKeys(doc, "", active)

	keys := configKeys(reflect.TypeFor[config.Config](), "")
	sort.Strings(keys)
	require.Contains(t, keys, "cluster.anti_entropy_interval", "the walk reaches nested keys")
	require.Contains(t, keys, "drivers[].config", "the walk reaches list elements")
	for _, k := range keys {
		if active[k] {
			continue
		}
		if !strings.HasPrefix(k, "api.tokens[].") {
			t.Errorf("config.example.yml does not set %q", k)
			continue
		}
		leaf := k[strings.LastIndexByte(k, '.')+1:]
		commented := regexp.MustCompile(`(?m)^\s*#\s+(- )?` + regexp.QuoteMeta(leaf) + `:`)
		assert.Regexp(t, commented, string(data), "config.example.yml shows %q in a comment", k)
	}

	// Every option is documented: each key line has a comment above it or on
	// it, except inside the demo driver's config.
	lines := strings.Split(string(data), "\n")
	keyLine := regexp.MustCompile(`^\s*(- )?([a-z_]+):`)
	for i, l := range lines {
		m := keyLine.FindStringSubmatch(l)
		if m == nil || strings.Contains(l, "#") || !isConfigKey(keys, m[2]) {
			continue
		}
		prev := ""
		if i > 0 {
			prev = strings.TrimSpace(lines[i-1])
		}
		switch m[2] {
		case "log", "api", "cluster", "scheduler", "store", "config", "cpus", "ram_gb":
			continue // sections and the demo driver's own lines
		}
		assert.True(t, strings.HasPrefix(prev, "#"), "line %d %q has no comment above it", i+1, l)
	}
}

func isConfigKey(keys []string, leaf string) bool {
	for _, k := range keys {
		if k == leaf || strings.HasSuffix(k, "."+leaf) {
			return true
		}
	}
	return false
}

// TestExampleDriversDecode: the commented-out driver examples, uncommented,
// are what their drivers take: every key known, every value of its type.
func TestExampleDriversDecode(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	require.NoError(t, err)
	// The example driver entries are the comment lines from "  # - name:"
	// on, up to the next blank line, inside drivers:.
	var blocks []string
	var cur []string
	for l := range strings.SplitSeq(string(data), "\n") {
		switch {
		case strings.HasPrefix(l, "  # - name: "):
			cur = []string{"  " + strings.TrimPrefix(l, "  # ")}
		case cur != nil && strings.HasPrefix(l, "  #   "):
			cur = append(cur, "  "+strings.TrimPrefix(l, "  # "))
		case cur != nil:
			blocks = append(blocks, strings.Join(cur, "\n"))
			cur = nil
		}
	}
	decoders := map[string]func([]byte) error{
		testdriver.Type: func(b []byte) error { return drivers.DecodeConfig(b, &testdriver.Config{}) },
		native.Type:     func(b []byte) error { return drivers.DecodeConfig(b, &native.Config{}) },
		docker.Type:     func(b []byte) error { return drivers.DecodeConfig(b, &docker.Config{}) },
		"aws":           func(b []byte) error { return drivers.DecodeConfig(b, &cloud.AWSConfig{}) },
		"gce":           func(b []byte) error { return drivers.DecodeConfig(b, &cloud.GCEConfig{}) },
	}
	seen := map[string]bool{}
	for _, b := range blocks {
		var list []config.DriverConfig
		require.NoError(t, yaml.Unmarshal([]byte("drivers:\n"+b), &struct {
			Drivers *[]config.DriverConfig `yaml:"drivers"`
		}{&list}), b)
		require.Len(t, list, 1, b)
		d := list[0]
		decode, ok := decoders[d.Name]
		require.True(t, ok, "an example of an unknown driver %q", d.Name)
		js, err := d.ConfigJSON()
		require.NoError(t, err)
		assert.NoError(t, decode(js), "the %s example in config.example.yml", d.Name)
		seen[d.Name] = true
	}
	assert.Equal(t, map[string]bool{native.Type: true, docker.Type: true, "aws": true, "gce": true}, seen, "every driver has an example")
}
