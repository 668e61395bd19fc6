package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

const smallTemplate = `kind: MachineTemplate
metadata: {name: small}
spec:
  resources: {cpu: 1, ramGB: 1}
  providerConfiguration: {test: {}}
`

var boundIn = regexp.MustCompile(`Bound on node \S+ \(machine (m-[0-9a-f]+)\) in (\S+)`)

// TestSingleNodeEndToEnd is acceptance 1 and 2 of the foundation: a node with
// no config, a template and a claim through hf-cli, restart keeps everything.
func TestSingleNodeEndToEnd(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	n := startNode(t, "")
	require.NotEmpty(t, n.Token)
	require.True(t, strings.HasPrefix(n.API, "https://"), "the API serves TLS by default: %s", n.API)
	checkDefaultNativeMode(t, n)

	out, errOut, code := n.cli(ctx, strings.NewReader(smallTemplate), "template", "create", "-f", "-")
	require.Equal(t, 0, code, out+errOut)

	start := time.Now()
	out, errOut, code = n.cli(ctx, nil, "claim", "create", "c1", "--template", "small", "--wait")
	elapsed := time.Since(start)
	require.Equal(t, 0, code, out+errOut)
	m := boundIn.FindStringSubmatch(errOut + out)
	require.NotNil(t, m, "no Bound line in %q", errOut+out)
	machine := m[1]
	lat, err := time.ParseDuration(m[2])
	require.NoError(t, err)
	// Issue 2's acceptance: "reaches Bound in well under a second" (it takes
	// a few milliseconds; the margin is for a loaded CI machine).
	assert.Less(t, lat, time.Second, "claim->Bound latency from the claim's phase times")
	t.Logf("claim bound in %s (hf-cli round trip %s)", lat, elapsed)

	list := n.mustCLI("machine", "list")
	assert.Contains(t, list, machine)
	assert.Contains(t, list, "Running")

	// /metrics shows the fleet as this node sees it.
	metrics := httpGet(t, n.httpClient(), n.API+"/metrics")
	for _, line := range []string{`hf_claims{phase="Bound"} 1`, `hf_machines{phase="Running"} 1`,
		`hf_claims_bound_total{how="allocated"} 1`, `hf_cluster_members 1`, `hf_node_machines{driver="test"} 1`,
		`hf_claim_bind_seconds_count 1`,
		// Counters are there from the start, at zero.
		`hf_machines_lost_total 0`, `hf_allocation_failures_total{driver="test"} 0`, `hf_anti_entropy_rounds_total{result="failed"} 0`} {
		assert.Contains(t, metrics, line+"\n")
	}
	assert.Contains(t, metrics, "\nhf_store_disk_free_bytes ", "how full the store's disk is")
	assert.Contains(t, metrics, "\nhf_store_disk_needed_bytes ")
	// The version is "dev", or the module version Go stamps from the
	// checkout (v0.0.0-<time>-<commit>) when the build records VCS data.
	assert.Regexp(t, `hf_build_info\{goversion="go[^"]+",revision="[^"]*",version="(dev|v[^"]+)"\} 1\n`, metrics)
	assert.Regexp(t, `hf_node_ram_bytes\{driver="test",kind="usable"\} 8\.589934592e\+09\n`, metrics, "8 GiB in bytes")
	assert.Regexp(t, `hf_node_cpus\{driver="test",kind="used"\} 1\n`, metrics)

	// Restart: everything is still there.
	n.stop()
	n = startNode(t, n.dataDir)
	js := n.mustCLI("claim", "get", "c1", "-o", "json")
	var claim struct {
		Status struct{ Phase, Machine string }
	}
	require.NoError(t, json.Unmarshal([]byte(js), &claim), js)
	assert.Equal(t, "Bound", claim.Status.Phase)
	assert.Equal(t, machine, claim.Status.Machine)
	assert.Contains(t, n.mustCLI("template", "list"), "small")
	assert.Contains(t, n.mustCLI("machine", "list"), machine)

	// Deleting the claim removes its machine.
	n.mustCLI("claim", "delete", "c1", "--wait")
	assert.NotContains(t, n.mustCLI("machine", "list"), machine)

	// The load command measures the node and cleans up after itself (30
	// claims of a tenth of a CPU fit the default test driver's 4 CPUs).
	out, errOut, code = n.cli(ctx, strings.NewReader(strings.ReplaceAll(strings.ReplaceAll(smallTemplate, "small", "tiny"), "cpu: 1, ramGB: 1", "cpu: 0.1, ramGB: 0.1")),
		"template", "create", "-f", "-")
	require.Equal(t, 0, code, out+errOut)
	// A user's token may bench: its claims are the user's, labelled outside
	// the system's keys.
	n.mustCLI("user", "create", "benchuser", "--role", "user")
	tok, errOut, code := n.cli(ctx, nil, "token", "create", "bench-tok", "--user", "benchuser", "--role", "user", "-o", "json")
	require.Equal(t, 0, code, tok+errOut)
	var userTok struct{ Token string }
	require.NoError(t, json.Unmarshal([]byte(tok), &userTok), tok)
	out, errOut, code = n.cli(ctx, nil, "--token", userTok.Token, "bench", "claims", "--template", "tiny", "--count", "30", "--concurrency", "5", "-o", "json")
	require.Equal(t, 0, code, out+errOut)
	var bench struct {
		Claims, Bound, Failed int
		PerSecond             float64
		LatencyMs             struct{ P50, P99 float64 }
	}
	require.NoError(t, json.Unmarshal([]byte(out), &bench), out)
	assert.Equal(t, 30, bench.Bound, errOut)
	assert.Zero(t, bench.Failed)
	t.Logf("hf-cli bench claims: %.0f claims/s, p50 %.1f ms, p99 %.1f ms", bench.PerSecond, bench.LatencyMs.P50, bench.LatencyMs.P99)
	require.Eventually(t, func() bool {
		return !strings.Contains(n.mustCLI("claim", "list"), "bench-") && !strings.Contains(n.mustCLI("machine", "list"), "Running")
	}, 30*time.Second, 100*time.Millisecond, "the bench claims and their machines are gone")

	// Errors: wrong token and unknown names give the documented exit codes.
	_, _, code = n.cli(ctx, nil, "claim", "get", "nope")
	assert.Equal(t, 3, code)
	bad := *n
	bad.Token = "wrong-token-wrong-token"
	_, errOut, code = bad.cli(ctx, nil, "claim", "list")
	assert.Equal(t, 4, code, errOut)
}

// checkDefaultNativeMode: with no config the node adds the native driver in
// the mode its user allows, and as root that is a fresh user per machine,
// never machines running as root.
func checkDefaultNativeMode(t *testing.T, n *proc) {
	t.Helper()
	var node types.Node
	require.NoError(t, json.Unmarshal([]byte(n.mustCLI("node", "get", n.Name, "-o", "json")), &node))
	for _, d := range node.Spec.Drivers {
		if d.Driver != "native" {
			continue
		}
		if os.Geteuid() == 0 {
			assert.NotContains(t, d.Status, "unprivileged", "as root the default native driver makes a user per machine")
		} else {
			assert.Contains(t, d.Status, "unprivileged")
		}
		return
	}
	t.Fatalf("no native driver on a node with no config: %+v", node.Spec.Drivers)
}

// httpGet returns the body of a 200 answer to GET url.
func httpGet(t *testing.T, hc *http.Client, url string) string {
	t.Helper()
	resp, err := hc.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	return string(body)
}
