package native

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

// FuzzClaimMetadataStaysData runs a real shell with the environment the driver
// builds for a claim's metadata {key: value}, under an entry that uses the
// value the careless way (unquoted) and the careful way. Whatever the claim
// sends, the value comes out as the same bytes, nothing else runs (no file
// besides the entry's two appears), and a key the rules refuse never reaches
// the environment.
func FuzzClaimMetadataStaysData(f *testing.F) {
	for _, s := range [][2]string{
		{"name", "x; id > /tmp/PWNED #"},
		{"name", "$(touch pwned)"},
		{"name", "`touch pwned`"},
		{"name", "a\nb; touch pwned"},
		{"name", "* ../* > pwned"},
		{"name", "{{.Workspace}}"},
		{"LD_PRELOAD", "/nonexistent/evil.so"},
		{"NODE_OPTIONS", "--require ./evil.js"},
		{"BASH_ENV", "./evil.sh"},
		{"ENV", "./evil.sh"},
		{"IFS", "e"},
		{"PATH", "."},
		{"HF_NATIVE_ID", "spoof"},
		{"my-key", "x"},
	} {
		f.Add(s[0], s[1])
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		f.Fatalf("no sh: %v", err)
	}
	f.Fuzz(func(t *testing.T, key, value string) {
		meta := map[string]string{key: value}
		tmpl := types.MachineTemplate{Metadata: types.ObjectMeta{Name: "fuzz"},
			Spec: types.MachineTemplateSpec{ClaimMetadata: []types.MetadataKey{{Name: key}}}}
		accepted := tmpl.CheckClaimMetadata(meta) == nil

		dir := t.TempDir()
		entry := "true"
		if accepted {
			// The key is the admin's (declared), so it may be in the entry;
			// the value is the claim's and reaches it only through the env.
			entry = "echo greeting $" + key + " > careless.out; printf '%s' \"$" + key + "\" > careful.out"
		}
		env := entryEnv(tmpl, nil, meta, "hf-fuzz", "hf-fuzz", dir, sh)
		cmd := exec.Command(sh, "-c", entry)
		cmd.Dir, cmd.Env = dir, env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Run(), "entry failed: %s", stderr.String())

		if !accepted {
			for _, e := range env {
				if k, _, _ := strings.Cut(e, "="); k == key && k != "HOME" && k != "PATH" && k != "USER" &&
					k != "LOGNAME" && k != "SHELL" && k != envMachineID {
					t.Fatalf("refused key %q reached the environment", key)
				}
			}
			assert.Contains(t, env, envMachineID+"=hf-fuzz", "the driver's own variables are its own")
			assert.Contains(t, env, "PATH=/usr/local/bin:/usr/bin:/bin")
			return
		}
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		slices.Sort(names)
		assert.Equal(t, []string{"careful.out", "careless.out"}, names, "nothing but the entry's own files")
		got, err := os.ReadFile(filepath.Join(dir, "careful.out"))
		require.NoError(t, err)
		assert.Equal(t, value, string(got), "the value arrives as the same bytes")
	})
}
