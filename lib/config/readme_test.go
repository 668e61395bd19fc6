package config_test

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/config"
)

// TestREADMEConfigTable keeps the README's configuration table true: each
// key it lists is a key, its env column names the key's variable (or says
// the environment cannot set it), the environment's rule names every section
// and exception, and the drivers default is what a node with none
// configured runs.
func TestREADMEConfigTable(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(data), "\n## Configuration\n")
	require.True(t, ok)
	section, _, _ = strings.Cut(section, "\n## ")

	keys := configKeys(reflect.TypeFor[config.Config](), "")
	rows := map[string][]string{} // key -> cells
	for l := range strings.SplitSeq(section, "\n") {
		cells := strings.Split(strings.Trim(l, "|"), "|")
		if !strings.HasPrefix(l, "|") || len(cells) != 4 {
			continue
		}
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		key := strings.Trim(cells[1], "`")
		if key == "" || key == "key" || strings.HasPrefix(key, "---") {
			continue
		}
		assert.Contains(t, keys, key, "the README's table lists a key Config does not have")
		rows[key] = cells
	}
	require.Contains(t, rows, "drivers")
	require.Contains(t, rows, "api.admin_token")

	for key, cells := range rows {
		env := cells[2]
		switch key {
		case "api.tokens", "drivers": // lists of mappings: errors from the environment
			assert.Contains(t, env, "file only", key)
			assert.Contains(t, env, "`"+config.EnvName(key)+"` is an error", key)
			_, err := config.Load(config.LoadOptions{Env: append([]string{config.EnvName(key) + "=x"}, testEnv...)})
			assert.ErrorContains(t, err, config.EnvName(key), key)
		case "api.admin_token":
			assert.Contains(t, env, "`"+config.EnvAdminToken+"`")
		default:
			assert.Contains(t, env, "`"+config.EnvName(key)+"`", key)
		}
	}

	// The environment's rule names every section and every exception.
	ct := reflect.TypeFor[config.Config]()
	for i := range ct.NumField() {
		f := ct.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("mapstructure"), ",")
		if f.Type.Kind() == reflect.Struct && tag != "" && tag != "-" {
			assert.Contains(t, section, "`"+config.EnvName(tag)+"`", "the README names the section %s among those whose variables are checked", tag)
		}
	}
	for _, name := range config.ForeignEnv() {
		assert.Contains(t, section, "`"+name+"`", "the README names the exception")
	}

	// A node with no drivers configured loads [{name: test}] marked as the
	// default, to which hf-node adds native, and docker when an engine
	// answers (prepareDrivers in cmd/hf-node).
	c, err := config.Load(config.LoadOptions{File: writeFile(t, "log: {level: info}\n"), Env: testEnv})
	require.NoError(t, err)
	require.True(t, c.DefaultDrivers)
	require.Equal(t, []config.DriverConfig{{Name: "test"}}, c.Drivers)
	def := rows["drivers"][3]
	for _, name := range []string{"test", "native", "docker"} {
		assert.Contains(t, def, "`"+name+"`", "the README's drivers default")
	}
}
