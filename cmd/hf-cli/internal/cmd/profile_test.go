package cmd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/hf-fleet/hf/lib/client/clienttest"
)

func TestProfiles(t *testing.T) {
	c := newCLI(t)
	dir := filepath.Join(c.env["HF_CONFIG_DIR"], "nested")
	c.env["HF_CONFIG_DIR"] = dir
	delete(c.env, "HF_ENDPOINT")
	delete(c.env, "HF_TOKEN")
	path := filepath.Join(dir, "config.yaml")

	r := c.run("profile", "set", "lab", "--endpoint", c.srv.URL, "--token", clienttest.Token)
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "profile \"lab\" saved (current)\n", r.out, "the first profile becomes current")

	st, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	st, err = os.Stat(dir)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), st.Mode().Perm())

	r = c.run("profile", "set", "prod", "--endpoint", "http://127.0.0.1:1", "--token", "prod-token")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "profile \"prod\" saved\n", r.out)

	r = c.run("profile", "list")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "CURRENT\tNAME\tENDPOINT\tTOKEN\n*\tlab\t"+c.srv.URL+"\tset\n\tprod\thttp://127.0.0.1:1\tset\n", r.out)
	assert.NotContains(t, r.out, clienttest.Token, "tokens are never printed")

	// The current profile supplies endpoint and token.
	r = c.run("claim", "list")
	require.Equal(t, 0, r.code, r.err)

	r = c.run("profile", "use", "prod")
	require.Equal(t, 0, r.code, r.err)
	r = c.run("claim", "list")
	assert.Equal(t, ExitError, r.code, "prod points nowhere")
	assert.Contains(t, r.err, "127.0.0.1:1")

	// Changing only the token keeps the endpoint.
	r = c.run("profile", "set", "prod", "--token", "other")
	require.Equal(t, 0, r.code, r.err)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	var cfg Config
	require.NoError(t, yaml.Unmarshal(raw, &cfg))
	assert.Equal(t, "prod", cfg.Current)
	assert.Equal(t, Profile{Endpoint: "http://127.0.0.1:1", Token: "other"}, *cfg.Profiles["prod"])

	r = c.run("profile", "set", "lab", "--use")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "profile \"lab\" saved (current)\n", r.out)

	r = c.run("profile", "list", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	assert.JSONEq(t, `{"current":"lab","profiles":[
		{"name":"lab","endpoint":"`+c.srv.URL+`","hasToken":true,"current":true},
		{"name":"prod","endpoint":"http://127.0.0.1:1","hasToken":true,"current":false}]}`, r.out)

	r = c.run("profile", "delete", "lab")
	require.Equal(t, 0, r.code, r.err)
	r = c.run("profile", "use", "lab")
	assert.Equal(t, ExitError, r.code)
	assert.Contains(t, r.err, `profile "lab" not found`)

	st, err = os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "rewrites keep the mode")
}

func TestProfileUsageErrors(t *testing.T) {
	c := newCLI(t)
	r := c.run("profile", "set", "new")
	assert.Equal(t, ExitUsage, r.code)
	assert.Contains(t, r.err, "needs --endpoint")
	r = c.run("profile", "set", "new", "--endpoint", "nohttp")
	assert.Equal(t, ExitUsage, r.code)
	r = c.run("profile", "set")
	assert.Equal(t, ExitUsage, r.code)
}

func TestPrecedence(t *testing.T) {
	const nowhere = "http://127.0.0.1:1"
	c := newCLI(t)
	good := c.srv.URL
	r := c.run("profile", "set", "good", "--endpoint", good, "--token", clienttest.Token)
	require.Equal(t, 0, r.code, r.err)
	r = c.run("profile", "set", "bad", "--endpoint", nowhere, "--token", "wrong")
	require.Equal(t, 0, r.code, r.err)

	tests := []struct {
		name string
		env  map[string]string
		args []string
		code int
	}{
		{"env beats current profile", map[string]string{"HF_PROFILE": "", "HF_ENDPOINT": good, "HF_TOKEN": clienttest.Token}, nil, 0},
		{"env endpoint beats profile", map[string]string{"HF_PROFILE": "good", "HF_ENDPOINT": nowhere, "HF_TOKEN": ""}, nil, ExitError},
		{"env token beats profile", map[string]string{"HF_PROFILE": "good", "HF_ENDPOINT": "", "HF_TOKEN": "wrong"}, nil, ExitAuth},
		{"HF_PROFILE picks the profile", map[string]string{"HF_PROFILE": "good", "HF_ENDPOINT": "", "HF_TOKEN": ""}, nil, 0},
		{"HF_PROFILE bad", map[string]string{"HF_PROFILE": "bad", "HF_ENDPOINT": "", "HF_TOKEN": ""}, nil, ExitError},
		{"flags beat env", map[string]string{"HF_PROFILE": "", "HF_ENDPOINT": nowhere, "HF_TOKEN": "wrong"},
			[]string{"--endpoint", good, "--token", clienttest.Token}, 0},
		{"--profile beats env", map[string]string{"HF_PROFILE": "bad", "HF_ENDPOINT": nowhere, "HF_TOKEN": "wrong"},
			[]string{"--profile", "good"}, 0},
		{"flag token beats --profile", map[string]string{"HF_PROFILE": "", "HF_ENDPOINT": "", "HF_TOKEN": ""},
			[]string{"--profile", "good", "--token", "wrong"}, ExitAuth},
		// A profile named that does not exist is a usage error (it exited 1).
		{"missing profile", map[string]string{"HF_PROFILE": "", "HF_ENDPOINT": "", "HF_TOKEN": ""},
			[]string{"--profile", "nope"}, ExitUsage},
		{"HF_PROFILE missing", map[string]string{"HF_PROFILE": "nope", "HF_ENDPOINT": "", "HF_TOKEN": ""}, nil, ExitUsage},
		// Even with --endpoint and --token, which need no profile: it was
		// ignored (exit 0).
		{"missing profile beside flags", map[string]string{"HF_PROFILE": "", "HF_ENDPOINT": "", "HF_TOKEN": ""},
			[]string{"--profile", "nope", "--endpoint", good, "--token", clienttest.Token}, ExitUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				c.env[k] = v
			}
			r := c.run(append(tt.args, "claim", "list")...)
			assert.Equal(t, tt.code, r.code, r.err)
		})
	}
}

func TestDefaultEndpointWithoutConfig(t *testing.T) {
	c := newCLI(t)
	delete(c.env, "HF_ENDPOINT")
	f := &Factory{Env: Env{Getenv: func(k string) string { return c.env[k] }}}
	cl, err := f.Client()
	require.NoError(t, err)
	assert.Equal(t, DefaultEndpoint, cl.Endpoint())

	// Without HF_CONFIG_DIR the user's config dir is used.
	home := t.TempDir()
	f = &Factory{Env: Env{Getenv: func(string) string { return "" }, UserConfigDir: func() (string, error) { return home, nil }}}
	dir, err := f.configDir()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(home, "hf"), dir)
}

// With no token given, hf-cli talking to a node on this host (a loopback
// endpoint) takes the admin token from that node's data dir, so a new user
// needs no `export HF_TOKEN=...`; for another host it does not.
func TestLocalNodeToken(t *testing.T) {
	c := newCLI(t)
	delete(c.env, "HF_TOKEN")
	read := 0
	c.localToken = func() (string, error) { read++; return clienttest.Token, nil }
	r := c.run("claim", "list")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, 1, read)

	c.localToken = func() (string, error) { return "", os.ErrNotExist }
	r = c.run("claim", "list")
	assert.Equal(t, ExitAuth, r.code, "no token anywhere: the server says 401")

	assert.True(t, isLoopback("http://127.0.0.1:7700"))
	assert.True(t, isLoopback("https://localhost:7700"))
	assert.True(t, isLoopback("http://[::1]:7700"))
	assert.False(t, isLoopback("http://10.0.0.2:7700"))
	assert.False(t, isLoopback("http://hf.example.com:7700"))
}
