package cloud

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	yaml "go.yaml.in/yaml/v3"
)

// TestExampleConfig: the commented aws and gce entries of config.example.yml,
// uncommented, are valid driver configs (so the documentation cannot drift
// from the keys).
func TestExampleConfig(t *testing.T) {
	b, err := os.ReadFile("../../../config.example.yml")
	require.NoError(t, err)
	for _, kind := range []string{TypeAWS, TypeGCE} {
		t.Run(kind, func(t *testing.T) {
			var block []string
			in := false
			for _, l := range strings.Split(string(b), "\n") {
				switch {
				case l == "  # - name: "+kind:
					in = true
				case in && !strings.HasPrefix(l, "  # "):
					in = false
				}
				if in {
					block = append(block, "  "+strings.TrimPrefix(l, "  # "))
				}
			}
			require.NotEmpty(t, block, "config.example.yml has a commented %s entry", kind)
			var entries []struct {
				Name   string         `yaml:"name"`
				Config map[string]any `yaml:"config"`
			}
			require.NoError(t, yaml.Unmarshal([]byte(strings.Join(block, "\n")), &entries))
			require.Len(t, entries, 1)
			assert.Equal(t, kind, entries[0].Name)
			raw, err := json.Marshal(entries[0].Config)
			require.NoError(t, err)
			if kind == TypeAWS {
				_, err = ParseAWSConfig(raw)
			} else {
				_, err = ParseGCEConfig(raw)
			}
			require.NoError(t, err)
		})
	}
}

// TestConfigErrorsNameTheKey: a bad value is an error naming its key.
func TestConfigErrorsNameTheKey(t *testing.T) {
	for _, tc := range []struct {
		kind, cfg, want string
	}{
		{TypeAWS, `{"quota": {"vcpus": 4}}`, "region"},
		{TypeAWS, `{"region": "eu-central-1"}`, "quota.vcpus"},
		{TypeAWS, `{"region": "eu-central-1", "quota": {"vcpus": 4, "instances": -1}}`, "quota.instances"},
		{TypeAWS, `{"region": "eu-central-1", "quota": {"vcpus": 4}, "endpoint": "ftp://x"}`, "endpoint"},
		{TypeAWS, `{"region": "eu-central-1", "quota": {"vcpus": 4}, "poll_interval": "0s"}`, "poll_interval"},
		{TypeAWS, `{"region": "eu-central-1", "quota": {"vcpus": 4}, "regoin": "x"}`, `unknown key "regoin"`},
		{TypeGCE, `{"zone": "europe-west1-b", "quota": {"vcpus": 4}}`, "project"},
		{TypeGCE, `{"project": "my-project", "zone": "Europe", "quota": {"vcpus": 4}}`, "zone"},
		{TypeGCE, `{"project": "my-project", "zone": "europe-west1-b", "quota": {"vcpus": "four"}}`, "quota.vcpus"},
		// Defaults are checked as a template's keys are, when the node
		// starts: a bad one used to pass and then fail every template
		// that leaves the key out, naming the template's key.
		{TypeAWS, `{"region": "eu-central-1", "quota": {"vcpus": 4}, "defaults": {"subnet_id": "subnet-1"}}`, `defaults.subnet_id: "subnet-1" is not a subnet id`},
		{TypeAWS, `{"region": "eu-central-1", "quota": {"vcpus": 4}, "defaults": {"subnet_id": "subnet-0123456789abcdef0", "subnet_tags": {"a": "b"}}}`, "defaults.subnet_id: give a subnet_id or subnet_tags"},
		{TypeAWS, `{"region": "eu-central-1", "quota": {"vcpus": 4}, "defaults": {"instance_type": "T3 small"}}`, "defaults.instance_type"},
		{TypeAWS, `{"region": "eu-central-1", "quota": {"vcpus": 4}, "defaults": {"security_group_ids": ["sg-0123456789abcdef0", "default"]}}`, "defaults.security_group_ids[1]"},
		{TypeGCE, `{"project": "my-project", "zone": "europe-west1-b", "quota": {"vcpus": 4}, "defaults": {"machine_type": "E2 small"}}`, "defaults.machine_type"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			var err error
			if tc.kind == TypeAWS {
				_, err = ParseAWSConfig([]byte(tc.cfg))
			} else {
				_, err = ParseGCEConfig([]byte(tc.cfg))
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
