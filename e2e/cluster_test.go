package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/types"
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

// TestNodeRestartedWithoutJoin: a node stopped gracefully and started again
// without --join, as its service runs it, and here on another gossip port,
// finds its cluster through the nodes in its store. It stayed alone, and
// both sides said the cluster was healthy.
func TestNodeRestartedWithoutJoin(t *testing.T) {
	n1 := startNode(t, "")
	n2 := startNode(t, "", "--join", n1.Gossip)
	seen := func(p *proc, name, phase string) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			rows := nodeRows(p.mustCLI("node", "list"))
			assert.Equal(c, phase, rows[name], "node %s as seen from %s: %v", name, p.Name, rows)
		}, 20*time.Second, 200*time.Millisecond)
	}
	seen(n1, n2.Name, "Up")
	require.Eventually(t, func() bool {
		_, err := os.Stat(filepath.Join(n2.dataDir, "admin.token"))
		return err == nil
	}, 20*time.Second, 100*time.Millisecond, "the joined node saves its local admin token")
	n2.stop()
	seen(n1, n2.Name, "Down")

	n2 = startNode(t, n2.dataDir) // a fresh gossip port: n1 cannot know it
	seen(n1, n2.Name, "Up")
	for _, p := range []*proc{n1, n2} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Contains(c, httpGet(t, p.httpClient(), p.API+"/metrics"), "hf_cluster_members 2\n", "members as %s sees them", p.Name)
		}, 20*time.Second, 200*time.Millisecond)
	}
}

// TestTokensAcrossTheCluster: one admin token for the whole cluster (made by
// its first node; the others print none of their own); a user and a token
// made through node 1 with hf-cli work on node 3, and a revocation through
// node 1 stops the token on every node within a second.
func TestTokensAcrossTheCluster(t *testing.T) {
	n1 := startNode(t, "")
	joiners := startNodes(t, 2, "--join", n1.Gossip)
	n2, n3 := joiners[0], joiners[1]
	assert.Equal(t, n1.Token, n3.Token, "the joined node takes the cluster's admin token")
	// The two joined at the same instant, so each learned of the other two
	// at once: each must pull the first node's records (its users and
	// tokens among them) at once, not at the next periodic round 30 s
	// later (in half of such starts one of them pulled from the other
	// newcomer, which had nothing yet). startNodes waits for the admin
	// token to work on each (joinedToken, 10 s).
	assert.NotContains(t, n3.out.String(), "shown once")
	// Its host gets a local admin token of the cluster's admin user, so
	// hf-cli there is signed in without copying files.
	var local []byte
	require.Eventually(t, func() bool {
		var err error
		local, err = os.ReadFile(filepath.Join(n3.dataDir, "admin.token"))
		return err == nil
	}, 10*time.Second, 50*time.Millisecond)
	n3local := *n3
	n3local.Token = strings.TrimSpace(string(local))
	assert.True(t, strings.HasPrefix(n3local.Token, "local-"), n3local.Token)
	assert.Contains(t, n3local.mustCLI("whoami"), "admin")

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
	out, err := alice(n3).run("user", "list")
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

// TestClusterSecrets: a new cluster is encrypted and serves TLS from the
// start; a node joins with a join token, one without refuses to start and
// says how, one with another key never gets in; the gossip key is rotated
// on all three nodes while claims keep binding.
func TestClusterSecrets(t *testing.T) {
	n1 := startNode(t, "")
	n2 := startNode(t, "", "--join", n1.Gossip) // the harness fetches a join token from n1
	n3 := startNode(t, "", "--join", n2.Gossip)
	for _, p := range []*proc{n1, n2, n3} {
		assert.True(t, strings.HasPrefix(p.API, "https://"), p.API)
		assert.Contains(t, p.out.String(), "encrypted=true")
	}
	ca, err := os.ReadFile(n1.caFile())
	require.NoError(t, err)
	ca3, err := os.ReadFile(n3.caFile())
	require.NoError(t, err)
	assert.Equal(t, ca, ca3, "one CA for the cluster")
	waitUp := func(want int) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			rows := nodeRows(n1.mustCLI("node", "list"))
			up := 0
			for _, ph := range rows {
				if ph == "Up" {
					up++
				}
			}
			assert.Equal(c, want, up, "%v", rows)
		}, 20*time.Second, 200*time.Millisecond)
	}
	waitUp(3)

	// No token: refused at start, saying what to do.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(bin, "hf-node"), "--data-dir", t.TempDir(), "--api", "127.0.0.1:0",
		"--gossip", "127.0.0.1:0", "--join", n1.Gossip).CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "start it with --join-token")
	// Another key: it runs alone and says why it cannot join.
	cfg := filepath.Join(t.TempDir(), "hf.yml")
	require.NoError(t, os.WriteFile(cfg, []byte("cluster:\n  key: "+base64.StdEncoding.EncodeToString(make([]byte, 32))+"\n"), 0o600))
	sctx, scancel := context.WithTimeout(context.Background(), 8*time.Second)
	defer scancel()
	out, _ = exec.CommandContext(sctx, filepath.Join(bin, "hf-node"), "--config", cfg, "--data-dir", t.TempDir(), "--api", "127.0.0.1:0",
		"--gossip", "127.0.0.1:0", "--join", n1.Gossip).CombinedOutput()
	assert.Contains(t, string(out), "gossip key is not this node's", "%s", out)
	assert.Len(t, nodeRows(n1.mustCLI("node", "list")), 3, "the stranger never joined")

	// Rotate the key while claims keep binding: one claim after another
	// through node 2, each bound and deleted.
	tctx, tcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer tcancel()
	_, errOut, code := n1.cli(tctx, strings.NewReader(smallTemplate), "template", "create", "-f", "-")
	require.Equal(t, 0, code, errOut)
	cl, err := client.New(n2.API, n2.Token, client.WithHTTPClient(n2.httpClient()))
	require.NoError(t, err)
	stop := make(chan struct{})
	var bound, failed atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("rot-%d", i)
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			_, err := cl.Create(ctx, &types.MachineClaim{Metadata: types.ObjectMeta{Name: name}, Spec: types.MachineClaimSpec{MachineTemplate: "small"}})
			for err == nil {
				var o types.Object
				if o, err = cl.Get(ctx, types.KindMachineClaim, name); err == nil && o.(*types.MachineClaim).Status.Phase == types.ClaimBound {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err == nil {
				bound.Add(1)
				err = cl.Delete(ctx, types.KindMachineClaim, name)
			}
			if err != nil {
				failed.Add(1)
				t.Logf("claim %s: %v", name, err)
			}
			cancel()
		}
	}()
	time.Sleep(300 * time.Millisecond)
	before := n1.mustCLI("cluster", "rotate-key")
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	t.Logf("%s; %d claims bound during the rotation", strings.TrimSpace(before), bound.Load())
	assert.Contains(t, before, "in use on every node")
	assert.Zero(t, failed.Load(), "every claim bound through the rotation")
	assert.Positive(t, bound.Load())
	var ids []string
	for _, p := range []*proc{n1, n2, n3} {
		var ks client.GossipKeys
		c, err := client.New(p.API, p.Token, client.WithHTTPClient(p.httpClient()))
		require.NoError(t, err)
		got, err := c.GossipKeys(context.Background())
		require.NoError(t, err)
		ks = *got
		assert.Len(t, ks.Keys, 1, "the old key is gone from %s", p.Name)
		ids = append(ids, ks.Primary)
	}
	assert.Equal(t, ids[0], ids[1])
	assert.Equal(t, ids[0], ids[2])
	// The cluster still works on the new key, also for a node that
	// restarts (it reads the rotated key back) and one that joins now.
	n3.stop()
	n3 = n3.restart()
	n4 := startNode(t, "", "--join", n3.Gossip)
	waitUp(4)
	_ = n4
}
