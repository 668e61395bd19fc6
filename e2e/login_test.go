package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/config"
)

// hf-cli login with nothing but HF_DATA_DIR finds the node of that data dir:
// its API's address (here a port the node picked), its token and its CA.
// It used to dial 127.0.0.1:7700 whatever the node listened on.
func TestLoginFindsTheNodeOfADataDir(t *testing.T) {
	p := startNode(t, "")
	b, err := os.ReadFile(filepath.Join(p.dataDir, config.APIURLFile))
	require.NoError(t, err)
	assert.Equal(t, p.API+"\n", string(b), "the node saves where its API is")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "HF_CONFIG_DIR=" + t.TempDir(), "HF_DATA_DIR=" + p.dataDir}
	out, errOut, code := runCLI(ctx, t, env, nil, "login")
	require.Equal(t, 0, code, errOut)
	assert.True(t, strings.HasPrefix(out, "logged in to "+p.API+" "), out)
	out, errOut, code = runCLI(ctx, t, env, nil, "node", "list")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, p.Name, "the profile login saved")

	// A field the server cannot select by is a usage error, as a bad -l is.
	_, errOut, code = runCLI(ctx, t, env, nil, "machine", "list", "--field-selector", "spec.colour=red")
	assert.Equal(t, 2, code, errOut)
	assert.Contains(t, errOut, `hf-cli: --field-selector: field "spec.colour" is not selectable on machines; selectable: metadata.name`)
	_, errOut, code = runCLI(ctx, t, env, nil, "machine", "list", "-l", "a in (")
	assert.Equal(t, 2, code, errOut)
	_, errOut, code = runCLI(ctx, t, env, nil, "machine", "list", "--field-selector", "spec.node="+p.Name)
	assert.Equal(t, 0, code, errOut)
}
