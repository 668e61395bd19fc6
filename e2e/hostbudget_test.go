package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers/docker/dockertest"
	"github.com/hf-fleet/hf/lib/types"
)

// TestNativeAndDockerShareTheHost is the host-budget rule with the real
// drivers on one node: the native and the docker driver both report this
// host's CPUs, and together they bind machines of half the host's CPUs
// each two at a time, not four (each driver counting the whole host, as
// they once did, bound two each).
func TestNativeAndDockerShareTheHost(t *testing.T) {
	needRoot(t)
	cli := dockertest.Client(t)
	img := dockertest.LoadImage(t, cli, "hf-e2e/box:"+randHex(6))
	network := dockertest.NetworkName(t, cli)
	ns := dockertest.Namespace(t, cli)
	prefix := "hfh" + randHex(2) + "-"
	cleanupUsers(t, prefix)
	host := nativeHost(t)
	cfg := nativeConfig(prefix, host) + fmt.Sprintf(`  - name: docker
    config:
      label_namespace: %q
      network: %q
      stop_timeout: 2s
`, ns, network)
	n := startWithConfig(t, "", cfg)
	var node types.Node
	require.NoError(t, n.getJSON(&node, "node", "get", n.Name))
	require.Len(t, node.Spec.Drivers, 2, "%+v", node.Spec.Drivers)
	half := 0.0
	for _, d := range node.Spec.Drivers {
		if half == 0 || d.Capacity.Usable.CPU/2 < half {
			half = d.Capacity.Usable.CPU / 2
		}
	}
	require.Positive(t, half)
	n.createTemplate(types.MachineTemplate{
		Metadata: types.ObjectMeta{Name: "on-native"},
		Spec: types.MachineTemplateSpec{Resources: types.Resources{CPU: half, RAMGB: 0.1},
			ProviderConfiguration: map[string]json.RawMessage{"native": rawJSON(t, map[string]any{"entry": "exec sleep 300"})}},
	})
	n.createTemplate(types.MachineTemplate{
		Metadata: types.ObjectMeta{Name: "on-docker"},
		Spec: types.MachineTemplateSpec{Resources: types.Resources{CPU: half, RAMGB: 0.1},
			ProviderConfiguration: map[string]json.RawMessage{"docker": rawJSON(t, map[string]any{"image": map[string]string{"tag": img.Tag}})}},
	})
	for _, c := range []string{"n-1", "d-1", "n-2", "d-2"} {
		tmpl := "on-native"
		if strings.HasPrefix(c, "d-") {
			tmpl = "on-docker"
		}
		n.mustCLI("claim", "create", c, "--template", tmpl)
	}
	phases := func() (bound, waiting int, reasons []string) {
		for _, c := range []string{"n-1", "d-1", "n-2", "d-2"} {
			var cl types.MachineClaim
			require.NoError(t, n.getJSON(&cl, "claim", "get", c))
			switch cl.Status.Phase {
			case types.ClaimBound:
				bound++
			case types.ClaimRequested:
				waiting++
				reasons = append(reasons, cl.Status.Reason)
			}
		}
		return
	}
	require.Eventually(t, func() bool { b, _, _ := phases(); return b == 2 }, 60*time.Second, 200*time.Millisecond)
	time.Sleep(2 * time.Second) // room for a wrong third bind to show
	bound, waiting, reasons := phases()
	assert.Equal(t, 2, bound, "the host's CPUs once, not once per driver")
	assert.Equal(t, 2, waiting, "%v", reasons)
	// The waiting claims go first: a bound one deleted first would free
	// its CPUs for a waiting one, which would then start being bound while
	// its own delete is on the way. --wait waits for a machine being made
	// once it has been stored, but a reservation racing the delete can
	// land after the wait looked (the node releases it then); deleting in
	// this order leaves no such race for the check below.
	var waitingClaims, boundClaims []string
	for _, c := range []string{"n-1", "d-1", "n-2", "d-2"} {
		var cl types.MachineClaim
		require.NoError(t, n.getJSON(&cl, "claim", "get", c))
		if cl.Status.Phase == types.ClaimBound {
			boundClaims = append(boundClaims, c)
		} else {
			waitingClaims = append(waitingClaims, c)
		}
	}
	for _, c := range append(waitingClaims, boundClaims...) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		_, errOut, code := n.cli(ctx, nil, "claim", "delete", c, "--wait")
		cancel()
		assert.Equal(t, 0, code, "delete %s: %s", c, errOut)
	}
	assert.Empty(t, usersWithPrefix(t, prefix))
}
