package config_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/config"
)

// Variables that other tools set on a host never stop a node: Hugging
// Face's (none under the prefix of one of hf-node's sections but HF_DEBUG),
// those of programs that keep a Hugging Face token in HF_API_TOKEN or
// HF_API_KEY, hf-cli's, and those a native machine gives its processes. One
// under a section's prefix that is no near miss of a key is ignored, and
// returned for hf-node to warn of.
func TestForeignEnvironment(t *testing.T) {
	apiVars := []string{"HF_API_ADDRESS", "HF_API_ADMIN_TOKEN", "HF_API_CORS_ORIGINS", "HF_API_MAX_CLAIMS_PER_USER", "HF_API_MAX_STREAMS_PER_TOKEN",
		"HF_API_PLAIN_HTTP", "HF_API_RESUME_WINDOW", "HF_API_SHELL_KEEPALIVE", "HF_API_TLS_HOSTS", "HF_API_USER_WRITES_PER_SECOND"}
	for _, tc := range []struct {
		name    string
		env     []string
		ignored []config.IgnoredVar
	}{
		{name: "Hugging Face's", env: []string{"HF_HOME=/hf", "HF_TOKEN=hf_x", "HF_TOKEN_PATH=/hf/token", "HF_STORED_TOKENS_PATH=/hf/tokens",
			"HF_HUB_CACHE=/hf/hub", "HF_HUB_OFFLINE=1", "HF_HUB_DISABLE_TELEMETRY=1", "HF_HUB_ENABLE_HF_TRANSFER=1", "HF_HUB_VERBOSITY=debug",
			"HF_ASSETS_CACHE=/hf/assets", "HF_XET_CACHE=/hf/xet", "HF_DATASETS_CACHE=/hf/ds", "HF_DATASETS_OFFLINE=1",
			"HF_ENDPOINT=https://hf.example", "HF_INFERENCE_ENDPOINT=https://inf.example", "HF_DEBUG=1"}},
		{name: "a Hugging Face token", env: []string{"HF_API_TOKEN=hf_x", "HF_API_KEY=hf_y"}},
		{name: "hf-cli's", env: []string{"HF_ENDPOINT=https://127.0.0.1:7700", "HF_TOKEN=t", "HF_PROFILE=p", "HF_OUTPUT=json", "HF_CA_FILE=/ca", "HF_CONFIG_DIR=/c"}},
		{name: "a native machine's", env: []string{"HF_CLAIM=c1", "HF_MACHINE=m-1", "HF_NODE=n1", "HF_TEMPLATE=t", "HF_USER=alice", "HF_NATIVE_ID=hf-1"}},
		{name: "another tool's under a section's prefix", env: []string{"HF_API_URL=https://api.example", "HF_LOG_DIR=/var/log/x", "HF_LOGDIR=/l"},
			ignored: []config.IgnoredVar{
				{Name: "HF_API_URL", Section: "api", Variables: apiVars},
				{Name: "HF_LOG_DIR", Section: "log", Variables: []string{"HF_LOG_FORMAT", "HF_LOG_LEVEL"}},
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := config.Load(config.LoadOptions{Env: append(append([]string{}, testEnv...), tc.env...)})
			require.NoError(t, err)
			assert.Equal(t, tc.ignored, c.IgnoredEnv)
			assert.Equal(t, config.Default().API.Address, c.API.Address)
		})
	}
}
