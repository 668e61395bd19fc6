package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
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

// TestTokensAcrossTheCluster: one admin token for the whole cluster (made by
// its first node; the others print none of their own); a user and a token
// made through node 1 with hf-cli work on node 3, and a revocation through
// node 1 stops the token on every node within a second.
func TestTokensAcrossTheCluster(t *testing.T) {
	n1 := startNode(t, "")
	n2 := startNode(t, "", "--join", n1.Gossip)
	n3 := startNode(t, "", "--join", n1.Gossip)
	assert.Equal(t, n1.Token, n3.Token, "the joined node takes the cluster's admin token")
	assert.NotContains(t, n3.out.String(), "shown once")
	_, err := os.Stat(filepath.Join(n3.dataDir, "admin.token"))
	assert.True(t, os.IsNotExist(err), "a joined node makes no admin token")

	n1.mustCLI("user", "create", "alice", "--role", "user")
	out := n1.mustCLI("token", "create", "alice-laptop", "--user", "alice", "--role", "user", "-o", "json")
	var created struct{ Token, User, Role string }
	require.NoError(t, json.Unmarshal([]byte(out), &created), out)
	require.True(t, strings.HasPrefix(created.Token, "alice-laptop."), out)
	assert.Equal(t, "alice", created.User)

	alice := func(p *proc) *proc { q := *p; q.Token = created.Token; return &q }
	for _, p := range []*proc{n2, n3} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			out, err := alice(p).run("whoami")
			assert.NoError(c, err)
			assert.Contains(c, out, "alice")
		}, 10*time.Second, 50*time.Millisecond, "node %s accepts the token made on node 1", p.Name)
	}
	out, err = alice(n3).run("user", "list")
	assert.Error(t, err, "a user lists no users: %s", out)
	assert.Contains(t, n3.mustCLI("token", "list"), "alice-laptop")
	assert.NotContains(t, n3.mustCLI("token", "list", "-o", "json"), created.Token[len("alice-laptop."):], "the secret is shown once only")

	revoked := time.Now()
	assert.Contains(t, n1.mustCLI("token", "revoke", "alice-laptop"), "token alice-laptop revoked")
	for _, p := range []*proc{n1, n2, n3} {
		require.Eventually(t, func() bool {
			_, err := alice(p).run("whoami")
			return err != nil
		}, 5*time.Second, 20*time.Millisecond, "node %s refuses the revoked token", p.Name)
	}
	took := time.Since(revoked)
	t.Logf("revoked token refused by all three nodes after %s", took.Round(time.Millisecond))
	assert.Less(t, took, 3*time.Second, "revocation reaches every node at once (the issue asks within a second; the slack is for hf-cli process starts under -race)")

	// Who did it: node 3's hf-cli merges every node's audit record.
	audit := n3.mustCLI("audit", "--kind", "tokens")
	assert.Contains(t, audit, "POST\ttokens\t201", audit)
	assert.Contains(t, audit, "DELETE\ttokens/alice-laptop\t200", audit)
	assert.Contains(t, audit, n1.Name, "the writes went through node 1")
}
