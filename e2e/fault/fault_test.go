package fault

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestFaults is the short form of the fault harness: one run of each fault
// with 200 claims over three hosts, 40 a second, so the fault strikes while
// they arrive (hf-fault runs the long form). The lost
// grace is 5 s here, so the long partition outlasts it and the majority
// re-binds the cut-off host's claims.
func TestFaults(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("the fault harness needs root (network namespaces, iptables); CI runs as root")
		}
		t.Skip("the fault harness needs root (network namespaces, iptables)")
	}
	bin, err := Build(t.TempDir())
	require.NoError(t, err)
	for _, sc := range []Scenario{Kill(2 * time.Second), Partition(3 * time.Second), Partition(12 * time.Second), Loss(0.05)} {
		t.Run(sc.Name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			dir := t.TempDir()
			l, err := New(ctx, Options{Bin: bin, Dir: dir, LostGrace: 5 * time.Second, BindTimeout: time.Minute, Logf: t.Logf})
			require.NoError(t, err)
			id := l.id
			res, err := Execute(ctx, l, sc, 200, 40)
			if err != nil || len(res.Violations) > 0 {
				for _, h := range l.Hosts {
					t.Logf("%s log:\n%s", h.Name, tail(h.Log(), 40))
				}
			}
			l.Close()
			require.NoError(t, err)
			t.Log(res)
			assert.Empty(t, res.Violations)
			assert.Equal(t, 200, res.Bound+res.Failed)
			// Nothing of the lab is left: namespaces, links, processes.
			out, err := exec.Command("ip", "netns", "list").CombinedOutput()
			require.NoError(t, err)
			assert.NotContains(t, string(out), "hf-"+id)
			out, _ = exec.Command("pgrep", "-f", dir).CombinedOutput()
			assert.Empty(t, strings.TrimSpace(string(out)), "hf-node processes left")
		})
	}
}
