package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/config"
)

func TestLocalAPIURL(t *testing.T) {
	for addr, want := range map[string]string{
		"127.0.0.1:7700":  "https://127.0.0.1:7700",
		"0.0.0.0:17700":   "https://127.0.0.1:17700",
		"[::]:7700":       "https://127.0.0.1:7700",
		"[::1]:7700":      "https://[::1]:7700",
		"10.0.0.5:7700":   "https://10.0.0.5:7700",
		"node-a.lab:7700": "https://node-a.lab:7700",
		"not an address":  "https://not an address",
		":7700":           "https://127.0.0.1:7700",
	} {
		assert.Equal(t, want, localAPIURL("https", addr), addr)
	}
	dir := t.TempDir()
	require.NoError(t, writeAPIURL(dir, "http", "0.0.0.0:1234"))
	b, err := os.ReadFile(filepath.Join(dir, config.APIURLFile))
	require.NoError(t, err)
	assert.Equal(t, "http://127.0.0.1:1234\n", string(b))
}

func TestAdvertisedAPI(t *testing.T) {
	for _, tc := range []struct{ api, gossip, want string }{
		{"0.0.0.0:7700", "10.0.0.5:7701", "10.0.0.5:7700"},
		{"[::]:7700", "[fd00::5]:7701", "[fd00::5]:7700"},
		{"10.0.0.6:7700", "10.0.0.5:7701", "10.0.0.6:7700"},
		{"0.0.0.0:7700", "no port", "0.0.0.0:7700"},
	} {
		assert.Equal(t, tc.want, advertisedAPI(tc.api, tc.gossip), "%s %s", tc.api, tc.gossip)
	}
}
