package cmd

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/hf-fleet/hf/lib/client/clienttest"
	"github.com/hf-fleet/hf/lib/types"
)

var poolNow = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func newMachine(name, set, claim string, phase types.MachinePhase, created time.Time) *types.Machine {
	return &types.Machine{
		TypeMeta: types.TypeMeta{Kind: types.KindMachine},
		Metadata: types.ObjectMeta{Name: name, CreatedAt: created},
		Spec:     types.MachineSpec{MachineSet: set, Claim: claim, MachineTemplate: "small", Node: "n1", Driver: "test"},
		Status:   types.MachineStatus{Phase: phase},
	}
}

// seedPools stores three sets and machines of every kind of state:
//
//	pool:  m1 warm Running (3h), m2 claimed (1h), m3 Provisioning (10m) for
//	       the set's own provisioning claim pool-p3 (not claimed),
//	       m4 Terminated (5d), m5 Failed (4d) — only m1..m3 are live
//	od:    m6 claimed (90s), m7 Terminating unclaimed (2m)
//	empty: no machines
//
// plus m8, a Running machine of no set, which counts nowhere.
func seedPools(c *cli) {
	c.now = func() time.Time { return poolNow }
	pool := newSet("pool", "small", 2, 5)
	pool.Spec.ProvisioningStrategy = types.ProvisionAutoScale
	pool.Status = types.MachineSetStatus{Provisioned: 99, Available: 99} // stale: not what status shows
	od := newSet("od", "big", 0, 0)
	od.Spec.ProvisioningStrategy = types.ProvisionOnDemand
	for _, o := range []types.Object{
		pool, od, newSet("empty", "small", 1, 0),
		newMachine("m1", "pool", "", types.MachineRunning, poolNow.Add(-3*time.Hour)),
		newMachine("m2", "pool", "c2", types.MachineRunning, poolNow.Add(-time.Hour)),
		newMachine("m3", "pool", "pool-p3", types.MachineProvisioning, poolNow.Add(-10*time.Minute)),
		&types.MachineClaim{
			TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
			Metadata: types.ObjectMeta{Name: "pool-p3", Labels: map[string]string{types.LabelProvisionFor: "pool"}},
			Spec:     types.MachineClaimSpec{MachineTemplate: "small"},
		},
		&types.MachineClaim{
			TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
			Metadata: types.ObjectMeta{Name: "c2"},
			Spec:     types.MachineClaimSpec{MachineTemplate: "small"},
		},
		newMachine("m4", "pool", "", types.MachineTerminated, poolNow.Add(-5*24*time.Hour)),
		newMachine("m5", "pool", "c5", types.MachineFailed, poolNow.Add(-4*24*time.Hour)),
		newMachine("m6", "od", "c6", types.MachineRunning, poolNow.Add(-90*time.Second)),
		newMachine("m7", "od", "", types.MachineTerminating, poolNow.Add(-2*time.Minute)),
		newMachine("m8", "", "c8", types.MachineRunning, poolNow.Add(-9*24*time.Hour)),
	} {
		c.srv.Put(o)
	}
}

// poolTable runs `pool status` with c's token and returns its table (piped:
// tab-separated), without its header line.
func poolTable(t *testing.T, c *cli) string {
	t.Helper()
	r := c.run("pool", "status")
	require.Equal(t, 0, r.code, r.err)
	assert.Empty(t, r.err)
	header, rows, _ := strings.Cut(r.out, "\n")
	assert.Equal(t, "SET\tTEMPLATE\tSTRATEGY\tMIN\tMAX\tPROVISIONED\tAVAILABLE\tCLAIMED\tOLDEST", header)
	return rows
}

func TestPoolStatusPiped(t *testing.T) {
	c := newCLI(t)
	seedPools(c)
	assert.Equal(t, "empty\tsmall\tAutoScale\t1\tnone\t0\t0\t0\t-\n"+
		"od\tbig\tOnDemand\t0\tnone\t2\t0\t1\t2m\n"+
		"pool\tsmall\tAutoScale\t2\t5\t3\t1\t1\t3h\n", poolTable(t, c))

	// One list of sets, who the token is, one list of machines, one of the
	// sets' provisioning claims.
	reqs := c.srv.Requests()
	require.Len(t, reqs, 4)
	assert.Equal(t, "/api/v1/machinesets", reqs[0].Path)
	assert.Equal(t, "/api/v1/whoami", reqs[1].Path)
	assert.Equal(t, "/api/v1/machines", reqs[2].Path)
	assert.Equal(t, "/api/v1/machineclaims", reqs[3].Path)
	q, err := url.ParseQuery(reqs[3].Query)
	require.NoError(t, err)
	assert.Equal(t, types.LabelProvisionFor, q.Get("labelSelector"))
}

// A user's token lists only the user's own machines: the counts come from
// the sets' status, and what only the machines could tell is not shown.
func TestPoolStatusAsUser(t *testing.T) {
	c := newCLI(t)
	seedPools(c)
	c.env["HF_TOKEN"] = clienttest.ReadOnlyToken // role user
	assert.Equal(t, "empty\tsmall\tAutoScale\t1\tnone\t0\t0\t-\t-\n"+
		"od\tbig\tOnDemand\t0\tnone\t0\t0\t-\t-\n"+
		"pool\tsmall\tAutoScale\t2\t5\t99\t99\t-\t-\n", poolTable(t, c))
	for _, req := range c.srv.Requests() {
		assert.NotEqual(t, "/api/v1/machines", req.Path, "a user's machines tell nothing of the pool")
	}

	r := c.run("pool", "status", "pool", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	var raw []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.out), &raw), r.out)
	require.Len(t, raw, 1)
	assert.Equal(t, float64(99), raw[0]["available"])
	assert.NotContains(t, raw[0], "claimed")
	assert.NotContains(t, raw[0], "oldest")
}

func TestPoolStatusTerminal(t *testing.T) {
	c := newCLI(t)
	c.terminal = true
	seedPools(c)
	r := c.run("pool", "status")
	require.Equal(t, 0, r.code, r.err)
	got := lines(r.out)
	require.Len(t, got, 4)
	assert.Regexp(t, `^SET +TEMPLATE +STRATEGY +MIN +MAX +PROVISIONED +AVAILABLE +CLAIMED +OLDEST$`, got[0])
	assert.Regexp(t, `^empty +small +AutoScale +1 +none +0 +0 +0 +-$`, got[1])
	assert.Regexp(t, `^pool +small +AutoScale +2 +5 +3 +1 +1 +3h$`, got[3])
	col := strings.Index(got[0], "PROVISIONED")
	assert.Equal(t, "3", got[3][col:col+1], "columns line up")
	assert.NotContains(t, r.out, "\t")
}

func TestPoolStatusNamedSets(t *testing.T) {
	c := newCLI(t)
	seedPools(c)

	// Named sets come in the order given; `set status` is the same command.
	for _, args := range [][]string{{"pool", "status", "pool", "od"}, {"set", "status", "pool", "od"}} {
		r := c.run(args...)
		require.Equal(t, 0, r.code, r.err)
		got := lines(r.out)
		require.Len(t, got, 3, r.out)
		assert.True(t, strings.HasPrefix(got[1], "pool\t"), got[1])
		assert.True(t, strings.HasPrefix(got[2], "od\t"), got[2])
	}

	// A missing set fails the command (exit 3) but the others are shown.
	r := c.run("pool", "status", "pool", "ghost")
	assert.Equal(t, ExitNotFound, r.code)
	assert.Equal(t, "hf-cli: not_found: machineset \"ghost\" not found\n", r.err)
	assert.Len(t, lines(r.out), 2)

	// Only missing sets: nothing printed, and the machines are not listed.
	before := len(c.srv.Requests())
	r = c.run("set", "status", "ghost")
	assert.Equal(t, ExitNotFound, r.code)
	assert.Empty(t, r.out)
	assert.Len(t, c.srv.Requests(), before+1)
}

func TestPoolStatusJSONAndYAML(t *testing.T) {
	c := newCLI(t)
	seedPools(c)
	r := c.run("pool", "status", "pool", "empty", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	var got []poolStatus
	require.NoError(t, json.Unmarshal([]byte(r.out), &got), r.out)
	assert.Equal(t, []poolStatus{
		{Set: "pool", Template: "small", Strategy: "AutoScale", Min: 2, Max: 5, Provisioned: 3, Available: 1, Claimed: new(1),
			Oldest: "3h", OldestCreatedAt: poolNow.Add(-3 * time.Hour)},
		{Set: "empty", Template: "small", Strategy: "AutoScale", Min: 1, Claimed: new(0)},
	}, got)
	var raw []map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.out), &raw))
	assert.Equal(t, "2026-05-01T07:00:00Z", raw[0]["oldestCreatedAt"])
	assert.NotContains(t, raw[1], "oldest", "no machine, no age")

	r = c.run("pool", "status", "od", "-o", "yaml")
	require.Equal(t, 0, r.code, r.err)
	var y []map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(r.out), &y), r.out)
	require.Len(t, y, 1)
	assert.Equal(t, "od", y[0]["set"])
	assert.Equal(t, "OnDemand", y[0]["strategy"])
	assert.Equal(t, 2, y[0]["provisioned"])
	assert.Equal(t, 1, y[0]["claimed"])
	assert.Equal(t, "2m", y[0]["oldest"])

	// No sets at all: an empty list, not null.
	empty := newCLI(t)
	r = empty.run("pool", "status", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "[]\n", r.out)
}

func TestPoolStatuses(t *testing.T) {
	pending := poolNow.Add(-30 * time.Minute)
	noMeta := newMachine("m-old", "s", "", types.MachinePending, time.Time{})
	noMeta.Status.PhaseTimes = types.MakePhaseTimes(types.PhaseTime{Phase: string(types.MachinePending), At: pending})
	tests := []struct {
		name     string
		machines []*types.Machine
		want     poolStatus
	}{
		{"no machines", nil, poolStatus{}},
		{"warm running", []*types.Machine{newMachine("a", "s", "", types.MachineRunning, poolNow.Add(-time.Minute))},
			poolStatus{Provisioned: 1, Available: 1, Oldest: "60s", OldestCreatedAt: poolNow.Add(-time.Minute)}},
		{"claimed running is not available", []*types.Machine{newMachine("a", "s", "c", types.MachineRunning, poolNow)},
			poolStatus{Provisioned: 1, Claimed: new(1), Oldest: "0s", OldestCreatedAt: poolNow}},
		{"warm pending is provisioned, not available", []*types.Machine{newMachine("a", "s", "", types.MachinePending, poolNow)},
			poolStatus{Provisioned: 1, Oldest: "0s", OldestCreatedAt: poolNow}},
		{"a provisioning claim's machine is provisioned, not claimed", []*types.Machine{newMachine("a", "s", "s-p1", types.MachinePending, poolNow)},
			poolStatus{Provisioned: 1, Oldest: "0s", OldestCreatedAt: poolNow}},
		{"dead machines count nowhere", []*types.Machine{
			newMachine("a", "s", "c", types.MachineLost, poolNow.Add(-time.Hour)),
			newMachine("b", "s", "", types.MachineFailed, poolNow.Add(-time.Hour)),
			newMachine("c", "s", "", types.MachineTerminated, poolNow.Add(-time.Hour)),
		}, poolStatus{}},
		{"other sets' machines count nowhere", []*types.Machine{newMachine("a", "other", "", types.MachineRunning, poolNow)}, poolStatus{}},
		{"creation time falls back to Pending", []*types.Machine{noMeta},
			poolStatus{Provisioned: 1, Oldest: "30m", OldestCreatedAt: pending}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			set := newSet("s", "small", 1, 3)
			got := poolStatuses(poolNow, []*types.MachineSet{set}, tt.machines, map[string]bool{"s-p1": true})
			require.Len(t, got, 1)
			want := tt.want
			want.Set, want.Template, want.Strategy, want.Min, want.Max = "s", "small", "AutoScale", 1, 3
			if want.Claimed == nil {
				want.Claimed = new(0)
			}
			assert.Equal(t, want, got[0])
		})
	}
}

func TestPoolGroup(t *testing.T) {
	c := newCLI(t)
	r := c.run("pool")
	require.Equal(t, 0, r.code, r.err)
	assert.Contains(t, r.out, "status      Show each machine set's warm, claimed and provisioned machines")
	r = c.run("pool", "frobnicate")
	assert.Equal(t, ExitUsage, r.code)
	assert.Equal(t, "hf-cli: unknown command \"frobnicate\" for \"hf-cli pool\"\n", r.err)
	r = c.run("--token", "wrong", "pool", "status")
	assert.Equal(t, ExitAuth, r.code, r.err)
}
