package e2e

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/hf-fleet/hf/lib/types"
)

// A node whose disk fills up in a burst of claims stays up: the API refuses
// new work with 507 and /readyz says why, the claims it took all end Bound
// on a machine that names them, and once space is freed it takes claims
// again. It died of SIGBUS (badger writes through maps of sparse files),
// and claims whose election or give-back the store refused stayed Requested.
func TestFullDiskNodeStaysUpAndFinishesItsClaims(t *testing.T) {
	if os.Geteuid() != 0 {
		unavailable(t, "mounting a small tmpfs as the node's disk needs root")
	}
	disk := t.TempDir()
	require.NoError(t, unix.Mount("tmpfs", disk, "tmpfs", 0, "size=160m,mode=0700"))
	t.Cleanup(func() { _ = unix.Unmount(disk, unix.MNT_DETACH) })
	n := startWithConfig(t, filepath.Join(disk, "data"), "drivers:\n  - name: test\n    config: {cpus: 100000, ram_gb: 100000}\n")
	n.create("kind: MachineTemplate\nmetadata: {name: small}\nspec:\n  resources: {cpu: 1, ramGB: 1}\n  providerConfiguration: {test: {}}\n")

	// Leave the store 120 MiB: a few thousand claims fit before it declines.
	var st syscall.Statfs_t
	require.NoError(t, syscall.Statfs(disk, &st))
	free := int64(st.Bavail) * int64(st.Bsize)
	filler := filepath.Join(disk, "filler")
	f, err := os.Create(filler)
	require.NoError(t, err)
	require.NoError(t, unix.Fallocate(int(f.Fd()), 0, 0, free-120<<20))
	require.NoError(t, f.Close())

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, errOut, code := n.cli(ctx, nil, "bench", "claims", "--template", "small", "--count", "40000", "--concurrency", "16", "--keep")
	require.NotEqual(t, 0, code, "the disk could not hold 40,000 claims: %s", out)
	assert.Contains(t, errOut, "disk is (nearly) full", "the refusal says why")
	select {
	case <-n.done:
		t.Fatalf("hf-node died:\n%s", n.out.String())
	default:
	}
	ready := httpGetStatus(t, n, "/readyz")
	assert.Equal(t, 503, ready, "not ready while the disk is nearly full")
	req, err := http.NewRequest(http.MethodPost, n.API+"/api/v1/machineclaims",
		strings.NewReader(`{"kind":"MachineClaim","metadata":{"name":"one-more"},"spec":{"machineTemplate":"small"}}`))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+n.Token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := n.httpClient().Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusInsufficientStorage, resp.StatusCode, "%s", body)
	assert.Contains(t, string(body), `"code":"unavailable"`)
	assert.NotContains(t, string(body), disk, "the data dir stays the operator's to know")

	// What it took ends Bound, each on a machine of its own that names it.
	var claims []types.MachineClaim
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var err error
		claims, err = n.claims()
		require.NoError(c, err)
		for _, cl := range claims {
			assert.Equal(c, types.ClaimBound, cl.Status.Phase, "claim %s: %s", cl.Metadata.Name, cl.Status.Reason)
		}
	}, 60*time.Second, time.Second)
	require.NotEmpty(t, claims)
	machines, err := n.machines()
	require.NoError(t, err)
	byName := map[string]types.Machine{}
	for _, m := range machines {
		byName[m.Metadata.Name] = m
	}
	assert.Len(t, machines, len(claims), "one machine per claim, none left over")
	for _, cl := range claims {
		m, ok := byName[cl.Status.Machine]
		if assert.True(t, ok, "claim %s's machine %s", cl.Metadata.Name, cl.Status.Machine) {
			assert.Equal(t, cl.Metadata.Name, m.Spec.Claim)
			assert.Equal(t, types.MachineRunning, m.Status.Phase)
		}
	}
	t.Logf("%d claims taken and bound before the disk filled", len(claims))

	// Room again: ready, and claims are taken.
	require.NoError(t, os.Remove(filler))
	require.Eventually(t, func() bool { return httpGetStatus(t, n, "/readyz") == 200 }, 30*time.Second, 100*time.Millisecond)
	n.claimWait("after", "small")
	assert.False(t, strings.Contains(n.out.String(), "SIGBUS"))
}

// httpGetStatus is the status of GET path on p's API.
func httpGetStatus(t *testing.T, p *proc, path string) int {
	t.Helper()
	resp, err := p.httpClient().Get(p.API + path)
	require.NoError(t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}
