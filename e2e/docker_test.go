package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/client"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers/docker/dockertest"
	"github.com/hf-fleet/hf/lib/types"
)

// dockerConfig is a node config with one docker driver in label namespace ns
// on network.
func dockerConfig(ns, network string) string {
	return fmt.Sprintf(`drivers:
  - name: docker
    config:
      label_namespace: %q
      network: %q
      stop_timeout: 2s
`, ns, network)
}

// nsContainers lists the containers of namespace ns (what `docker ps -a
// --filter label=<ns>.node` shows): id -> container.
func nsContainers(t require.TestingT, cli *client.Client, ns string) map[string]container.Summary {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("label", ns+".node"))})
	require.NoError(t, err)
	out := map[string]container.Summary{}
	for _, c := range list {
		out[c.ID] = c
	}
	return out
}

// TestDockerThreeNodes is issue 6 acceptance 4: three hf-node processes share
// one engine, each with its own label namespace; six claims bind, two per
// node (as capacity allows), each a running container labelled for its node,
// machine and claim; releasing the claims removes every container; a node
// stopped and started again adopts its running container instead of making a
// new one.
func TestDockerThreeNodes(t *testing.T) {
	cli := dockertest.Client(t)
	// Cleanups run last-in first-out: the nodes stop, then the namespaces'
	// containers go, then the network, then the image.
	img := dockertest.LoadImage(t, cli, "hf-e2e/box:"+randHex(6))
	network := dockertest.NetworkName(t, cli)
	var ns [3]string
	for i := range ns {
		ns[i] = dockertest.Namespace(t, cli)
	}
	nodes := make([]*proc, 3)
	for i := range nodes {
		var extra []string
		if i > 0 {
			extra = []string{"--join", nodes[0].Gossip}
		}
		nodes[i] = startWithConfig(t, "", dockerConfig(ns[i], network), extra...)
	}
	waitUp(t, nodes...)
	n1 := nodes[0]

	// Size the template so that exactly two fit on each node.
	usable := 0.0
	for _, p := range nodes {
		var node types.Node
		require.NoError(t, n1.getJSON(&node, "node", "get", p.Name))
		require.Len(t, node.Spec.Drivers, 1, "only the docker driver: %+v", node.Spec.Drivers)
		require.Equal(t, "docker", node.Spec.Drivers[0].Driver)
		cpu := node.Spec.Drivers[0].Capacity.Usable.CPU
		if usable == 0 || cpu < usable {
			usable = cpu
		}
	}
	require.Positive(t, usable)
	n1.createTemplate(types.MachineTemplate{
		Metadata: types.ObjectMeta{Name: "box"},
		Spec: types.MachineTemplateSpec{
			Resources:             types.Resources{CPU: usable * 0.4, RAMGB: 0.25},
			ProviderConfiguration: map[string]json.RawMessage{"docker": rawJSON(t, map[string]any{"image": map[string]string{"tag": img.Tag}})},
		},
	})

	// Six claims, through all three APIs.
	start := time.Now()
	claims := []string{"d1", "d2", "d3", "d4", "d5", "d6"}
	for i, c := range claims {
		nodes[i%3].mustCLI("claim", "create", c, "--template", "box")
	}
	var bound []types.MachineClaim
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		all, err := n1.claims()
		if !assert.NoError(c, err) {
			return
		}
		bound = bound[:0]
		for _, cl := range all {
			if assert.Equal(c, types.ClaimBound, cl.Status.Phase, "claim %s: %s", cl.Metadata.Name, cl.Status.Reason) {
				bound = append(bound, cl)
			}
		}
		assert.Len(c, bound, len(claims))
	}, 90*time.Second, 200*time.Millisecond, "six claims bound")
	t.Logf("six claims bound in %s", time.Since(start).Round(time.Millisecond))

	machines, err := n1.machines()
	require.NoError(t, err)
	byName := map[string]types.Machine{}
	for _, m := range machines {
		byName[m.Metadata.Name] = m
	}
	for i, p := range nodes {
		got := nsContainers(t, cli, ns[i])
		assert.Len(t, got, 2, "node %d (%s) runs two containers", i+1, p.Name)
		for id, ctr := range got {
			m, ok := byName[ctr.Labels[ns[i]+".machine"]]
			if !assert.True(t, ok, "container %s labels a known machine: %v", id, ctr.Labels) {
				continue
			}
			assert.Equal(t, string(container.StateRunning), string(ctr.State))
			assert.Equal(t, p.Name, ctr.Labels[ns[i]+".node"])
			assert.Equal(t, m.Spec.Claim, ctr.Labels[ns[i]+".claim"])
			assert.Equal(t, p.Name, m.Spec.Node)
			assert.Equal(t, types.MachineRunning, m.Status.Phase)
			if assert.NotNil(t, m.Status.Resource) {
				assert.Equal(t, id, m.Status.Resource.ID, "the machine's resource is the container")
			}
			assert.Equal(t, img.ID, ctr.ImageID)
			insp, err := cli.ContainerInspect(context.Background(), id)
			require.NoError(t, err)
			assert.Contains(t, insp.Config.Env, "HF_CLAIM="+m.Spec.Claim)
			assert.Contains(t, insp.NetworkSettings.Networks, network)
		}
	}

	// Releasing every claim removes every container.
	start = time.Now()
	nodes[1].mustCLI(append([]string{"claim", "delete", "--wait"}, claims...)...)
	t.Logf("six claims released in %s", time.Since(start).Round(time.Millisecond))
	for i := range nodes {
		assert.Empty(t, nsContainers(t, cli, ns[i]), "namespace of node %d", i+1)
	}
	ms, err := n1.machines()
	require.NoError(t, err)
	assert.Empty(t, ms)

	// A restarted node adopts its running container.
	holder, machine := n1.claimWait("r1", "box")
	n1.claimWait("r2", "box")
	idx := slices.IndexFunc(nodes, func(p *proc) bool { return p.Name == holder })
	require.GreaterOrEqual(t, idx, 0)
	p := nodes[idx]
	before := nsContainers(t, cli, ns[idx])
	m, err := p.machine(machine)
	require.NoError(t, err)
	require.NotNil(t, m.Status.Resource)
	cid := m.Status.Resource.ID
	require.Contains(t, before, cid)
	insp, err := cli.ContainerInspect(context.Background(), cid)
	require.NoError(t, err)
	started := insp.State.StartedAt

	p.stop()
	insp, err = cli.ContainerInspect(context.Background(), cid)
	require.NoError(t, err)
	assert.True(t, insp.State.Running, "the container outlives its node")
	var join []string
	if idx == 0 {
		join = []string{"--join", nodes[1].Gossip}
	}
	start = time.Now()
	p = p.restart(join...)
	nodes[idx] = p
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cl, err := nodes[(idx+1)%3].claim("r1")
		if assert.NoError(c, err) {
			assert.Equal(c, types.ClaimBound, cl.Status.Phase)
			assert.Equal(c, machine, cl.Status.Machine)
		}
		m, err := p.machine(machine)
		if assert.NoError(c, err) && assert.NotNil(c, m.Status.Resource) {
			assert.Equal(c, types.MachineRunning, m.Status.Phase)
			assert.Equal(c, cid, m.Status.Resource.ID)
		}
		out, err := p.run("node", "list")
		if assert.NoError(c, err) {
			assert.Equal(c, "Up", nodeRows(out)[p.Name])
		}
	}, 30*time.Second, 200*time.Millisecond, "the restarted node holds its machine again")
	t.Logf("node %d restarted and adopted container %.12s in %s", idx+1, cid, time.Since(start).Round(time.Millisecond))
	after := nsContainers(t, cli, ns[idx])
	assert.Equal(t, sortedKeys(before), sortedKeys(after), "no container was made or removed")
	insp, err = cli.ContainerInspect(context.Background(), cid)
	require.NoError(t, err)
	assert.True(t, insp.State.Running)
	assert.Equal(t, started, insp.State.StartedAt, "the container was not restarted")
	assert.Zero(t, insp.RestartCount)

	p.mustCLI("claim", "delete", "r1", "r2", "--wait")
	for i := range nodes {
		assert.Empty(t, nsContainers(t, cli, ns[i]), "namespace of node %d", i+1)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
