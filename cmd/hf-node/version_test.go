package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/buildinfo"
)

func TestVersionCommand(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"version"}, 0, "version:  dev\n"},
		{[]string{"--version"}, 0, "hf-node version dev\n"},
		{[]string{"version", "-o", "yaml"}, 1, ""},
	} {
		var out, errb bytes.Buffer
		assert.Equal(t, tc.code, run(context.Background(), tc.args, &out, &errb, nil), "%v: %s", tc.args, errb.String())
		assert.Contains(t, out.String(), tc.want, tc.args)
	}
	var out bytes.Buffer
	require.Equal(t, 0, run(context.Background(), []string{"version", "-o", "json"}, &out, &out, nil))
	var info buildinfo.Info
	require.NoError(t, json.Unmarshal(out.Bytes(), &info), out.String())
	assert.Equal(t, "dev", info.Version)
	assert.NotEmpty(t, info.GoVersion)
}
