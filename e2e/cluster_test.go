package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nodeRows parses `hf-cli node list` (tab-separated when piped): name -> phase.
func nodeRows(out string) map[string]string {
	rows := map[string]string{}
	for i, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(line, "\t")
		if i == 0 || len(f) < 2 {
			continue
		}
		rows[f[0]] = f[1]
	}
	return rows
}

// TestThreeProcessCluster: three hf-node processes joined by flags see the same
// three nodes; kill -9 of one shows it Down on the others within 10 s.
func TestThreeProcessCluster(t *testing.T) {
	n1 := startNode(t, "")
	n2 := startNode(t, "", "--join", n1.Gossip)
	n3 := startNode(t, "", "--join", n1.Gossip)
	all := []*proc{n1, n2, n3}
	names := []string{n1.Name, n2.Name, n3.Name}

	for _, p := range all {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			rows := nodeRows(p.mustCLI("node", "list"))
			for _, name := range names {
				assert.Equal(c, "Up", rows[name], "node %s as seen from %s: %v", name, p.Name, rows)
			}
		}, 15*time.Second, 200*time.Millisecond)
	}

	killed := time.Now()
	n3.kill()
	for _, p := range []*proc{n1, n2} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			rows := nodeRows(p.mustCLI("node", "list"))
			assert.Equal(c, "Down", rows[n3.Name], "from %s: %v", p.Name, rows)
			assert.Equal(c, "Up", rows[n1.Name])
			assert.Equal(c, "Up", rows[n2.Name])
		}, 10*time.Second, 200*time.Millisecond)
	}
	t.Logf("killed node shown down after %s", time.Since(killed).Round(10*time.Millisecond))
}
