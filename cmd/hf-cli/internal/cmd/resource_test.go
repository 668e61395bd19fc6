package cmd

import (
	"context"
	"encoding/json"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/hf-fleet/hf/lib/client/clienttest"
	"github.com/hf-fleet/hf/lib/types"
)

func seedClaims(c *cli) {
	c.srv.Put(bound(newClaim("c1", "small", "alice", map[string]string{"team": "a"}), "n1", "m-1", 12*time.Millisecond))
	c.srv.Put(newClaim("c2", "big", "", map[string]string{"team": "b"}))
}

func TestListPipedIsTabSeparated(t *testing.T) {
	c := newCLI(t)
	seedClaims(c)
	r := c.run("claim", "list")
	require.Equal(t, 0, r.code, r.err)
	got := lines(r.out)
	require.Len(t, got, 3)
	assert.Equal(t, "NAME\tTEMPLATE\tUSER\tPHASE\tNODE\tMACHINE\tCREATED", got[0])
	assert.Regexp(t, `^c1\tsmall\talice\tBound\tn1\tm-1\t\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`, got[1])
	assert.Regexp(t, `^c2\tbig\t\t\t\t\t\S+$`, got[2])
	assert.Empty(t, r.err)
}

func TestListTerminalIsAligned(t *testing.T) {
	c := newCLI(t)
	c.terminal = true
	seedClaims(c)
	r := c.run("claims", "ls")
	require.Equal(t, 0, r.code, r.err)
	got := lines(r.out)
	require.Len(t, got, 3)
	assert.Regexp(t, `^NAME +TEMPLATE +USER +PHASE +NODE +MACHINE +AGE$`, got[0])
	assert.Regexp(t, `^c1 +small +alice +Bound +n1 +m-1 +\d+s$`, got[1])
	assert.Regexp(t, `^c2 +big +- +- +- +- +\d+s$`, got[2])
	// Columns line up: TEMPLATE starts at the same offset in every line.
	col := strings.Index(got[0], "TEMPLATE")
	assert.Equal(t, "small", got[1][col:col+5])
	assert.NotContains(t, r.out, "\t")
}

func TestListSelector(t *testing.T) {
	c := newCLI(t)
	seedClaims(c)
	r := c.run("claim", "list", "-l", "team=b")
	require.Equal(t, 0, r.code, r.err)
	got := lines(r.out)
	require.Len(t, got, 2)
	assert.True(t, strings.HasPrefix(got[1], "c2\t"))

	// Kubernetes' syntax in full.
	for sel, want := range map[string]string{"team!=b": "c1\t", "team in (a,x)": "c1\t", "team notin (a)": "c2\t"} {
		r = c.run("claim", "list", "-l", sel)
		require.Equal(t, 0, r.code, r.err)
		got = lines(r.out)
		require.Len(t, got, 2, sel)
		assert.True(t, strings.HasPrefix(got[1], want), "%s: %s", sel, got[1])
	}
	r = c.run("claim", "list", "-l", "team", "-l", "!nope")
	require.Equal(t, 0, r.code, r.err)
	assert.Len(t, lines(r.out), 3, "repeated selectors all hold")

	r = c.run("claim", "list", "--selector", "team in (a")
	assert.Equal(t, ExitUsage, r.code)
	assert.Contains(t, r.err, "--selector")
}

func TestListJSONAndYAML(t *testing.T) {
	c := newCLI(t)
	seedClaims(c)

	r := c.run("claim", "list", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	var list struct {
		Kind  string               `json:"kind"`
		Items []types.MachineClaim `json:"items"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.out), &list))
	assert.Equal(t, "MachineClaimList", list.Kind)
	require.Len(t, list.Items, 2)
	assert.Equal(t, types.ClaimBound, list.Items[0].Status.Phase)

	r = c.run("claim", "list", "-o", "yaml")
	require.Equal(t, 0, r.code, r.err)
	var y map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(r.out), &y))
	assert.Equal(t, "MachineClaimList", y["kind"])
	items := y["items"].([]any)
	require.Len(t, items, 2)
	first := items[0].(map[string]any)
	assert.Equal(t, "small", first["spec"].(map[string]any)["machineTemplate"], "YAML keeps the JSON field names")
	assert.Contains(t, r.out, "kind: MachineClaimList\nitems:\n  - apiVersion: hobbyfarm.io/v4alpha1\n    kind: MachineClaim\n    metadata:\n      name: c1\n")

	// HF_OUTPUT picks the format when -o is absent; -o wins over it.
	c.env["HF_OUTPUT"] = "json"
	r = c.run("claim", "get", "c2")
	require.Equal(t, 0, r.code, r.err)
	var one types.MachineClaim
	require.NoError(t, json.Unmarshal([]byte(r.out), &one), r.out)
	assert.Equal(t, "c2", one.Metadata.Name)
	r = c.run("claim", "get", "c2", "-o", "table")
	assert.True(t, strings.HasPrefix(r.out, "NAME\t"), r.out)
}

func TestEmptyList(t *testing.T) {
	c := newCLI(t)
	r := c.run("node", "list", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	assert.JSONEq(t, `{"kind":"NodeList","items":[]}`, r.out)
	r = c.run("node", "list")
	assert.Equal(t, "NAME\tPHASE\tAPI\tDRIVERS(FREE CPU/RAM)\tMACHINES\tMAINT\tCREATED\n", r.out)
}

func TestGet(t *testing.T) {
	c := newCLI(t)
	seedClaims(c)
	r := c.run("claim", "get", "c1", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	var cl types.MachineClaim
	require.NoError(t, json.Unmarshal([]byte(r.out), &cl))
	assert.Equal(t, "m-1", cl.Status.Machine)

	r = c.run("claim", "get", "nope")
	assert.Equal(t, ExitNotFound, r.code)
	assert.Equal(t, "hf-cli: not_found: machineclaim \"nope\" not found\n", r.err)
	assert.Empty(t, r.out)

	// Several names: the ones found are printed, the missing one fails the command.
	r = c.run("claim", "get", "c1", "nope", "c2")
	assert.Equal(t, ExitNotFound, r.code)
	assert.Len(t, lines(r.out), 3)
}

// A node the answering node cannot reach shows it beside its phase, unless
// that is Down already; describe gives the reason.
func TestNodeTableShowsUnreachable(t *testing.T) {
	c := newCLI(t)
	for _, n := range []struct {
		name  string
		phase types.NodePhase
		reach types.ConditionStatus
	}{{"n1", types.NodeUp, types.ConditionTrue}, {"n2", types.NodeUp, types.ConditionFalse}, {"n3", types.NodeDraining, types.ConditionFalse}, {"n4", types.NodeDown, types.ConditionFalse}} {
		c.srv.Put(&types.Node{
			TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: n.name},
			Status: types.NodeStatus{Phase: n.phase, Conditions: types.Conditions{{Type: types.ConditionReachable, Status: n.reach,
				Reason: types.ReasonNoQuorum, Message: "not a live member as n1 sees it"}}},
		})
	}
	r := c.run("node", "list")
	require.Equal(t, 0, r.code, r.err)
	phases := map[string]string{}
	for _, l := range lines(r.out)[1:] {
		f := strings.Split(l, "\t")
		phases[f[0]] = f[1]
	}
	assert.Equal(t, map[string]string{"n1": "Up", "n2": "Up,Unreachable", "n3": "Draining,Unreachable", "n4": "Down"}, phases)

	r = c.run("describe", "node", "n2")
	require.Equal(t, 0, r.code, r.err)
	assert.Regexp(t, `Reachable +False +NoQuorum +not a live member as n1 sees it`, r.out)
}

// node watch shows each event's row as node list does: a node the
// streaming node cannot reach reads Up,Unreachable, and the stream sends
// it again, the same record, when that view moves.
func TestNodeWatchShowsUnreachable(t *testing.T) {
	c := newCLI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := c.start(ctx, "node", "watch")
	require.Eventually(t, func() bool { return c.srv.Watchers() == 1 }, 5*time.Second, 5*time.Millisecond)
	for _, reach := range []types.ConditionStatus{types.ConditionTrue, types.ConditionFalse} {
		c.srv.Put(&types.Node{
			TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "n2"},
			Status: types.NodeStatus{Phase: types.NodeUp, Conditions: types.Conditions{{Type: types.ConditionReachable, Status: reach, Reason: types.ReasonNoQuorum}}},
		})
	}
	require.Eventually(t, func() bool { return len(lines(run.out.String())) == 2 }, 5*time.Second, 5*time.Millisecond, run.out.String())
	cancel()
	require.Equal(t, 0, run.wait(t), run.err.String())
	got := lines(run.out.String())
	assert.Regexp(t, "^PUT\tn2\tUp\t", got[0])
	assert.Regexp(t, "^PUT\tn2\tUp,Unreachable\t", got[1])
}

func TestTablesOfEveryKind(t *testing.T) {
	c := newCLI(t)
	now := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	c.srv.Put(&types.Node{
		TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "n1"},
		Spec: types.NodeSpec{APIAddress: "10.0.0.1:7700", Maintenance: true, Drivers: []types.NodeDriver{
			{Name: "test", Capacity: types.Capacity{Free: types.Resources{CPU: 6, RAMGB: 12.5}}},
			{Name: "docker", Capacity: types.Capacity{Free: types.Resources{CPU: 2, RAMGB: 4}}},
		}},
		Status: types.NodeStatus{Phase: types.NodeUp, Machines: 3},
	})
	c.srv.Put(&types.MachineTemplate{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate}, Metadata: types.ObjectMeta{Name: "small"},
		Spec: types.MachineTemplateSpec{Resources: types.Resources{CPU: 2, RAMGB: 4},
			ProviderConfiguration: map[string]json.RawMessage{"test": nil, "docker": nil}},
	})
	paused := newMachine("m-1", "", "c1", types.MachineRunning, time.Time{})
	paused.Status.Paused = true // its session paused it
	c.srv.Put(paused)
	c.srv.Put(&types.MachineSet{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineSet}, Metadata: types.ObjectMeta{Name: "pool"},
		Spec: types.MachineSetSpec{MachineTemplate: "small", MinAvailable: 2, MaxProvisioned: 5,
			AvailabilityConfiguration: types.AvailabilityConfiguration{Availability: types.AvailabilityAccessCode, Value: "ws"}},
		Status: types.MachineSetStatus{Provisioned: 3, Available: 1},
	})
	c.srv.Put(&types.ScheduledEvent{
		TypeMeta: types.TypeMeta{Kind: types.KindScheduledEvent}, Metadata: types.ObjectMeta{Name: "ws"},
		Spec: types.ScheduledEventSpec{StartTime: now, EndTime: now.Add(time.Hour),
			RequiredMachines: []types.RequiredMachines{{MachineTemplate: "small", Count: 3}, {MachineTemplate: "big", Count: 2}}},
	})
	c.srv.Put(&types.AccessCode{
		TypeMeta: types.TypeMeta{Kind: types.KindAccessCode}, Metadata: types.ObjectMeta{Name: "ws"},
		Spec: types.AccessCodeSpec{Code: "secret", MachineSets: []string{"pool"}, ScheduledEvents: []string{"ws"}},
	})
	c.srv.Put(&types.Session{
		TypeMeta: types.TypeMeta{Kind: types.KindSession}, Metadata: types.ObjectMeta{Name: "s1"},
		Spec: types.SessionSpec{User: "alice"}, Status: types.SessionStatus{Phase: "Active", MachineClaim: "c1"},
	})
	c.srv.Put(&types.Environment{
		TypeMeta: types.TypeMeta{Kind: types.KindEnvironment}, Metadata: types.ObjectMeta{Name: "lab"},
		Spec: types.EnvironmentSpec{Provider: "docker", Placement: types.PlacementSpread, NodeSelector: map[string]string{"rack": "r1"}},
	})
	c.srv.Put(&types.Provider{
		TypeMeta: types.TypeMeta{Kind: types.KindProvider}, Metadata: types.ObjectMeta{Name: "docker"},
		Spec: types.ProviderSpec{Driver: "docker", MachineInformation: types.Properties{{Name: "ip"}}},
	})

	tests := []struct {
		args []string
		want string // the data row without the trailing CREATED cell
	}{
		{[]string{"nodes", "list"}, "n1\tUp\t10.0.0.1:7700\ttest(6/12.5G),docker(2/4G)\t3\tyes"},
		{[]string{"templates", "list"}, "small\t\tUser\t2\t4G\tdocker,test"},
		{[]string{"machinetemplate", "list"}, "small\t\tUser\t2\t4G\tdocker,test"},
		{[]string{"machine", "list"}, "m-1\tc1\tsmall\t\tn1\ttest\tRunning,Paused"},
		{[]string{"sets", "list"}, "pool\tsmall\tAccessCode:ws\t\t2\t5\t3\t1"},
		{[]string{"scheduledevent", "list"}, "ws\t\t\t2026-05-01T10:00:00Z\t2026-05-01T11:00:00Z\t5"},
		{[]string{"codes", "list"}, "ws\t\tpool\tws\t"},
		{[]string{"session", "list"}, "s1\talice\tActive\tc1\tDelete"},
		{[]string{"env", "list"}, "lab\t\tdocker\tspread\track=r1"},
		{[]string{"provider", "list"}, "docker\tdocker\t\tip"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			r := c.run(tt.args...)
			require.Equal(t, 0, r.code, r.err)
			got := lines(r.out)
			require.Len(t, got, 2, r.out)
			row := got[1][:strings.LastIndex(got[1], "\t")]
			assert.Equal(t, tt.want, row)
		})
	}
}

func TestDelete(t *testing.T) {
	c := newCLI(t)
	seedClaims(c)
	r := c.run("claim", "delete", "c1", "c2")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "machineclaim/c1 deleted\nmachineclaim/c2 deleted\n", r.out)
	_, ok := c.srv.Object(types.KindMachineClaim, "c1")
	assert.False(t, ok)

	r = c.run("claim", "delete", "c1")
	assert.Equal(t, ExitNotFound, r.code)
	r = c.run("claim", "delete", "c1", "--ignore-not-found")
	assert.Equal(t, 0, r.code, r.err)

	// The top level takes KIND NAME... too.
	c.srv.Put(newClaim("c3", "small", "", nil))
	r = c.run("delete", "claim", "c3")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "machineclaim/c3 deleted\n", r.out)
	r = c.run("delete", "gadget", "x")
	assert.Equal(t, ExitUsage, r.code)
}

// node delete --force passes force=true, which deletes a node the server
// cannot reach although its last report says Up (the last node of two
// never finds its dead peer Down); other kinds have no --force.
func TestNodeDeleteForce(t *testing.T) {
	c := newCLI(t)
	c.srv.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "n2"}})
	r := c.run("node", "delete", "n2", "--force")
	require.Equal(t, ExitOK, r.code, r.err)
	assert.Equal(t, "node/n2 deleted\n", r.out)
	var queries []string
	for _, rq := range c.srv.Requests() {
		if rq.Method == "DELETE" {
			queries = append(queries, rq.Query)
		}
	}
	assert.Equal(t, []string{"force=true"}, queries)
	assert.Equal(t, ExitUsage, c.run("claim", "delete", "c1", "--force").code)
}

// startWaitingDelete starts `claim delete NAME --wait` and returns it once
// the claim is gone and the CLI watches, failing if it returned meanwhile
// (while what the caller says still holds).
func startWaitingDelete(t *testing.T, c *cli, name, while string) *running {
	t.Helper()
	run := c.start(context.Background(), "claim", "delete", name, "--wait")
	require.Eventually(t, func() bool {
		_, ok := c.srv.Object(types.KindMachineClaim, name)
		return !ok && c.srv.Watchers() > 0
	}, 5*time.Second, 5*time.Millisecond)
	time.Sleep(50 * time.Millisecond) // room for a wrong return to show
	select {
	case code := <-run.done:
		require.FailNow(t, "delete --wait returned while "+while, "code %d, stderr %s", code, run.err.String())
	default:
	}
	return run
}

// boundRunning puts claim, Bound on node to machine, and that machine,
// Running, and returns the machine.
func boundRunning(c *cli, claim, node, machine string) *types.Machine {
	c.srv.Put(bound(newClaim(claim, "small", "", nil), node, machine, time.Millisecond))
	m := &types.Machine{
		TypeMeta: types.TypeMeta{Kind: types.KindMachine}, Metadata: types.ObjectMeta{Name: machine},
		Spec:   types.MachineSpec{Claim: claim, MachineTemplate: "small", Node: node, Driver: "test"},
		Status: types.MachineStatus{Phase: types.MachineRunning},
	}
	c.srv.Put(m)
	return m
}

func TestDeleteWaitsForClaimAndMachine(t *testing.T) {
	c := newCLI(t)
	machine := boundRunning(c, "c1", "n1", "m-1")

	run := startWaitingDelete(t, c, "c1", "the machine still runs")
	machine.Status.Phase = types.MachineTerminated
	c.srv.Put(machine)
	require.Equal(t, 0, run.wait(t), run.err.String())
	assert.Contains(t, run.err.String(), "Waiting for machineclaim/c1 and machine/m-1 to go away")
	assert.Equal(t, "machineclaim/c1 deleted\n", run.out.String())
}

// A machine whose node is gone is Lost, not released: the wait ends (there
// is nothing reachable to wait for) and says where the machine still is.
func TestDeleteWaitSaysAMachineIsLost(t *testing.T) {
	c := newCLI(t)
	machine := boundRunning(c, "c1", "n2", "m-1")

	run := startWaitingDelete(t, c, "c1", "the machine still runs")
	machine.Status.Phase = types.MachineLost
	c.srv.Put(machine)
	require.Equal(t, 0, run.wait(t), run.err.String())
	assert.Contains(t, run.err.String(), "machine/m-1 is Lost: node n2 is unreachable and still holds what its driver made for it")

	// A machine that was released says nothing of the kind.
	boundRunning(c, "c2", "n1", "m-2")
	run = startWaitingDelete(t, c, "c2", "the machine still runs")
	c.srv.Remove(types.KindMachine, "m-2")
	require.Equal(t, 0, run.wait(t), run.err.String())
	assert.NotContains(t, run.err.String(), "Lost")
}

// A claim deleted while its machine is being made names no machine yet:
// --wait also waits for the machines labelled with the claim.
func TestDeleteWaitsForAMachineBeingMade(t *testing.T) {
	c := newCLI(t)
	c.srv.Put(newClaim("c1", "small", "", nil))
	machine := labelled(newMachine("m-2", "", "c1", types.MachinePending, time.Time{}), map[string]string{types.LabelClaim: "c1"})
	c.srv.Put(machine)
	// Another claim's machine, once made for c1 and given to it since, is
	// no reason to wait.
	c.srv.Put(labelled(newMachine("m-3", "", "c9", types.MachineRunning, time.Time{}), map[string]string{types.LabelClaim: "c1"}))

	run := startWaitingDelete(t, c, "c1", "the claim's machine is being made")
	machine.Status.Phase = types.MachineTerminated
	c.srv.Put(machine)
	require.Equal(t, 0, run.wait(t), run.err.String())
	assert.Equal(t, "machineclaim/c1 deleted\n", run.out.String())

	// It times out naming the machine.
	c.srv.Put(newClaim("c2", "small", "", nil))
	c.srv.Put(labelled(newMachine("m-4", "", "c2", types.MachineProvisioning, time.Time{}), map[string]string{types.LabelClaim: "c2"}))
	r := c.run("claim", "delete", "c2", "--wait", "--wait-timeout", "300ms")
	assert.Equal(t, ExitTimeout, r.code)
	assert.Contains(t, r.err, "waiting for machine/m-4 to go away")
}

// A --wait-timeout that would give up at once is refused before the CLI
// acts: the claim is neither deleted nor created.
func TestWaitTimeoutMustBePositive(t *testing.T) {
	c := newCLI(t)
	c.srv.Put(newClaim("c1", "small", "", nil))
	for _, d := range []string{"0s", "-1s"} {
		r := c.run("claim", "delete", "c1", "--wait", "--wait-timeout", d)
		assert.Equal(t, ExitUsage, r.code, r.err)
		assert.Contains(t, r.err, `invalid argument "`+d+`" for "--wait-timeout" flag: must be above zero`)
		_, ok := c.srv.Object(types.KindMachineClaim, "c1")
		assert.True(t, ok, "the claim was deleted")

		r = c.run("claim", "create", "c2", "--template", "small", "--wait", "--wait-timeout", d)
		assert.Equal(t, ExitUsage, r.code, r.err)
		_, ok = c.srv.Object(types.KindMachineClaim, "c2")
		assert.False(t, ok, "the claim was created")
	}
	r := c.run("claim", "delete", "c1", "--wait-timeout", "later")
	assert.Equal(t, ExitUsage, r.code, r.err)
	assert.Contains(t, r.err, "--wait-timeout")
}

func TestDeleteWaitTimesOut(t *testing.T) {
	c := newCLI(t)
	c.srv.Put(bound(newClaim("c1", "small", "", nil), "n1", "m-1", time.Millisecond))
	c.srv.Put(newMachine("m-1", "", "c1", types.MachineTerminating, time.Time{}))
	r := c.run("claim", "delete", "c1", "--wait", "--wait-timeout", "300ms")
	assert.Equal(t, ExitTimeout, r.code)
	assert.Contains(t, r.err, "hf-cli: timed out after 300ms waiting for machine/m-1 to go away")
}

func TestWatch(t *testing.T) {
	c := newCLI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := c.start(ctx, "claim", "watch", "-l", "team=a")
	require.Eventually(t, func() bool { return c.srv.Watchers() == 1 }, 5*time.Second, 5*time.Millisecond)

	c.srv.Put(newClaim("other", "small", "", map[string]string{"team": "b"}))
	c.srv.Put(newClaim("c1", "small", "alice", map[string]string{"team": "a"}))
	c.srv.Put(bound(newClaim("c1", "small", "alice", map[string]string{"team": "a"}), "n1", "m-1", time.Millisecond))
	c.srv.Remove(types.KindMachineClaim, "c1")
	require.Eventually(t, func() bool { return len(lines(run.out.String())) == 3 }, 5*time.Second, 5*time.Millisecond, run.out.String())
	cancel()
	require.Equal(t, 0, run.wait(t), run.err.String())

	got := lines(run.out.String())
	assert.Regexp(t, `^PUT\tc1\tsmall\talice\t\t\t\t\S+$`, got[0])
	assert.Regexp(t, `^PUT\tc1\tsmall\talice\tBound\tn1\tm-1\t\S+$`, got[1])
	assert.Regexp(t, `^DELETE\tc1\t`, got[2])
	assert.NotContains(t, run.out.String(), "other")
	q := watchQueries(t, c)
	require.Len(t, q, 1)
	assert.Equal(t, "team=a", q[0].Get("labelSelector"), "the server filters too")
}

func TestWatchJSONLines(t *testing.T) {
	c := newCLI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := c.start(ctx, "node", "watch", "-o", "json")
	require.Eventually(t, func() bool { return c.srv.Watchers() == 1 }, 5*time.Second, 5*time.Millisecond)
	c.srv.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "n1"}})
	require.Eventually(t, func() bool { return strings.Contains(run.out.String(), "\n") }, 5*time.Second, 5*time.Millisecond)
	cancel()
	require.Equal(t, 0, run.wait(t))
	var ev struct {
		Type   string     `json:"type"`
		Kind   string     `json:"kind"`
		Name   string     `json:"name"`
		Seq    uint64     `json:"seq"`
		Object types.Node `json:"object"`
	}
	require.NoError(t, json.Unmarshal([]byte(lines(run.out.String())[0]), &ev))
	assert.Equal(t, "put", ev.Type)
	assert.Equal(t, "n1", ev.Object.Metadata.Name)
	assert.Equal(t, uint64(1), ev.Seq)
}

func TestWatchStreamEndsIsAnError(t *testing.T) {
	c := newCLI(t)
	run := c.start(context.Background(), "claim", "watch")
	require.Eventually(t, func() bool { return c.srv.Watchers() == 1 }, 5*time.Second, 5*time.Millisecond)
	c.srv.CloseWatches()
	assert.Equal(t, ExitError, run.wait(t))
	assert.Equal(t, "hf-cli: watch machineclaims: watch stream closed by server\n", run.err.String())
}

func TestNodeDrain(t *testing.T) {
	c := newCLI(t)
	c.srv.Put(&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "n1"}})
	r := c.run("node", "drain", "n1")
	require.Equal(t, 0, r.code, r.err)
	assert.Equal(t, "node/n1 drained\n", r.out)
	n, _ := c.srv.Object(types.KindNode, "n1")
	assert.True(t, n.(*types.Node).Spec.Maintenance)

	r = c.run("node", "undrain", "n1", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	var got types.Node
	require.NoError(t, json.Unmarshal([]byte(r.out), &got))
	assert.False(t, got.Spec.Maintenance)

	r = c.run("node", "drain", "ghost")
	assert.Equal(t, ExitNotFound, r.code)
	r = c.run("node", "drain")
	assert.Equal(t, ExitUsage, r.code)

	reqs := c.srv.Requests()
	assert.Equal(t, "/api/v1/nodes/n1/drain", reqs[0].Path)
	assert.Equal(t, "POST", reqs[0].Method)
}

func TestExitCodes(t *testing.T) {
	c := newCLI(t)
	c.srv.Put(newClaim("c1", "small", "", nil))
	tests := []struct {
		name  string
		env   map[string]string
		args  []string
		code  int
		errRe string
	}{
		{"ok", nil, []string{"claim", "list"}, ExitOK, `^$`},
		{"not found", nil, []string{"template", "get", "x"}, ExitNotFound, `^hf-cli: not_found: machinetemplate "x" not found\n$`},
		{"unauthorized", map[string]string{"HF_TOKEN": "wrong"}, []string{"claim", "list"}, ExitAuth, `^hf-cli: unauthorized: `},
		{"no token", map[string]string{"HF_TOKEN": ""}, []string{"claim", "list"}, ExitAuth, `unauthorized`},
		{"forbidden", map[string]string{"HF_TOKEN": clienttest.ReadOnlyToken}, []string{"claim", "delete", "c1"}, ExitAuth, `^hf-cli: forbidden: `},
		{"conflict", nil, []string{"claim", "create", "c1", "--template", "small"}, ExitConflict, `^hf-cli: conflict: machineclaim "c1" already exists`},
		{"unknown flag", nil, []string{"claim", "list", "--bogus"}, ExitUsage, `^hf-cli: unknown flag: --bogus\n$`},
		{"bad flag value", nil, []string{"claim", "list", "--timeout", "soon"}, ExitUsage, `^hf-cli: invalid argument "soon"`},
		{"unknown command", nil, []string{"frobnicate"}, ExitUsage, `^hf-cli: unknown command "frobnicate" for "hf-cli"\n$`},
		{"unknown subcommand", nil, []string{"claim", "frobnicate"}, ExitUsage, `unknown command "frobnicate" for "hf-cli claim"`},
		{"unknown shell", nil, []string{"completion", "tcsh"}, ExitUsage, `^hf-cli: unknown command "tcsh" for "hf-cli completion"`},
		{"missing args", nil, []string{"claim", "get"}, ExitUsage, `needs at least one NAME`},
		{"extra args", nil, []string{"claim", "list", "x"}, ExitUsage, `takes no arguments`},
		{"bad output", nil, []string{"-o", "xml", "claim", "list"}, ExitUsage, `output format "xml"`},
		{"bad HF_OUTPUT", map[string]string{"HF_OUTPUT": "csv"}, []string{"claim", "list"}, ExitUsage, `output format "csv"`},
		{"create needs -f", nil, []string{"template", "create"}, ExitUsage, `needs -f FILE`},
		{"bad endpoint", map[string]string{"HF_ENDPOINT": "localhost:7700"}, []string{"claim", "list"}, ExitUsage, `scheme must be http or https`},
		{"connection refused", map[string]string{"HF_ENDPOINT": "http://127.0.0.1:1"}, []string{"claim", "list"}, ExitError, `^hf-cli: get /api/v1/machineclaims: dial tcp`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			saved := map[string]string{}
			for k, v := range tt.env {
				saved[k] = c.env[k]
				c.env[k] = v
			}
			defer func() {
				for k, v := range saved {
					c.env[k] = v
				}
			}()
			r := c.run(tt.args...)
			assert.Equal(t, tt.code, r.code, "stderr: %s", r.err)
			assert.Regexp(t, regexp.MustCompile(tt.errRe), r.err)
			assert.LessOrEqual(t, strings.Count(r.err, "\n"), 1, "one-line error: %q", r.err)
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	c := newCLI(t)
	for _, args := range [][]string{{}, {"--help"}, {"claim"}, {"claim", "create", "--help"}} {
		r := c.run(args...)
		assert.Equal(t, 0, r.code, "%v: %s", args, r.err)
		assert.Contains(t, r.out, "Usage:")
	}
}

// A watch whose endpoint accepts the connection and never answers gives up
// after --timeout with the timeout's exit code, as every other request does;
// a stream that is open runs past it.
func TestWatchOpeningIsBoundedByTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = conn.Close() }) // held open, never answered
		}
	}()
	c := newCLI(t)
	start := time.Now()
	r := c.run("--endpoint", "http://"+ln.Addr().String(), "--timeout", "300ms", "claim", "watch")
	assert.Equal(t, ExitTimeout, r.code, r.err)
	assert.Contains(t, r.err, "no answer within 300ms to open the watch stream")
	assert.Less(t, time.Since(start), 5*time.Second)

	// An open stream outlives --timeout.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	run := c.start(ctx, "--timeout", "100ms", "claim", "watch")
	require.Eventually(t, func() bool { return c.srv.Watchers() == 1 }, 5*time.Second, 5*time.Millisecond)
	time.Sleep(300 * time.Millisecond)
	c.srv.Put(newClaim("c1", "small", "", nil))
	require.Eventually(t, func() bool { return strings.Contains(run.out.String(), "c1") }, 5*time.Second, 5*time.Millisecond)
	cancel()
	require.Equal(t, 0, run.wait(t), run.err.String())
}
