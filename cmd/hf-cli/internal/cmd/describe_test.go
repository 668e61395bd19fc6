package cmd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/client/clienttest"
	"github.com/hf-fleet/hf/lib/types"
)

func TestDescribeClaim(t *testing.T) {
	c := newCLI(t)
	t0 := time.Date(2030, 1, 1, 10, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return t0.Add(time.Minute) }
	c.srv.Put(&types.MachineTemplate{TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate}, Metadata: types.ObjectMeta{Name: "small"},
		Spec: types.MachineTemplateSpec{Resources: types.Resources{CPU: 1, RAMGB: 2}}})
	c.srv.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "n1"},
		Spec: types.NodeSpec{APIAddress: "10.0.0.1:7700"}, Status: types.NodeStatus{Phase: types.NodeUp, Machines: 1}})
	c.srv.Put(&types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: "m-1"},
		Spec:   types.MachineSpec{Node: "n1", Driver: "docker", Claim: "c1", ConnectEndpoints: map[string]string{"ssh": "10.0.0.1:2222"}},
		Status: types.MachineStatus{Phase: types.MachineRunning}})
	claim := &types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim}, Metadata: types.ObjectMeta{Name: "c1", CreatedAt: t0},
		Spec: types.MachineClaimSpec{MachineTemplate: "small", User: "alice"},
		Status: types.MachineClaimStatus{Phase: types.ClaimBound, Machine: "m-1", Node: "n1",
			PhaseTimes: types.MakePhaseTimes(types.PhaseTime{Phase: "Requested", At: t0}, types.PhaseTime{Phase: "Bound", At: t0.Add(40 * time.Millisecond)}),
			Conditions: types.Conditions{{Type: "Bound", Status: types.ConditionTrue, Reason: "Allocated", Message: "on n1", LastTransitionTime: t0.Add(40 * time.Millisecond)}}}}
	c.srv.Put(claim)

	r := c.run("describe", "claim", "c1")
	require.Equal(t, 0, r.code, r.err)
	for _, want := range []string{
		"Name:        c1\n", "Kind:        MachineClaim\n", "Phase:       Bound\n",
		"Spec:\n", "  machineTemplate: small\n", "  user: alice\n",
		"Conditions:\n", "Bound  True    Allocated  on n1",
		"History:\n", "Requested  2030-01-01T10:00:00Z  0s", "Bound      2030-01-01T10:00:00Z  40ms",
		"Related:\n", "machine m-1: Running on node n1, driver docker, connect ssh=10.0.0.1:2222",
		"node n1: Up, api 10.0.0.1:7700, 1 machines", "template small: 1 CPU, 2 GiB RAM",
	} {
		assert.Contains(t, r.out, want)
	}

	r = c.run("describe", "claim", "c2")
	assert.Equal(t, 3, r.code)
	assert.Contains(t, r.err, "did you mean c1?")
	r = c.run("describe", "cliam", "c1")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.err, `unknown kind "cliam"; did you mean "claim"?`)
	describes := func(kind, name, want string) {
		t.Helper()
		r := c.run("describe", kind, name)
		require.Equal(t, 0, r.code, r.err)
		assert.Contains(t, r.out, want)
	}
	describes("machine", "m-1", "claim c1: Bound, user alice")
	describes("node", "n1", "machine m-1: Running, claim c1, driver docker")
	assert.Contains(t, queriesOf(c, "/api/v1/machines"), "fieldSelector=spec.node%3Dn1&limit=500",
		"the node's machines only, not the fleet's")

	// A warm machine and a claim without a user leave nothing blank.
	c.srv.Put(&types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: "m-2"},
		Spec: types.MachineSpec{Node: "n1", Driver: "test", Claim: "c3"}, Status: types.MachineStatus{Phase: types.MachineRunning}})
	c.srv.Put(&types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: "m-3"},
		Spec: types.MachineSpec{Node: "n1", Driver: "test"}, Status: types.MachineStatus{Phase: types.MachineRunning}})
	c.srv.Put(&types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim}, Metadata: types.ObjectMeta{Name: "c3"},
		Spec: types.MachineClaimSpec{MachineTemplate: "small"}, Status: types.MachineClaimStatus{Phase: types.ClaimBound, Machine: "m-2"}})
	describes("machine", "m-2", "claim c3: Bound\n")
	describes("node", "n1", "machine m-3: Running, unclaimed, driver test")
}

// queriesOf lists the queries of the requests the CLI sent to path.
func queriesOf(c *cli, path string) []string {
	var out []string
	for _, r := range c.srv.Requests() {
		if r.Path == path {
			out = append(out, r.Query)
		}
	}
	return out
}

// list --field-selector asks the server to narrow the list; repeated flags
// must all hold.
func TestListFieldSelector(t *testing.T) {
	c := newCLI(t)
	r := c.run("machine", "list", "--field-selector", "spec.node=n1", "--field-selector", "status.phase!=Failed", "-l", "tier=gold")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, []string{"fieldSelector=spec.node%3Dn1%2Cstatus.phase%21%3DFailed&labelSelector=tier%3Dgold&limit=500"}, queriesOf(c, "/api/v1/machines"))
}

// Shell completion offers commands, kinds and the names the API has.
func TestCompletionAndTypos(t *testing.T) {
	c := newCLI(t)
	for _, n := range []string{"alpha", "alpine", "beta"} {
		c.srv.Put(&types.MachineTemplate{TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate}, Metadata: types.ObjectMeta{Name: n}})
	}
	r := c.run("__complete", "template", "get", "al")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, []string{"alpha", "alpine", ":4"}, strings.Fields(r.out))
	r = c.run("__complete", "describe", "temp")
	assert.Contains(t, strings.Fields(r.out), "template")
	r = c.run("__complete", "describe", "template", "b")
	assert.Equal(t, []string{"beta", ":4"}, strings.Fields(r.out))
	r = c.run("completion", "bash")
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.out, "bash completion")

	r = c.run("tempalte", "list")
	assert.NotEqual(t, 0, r.code)
	assert.Contains(t, r.err, `did you mean "template"?`)
	r = c.run("template", "get", "alpah")
	assert.Equal(t, 3, r.code)
	assert.Contains(t, r.err, "did you mean alpha")
}

// login checks the endpoint with the token and keeps both as the current
// profile; a token can be typed in; a bad one is refused and nothing saved.
func TestLogin(t *testing.T) {
	c := newCLI(t)
	delete(c.env, "HF_ENDPOINT")
	delete(c.env, "HF_TOKEN")
	r := c.run("login", c.srv.URL, "--token", "wrong-token-0000")
	assert.Equal(t, ExitAuth, r.code, r.err)
	r = c.run("whoami")
	assert.NotEqual(t, 0, r.code, "nothing was saved")

	r = c.run("login", c.srv.URL)
	assert.Equal(t, ExitUsage, r.code, r.err)
	assert.Contains(t, r.err, filepath.Join(localDataDir(), "admin.token"), "says where it looked for a local node's token")
	assert.Contains(t, r.err, "HF_DATA_DIR")
	// An endpoint elsewhere never gets the local token: said so, not that
	// the file is missing.
	c.localToken = func() (string, error) { return clienttest.Token, nil }
	r = c.run("login", "https://10.0.0.5:7700")
	assert.Equal(t, ExitUsage, r.code, r.err)
	assert.Contains(t, r.err, "not sent to https://10.0.0.5:7700: not an address of this host's loopback")
	c.localToken = nil

	c.stdin = clienttest.Token + "\n"
	r = c.run("login", c.srv.URL, "--name", "lab")
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.err, "token: ")
	assert.Contains(t, r.out, `profile "lab" is current`)
	c.stdin = ""
	r = c.run("whoami")
	require.Equal(t, 0, r.code, r.err)
	r = c.run("profile", "list")
	assert.Contains(t, r.out, "lab")
}

// login on a node's host takes the node's token even when the current
// profile holds another (a cluster re-created on the host): it used to
// check, and fail, with the profile's.
func TestLoginTakesLocalNodeOverProfile(t *testing.T) {
	c := newCLI(t)
	delete(c.env, "HF_ENDPOINT")
	delete(c.env, "HF_TOKEN")
	r := c.run("profile", "set", "default", "--endpoint", c.srv.URL, "--token", "an-old-clusters-token", "--use")
	require.Equal(t, 0, r.code, r.err)
	c.localToken = func() (string, error) { return clienttest.Token, nil }
	r = c.run("login", c.srv.URL)
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.out, `profile "default" is current`)
	c.localToken = nil
	r = c.run("whoami")
	assert.Equal(t, 0, r.code, "the saved profile holds the node's token: %s", r.err)
}

// login with no endpoint goes to the node on this host where its data dir
// says its API is (HF_DATA_DIR=DIR hf-cli login dialled 127.0.0.1:7700
// whatever the node's api.address); a URL that is not a loopback http(s)
// one, or none, leaves the default.
func TestLoginFindsLocalNodesAPI(t *testing.T) {
	c := newCLI(t)
	delete(c.env, "HF_ENDPOINT")
	delete(c.env, "HF_TOKEN")
	c.localToken = func() (string, error) { return clienttest.Token, nil }
	c.localEndpoint = func() (string, error) { return c.srv.URL + "\n", nil }
	r := c.run("login")
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.out, "logged in to "+c.srv.URL+" ")
	r = c.run("whoami")
	require.Equal(t, 0, r.code, r.err)

	for _, bad := range []string{"", "https://10.0.0.5:7700", "ftp://127.0.0.1:21", c.srv.URL + "/api", "::not a url"} {
		c.localEndpoint = func() (string, error) { return bad, nil }
		f := &Factory{Env: Env{LocalEndpoint: c.localEndpoint}}
		assert.Equal(t, DefaultEndpoint, f.defaultEndpoint(), "%q", bad)
	}
	c.localEndpoint = func() (string, error) { return "", os.ErrNotExist }
	assert.Equal(t, DefaultEndpoint, (&Factory{Env: Env{LocalEndpoint: c.localEndpoint}}).defaultEndpoint())
	assert.Equal(t, DefaultEndpoint, (&Factory{}).defaultEndpoint())
}

// token create -o json leaves out expiresAt for a token that never expires,
// as the API does: it printed "0001-01-01T00:00:00Z".
func TestTokenCreateJSONNeverExpires(t *testing.T) {
	c := newCLI(t)
	r := c.run("token", "create", "ci", "--user", "admin", "--role", "admin", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	assert.NotContains(t, r.out, "expiresAt")
	assert.NotContains(t, r.out, "0001-01-01")
	r = c.run("token", "create", "ci2", "--user", "admin", "--role", "admin", "--expires-in", "1h", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.out, `"expiresAt"`)
}

// describe shows what a user needs of a machine (its addresses, the
// driver's info) and a node's drivers as items, not a line of JSON.
func TestDescribeMachineAndNodeDetails(t *testing.T) {
	c := newCLI(t)
	c.srv.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "n1"},
		Spec: types.NodeSpec{APIAddress: "10.0.0.1:7700", Drivers: []types.NodeDriver{
			{Name: "docker", Driver: "docker", Status: "ok", Capacity: types.Capacity{Free: types.Resources{CPU: 6, RAMGB: 12}}},
			{Name: "native", Driver: "native", Status: "unprivileged mode", AllowedGroups: []string{"kvm", "video"}},
		}},
		Status: types.NodeStatus{Phase: types.NodeUp, Machines: 1}})
	c.srv.Put(&types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: "m-1"},
		Spec: types.MachineSpec{Node: "n1", Driver: "docker"},
		Status: types.MachineStatus{Phase: types.MachineRunning,
			Addresses:          []types.Endpoint{{Protocol: "ssh", Address: "10.0.0.1:2222"}},
			MachineInformation: map[string]string{"user": "lab"},
			Reap:               &types.MachineRequest{Reason: strings.Repeat("the set shrank; ", 6)}}})

	r := c.run("describe", "machine", "m-1")
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.out, "Status:\n  addresses:\n    - address: 10.0.0.1:2222\n      protocol: ssh\n  machineInformation: user=lab\n")
	assert.Contains(t, r.out, "  reap:\n    reason: the set shrank; ", "a long value is not squeezed onto one line")

	r = c.run("describe", "node", "n1")
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.out, "  drivers:\n    - capacity:\n        free: cpu=6, ramGB=12\n")
	assert.Contains(t, r.out, "    - allowedGroups: kvm, video\n      capacity:\n")
	assert.Contains(t, r.out, "      driver: native\n      name: native\n      status: unprivileged mode\n")
	assert.NotContains(t, r.out, `[{"`, "no list of objects as JSON")
	assert.Contains(t, r.out, "Status:\n  machines: 1\n")
}
