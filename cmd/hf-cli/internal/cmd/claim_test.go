package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestClaimCreateShortcut(t *testing.T) {
	c := newCLI(t)
	c.rand = bytes.NewReader([]byte{0xde, 0xad, 0xbe, 0xef})
	r := c.run("claim", "create", "--template", "small", "--user", "alice",
		"--label", "job=ci", "--label", "team=a", "--meta", "BUILD_SHA=abc123",
		"--bind-timeout", "30s", "--machine-set", "pool", "--bind-strategy", "PreferMachineSets", "-o", "json")
	require.Equal(t, 0, r.code, r.err)
	var got types.MachineClaim
	require.NoError(t, json.Unmarshal([]byte(r.out), &got))
	assert.Equal(t, "claim-deadbeef", got.Metadata.Name)
	assert.NoError(t, types.ValidateName("name", got.Metadata.Name))

	o, ok := c.srv.Object(types.KindMachineClaim, "claim-deadbeef")
	require.True(t, ok)
	cl := o.(*types.MachineClaim)
	assert.Equal(t, "small", cl.Spec.MachineTemplate)
	assert.Equal(t, "alice", cl.Spec.User)
	assert.Equal(t, map[string]string{"job": "ci", "team": "a"}, cl.Metadata.Labels)
	assert.Equal(t, map[string]string{"BUILD_SHA": "abc123"}, cl.Spec.Metadata)
	assert.Equal(t, 30*time.Second, cl.Spec.BindTimeout.Duration)
	assert.Equal(t, []string{"pool"}, cl.Spec.MachineSets)
	assert.Equal(t, types.BindPreferMachineSets, cl.Spec.BindStrategy)

	// A given name is used; without --wait the table shows the new claim.
	r = c.run("claim", "create", "mine", "--template", "small")
	require.Equal(t, 0, r.code, r.err)
	assert.Regexp(t, `(?m)^mine\tsmall\t`, r.out)
}

func TestClaimCreateUsageErrors(t *testing.T) {
	c := newCLI(t)
	tests := map[string][]string{
		"no template":          {"claim", "create"},
		"bad name":             {"claim", "create", "Not_A_Name", "--template", "small"},
		"bad label":            {"claim", "create", "--template", "small", "--label", "nolabel"},
		"bad meta":             {"claim", "create", "--template", "small", "--meta", "=x"},
		"bad bind strategy":    {"claim", "create", "--template", "small", "--bind-strategy", "Whatever"},
		"bad bind timeout":     {"claim", "create", "--template", "small", "--bind-timeout", "soon"},
		"wait-timeout no wait": {"claim", "create", "--template", "small", "--wait-timeout", "1s"},
		"two names":            {"claim", "create", "a", "b", "--template", "small"},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			r := c.run(args...)
			assert.Equal(t, ExitUsage, r.code, r.err)
			assert.Empty(t, c.srv.Requests(), "nothing reaches the server")
		})
	}
}

// flipWhenWatched waits until the claim exists and, when the watch is on,
// until the command watches; then it lets the cluster write status.
func flipWhenWatched(t *testing.T, c *cli, name string, watching bool, status types.MachineClaimStatus) {
	t.Helper()
	require.Eventually(t, func() bool {
		_, ok := c.srv.Object(types.KindMachineClaim, name)
		return ok && (!watching || c.srv.Watchers() > 0)
	}, 5*time.Second, 5*time.Millisecond)
	o, _ := c.srv.Object(types.KindMachineClaim, name)
	cl := o.(*types.MachineClaim)
	cl.Status = status
	c.srv.Put(cl)
}

func TestClaimCreateWaitBound(t *testing.T) {
	for _, watch := range []bool{true, false} {
		name := "watch stream"
		if !watch {
			name = "polling fallback"
		}
		t.Run(name, func(t *testing.T) {
			c := newCLI(t)
			c.srv.DisableWatch(!watch)
			run := c.start(context.Background(), "claim", "create", "c1", "--template", "small", "--wait")
			t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
			flipWhenWatched(t, c, "c1", watch, types.MachineClaimStatus{
				Phase: types.ClaimBound, Node: "n1", Machine: "m-7f3a", Driver: "test",
				PhaseTimes: types.MakePhaseTimes(types.PhaseTime{Phase: "Requested", At: t0}, types.PhaseTime{Phase: "Bound", At: t0.Add(12 * time.Millisecond)}),
			})
			require.Equal(t, 0, run.wait(t), run.err.String())
			assert.Equal(t, "Requested c1 (template small)\nBound on node n1 (machine m-7f3a) in 12ms\n", run.err.String())
			assert.Regexp(t, `(?m)^c1\tsmall\t\tBound\tn1\tm-7f3a\t`, run.out.String())
			if watch {
				q := watchQueries(t, c)
				require.NotEmpty(t, q)
				assert.Equal(t, "metadata.name=c1", q[0].Get("fieldSelector"), "the stream carries this claim only")
			}
		})
	}
}

func TestClaimCreateWaitFailed(t *testing.T) {
	c := newCLI(t)
	run := c.start(context.Background(), "claim", "create", "c1", "--template", "huge", "--wait")
	flipWhenWatched(t, c, "c1", true, types.MachineClaimStatus{
		Phase: types.ClaimFailed, Reason: "no node has capacity for template huge (needs 64 CPUs)",
	})
	assert.Equal(t, ExitTimeout, run.wait(t))
	assert.Equal(t, "Requested c1 (template huge)\n"+
		"hf-cli: claim \"c1\" failed: no node has capacity for template huge (needs 64 CPUs)\n", run.err.String())
	assert.Empty(t, run.out.String())
}

func TestClaimCreateWaitTimesOut(t *testing.T) {
	c := newCLI(t)
	r := c.run("claim", "create", "c1", "--template", "small", "--wait", "--wait-timeout", "300ms")
	assert.Equal(t, ExitTimeout, r.code)
	assert.Contains(t, r.err, `hf-cli: timed out after 300ms waiting for claim "c1" to be bound (phase Requested)`)
}

// stallGets is a transport that holds every GET of one path until its
// request ends, and passes the rest on.
type stallGets string

func (p stallGets) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodGet && req.URL.Path == string(p) {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return http.DefaultTransport.RoundTrip(req)
}

// A read cut short by the wait's own end is not "the last error": the
// message says the wait timed out, not that a read failed.
func TestClaimCreateWaitTimeoutIsNoReadError(t *testing.T) {
	c := newCLI(t)
	c.transport = stallGets("/api/v1/machineclaims/c1")
	r := c.run("claim", "create", "c1", "--template", "small", "--wait", "--wait-timeout", "300ms")
	assert.Equal(t, ExitTimeout, r.code)
	assert.Contains(t, r.err, `hf-cli: timed out after 300ms waiting for claim "c1" to be bound`)
	assert.NotContains(t, r.err, "last error")
}

// A wait that times out says what the claim itself says it waits for.
func TestClaimCreateWaitTimesOutWithTheReason(t *testing.T) {
	c := newCLI(t)
	run := c.start(context.Background(), "claim", "create", "c1", "--template", "huge", "--wait", "--wait-timeout", "500ms")
	flipWhenWatched(t, c, "c1", true, types.MachineClaimStatus{
		Phase: types.ClaimRequested, Reason: "no node has room for template huge (needs 64 CPUs); it waits for capacity",
	})
	assert.Equal(t, ExitTimeout, run.wait(t))
	assert.Contains(t, run.err.String(), `waiting for claim "c1" to be bound (phase Requested: no node has room for template huge (needs 64 CPUs); it waits for capacity)`)
	assert.Regexp(t, `Waiting after [0-9.]+m?s: no node has room for template huge`, run.err.String(), "the reason is shown while it waits, once")
	assert.Equal(t, 1, strings.Count(run.err.String(), "Waiting after"))
}

func TestClaimCreateWaitClaimDeleted(t *testing.T) {
	c := newCLI(t)
	run := c.start(context.Background(), "claim", "create", "c1", "--template", "small", "--wait")
	require.Eventually(t, func() bool { return c.srv.Watchers() > 0 }, 5*time.Second, 5*time.Millisecond)
	c.srv.Remove(types.KindMachineClaim, "c1")
	assert.Equal(t, ExitNotFound, run.wait(t))
	assert.Contains(t, run.err.String(), `hf-cli: not_found: machineclaim "c1" not found`)
}

func TestClaimCreateWaitSurvivesStreamLoss(t *testing.T) {
	c := newCLI(t)
	run := c.start(context.Background(), "claim", "create", "c1", "--template", "small", "--wait")
	require.Eventually(t, func() bool { return c.srv.Watchers() > 0 }, 5*time.Second, 5*time.Millisecond)
	// The stream breaks; the wait goes on by polling.
	c.srv.DisableWatch(true)
	c.srv.CloseWatches()
	flipWhenWatched(t, c, "c1", false, types.MachineClaimStatus{Phase: types.ClaimBound, Node: "n2", Machine: "m-2"})
	require.Equal(t, 0, run.wait(t), run.err.String())
	assert.Contains(t, run.err.String(), "Bound on node n2 (machine m-2)\n")
}

func TestClaimCreateWaitInterrupted(t *testing.T) {
	c := newCLI(t)
	ctx, cancel := context.WithCancel(context.Background())
	run := c.start(ctx, "claim", "create", "c1", "--template", "small", "--wait")
	require.Eventually(t, func() bool {
		return c.srv.Watchers() > 0 && strings.Contains(run.err.String(), "Requested")
	}, 5*time.Second, 5*time.Millisecond)
	cancel()
	assert.Equal(t, ExitError, run.wait(t))
	assert.Equal(t, "Requested c1 (template small)\nhf-cli: interrupted\n", run.err.String())
}

func TestClaimProgress(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cl := newClaim("c1", "small", "", nil)
	cl.Metadata.CreatedAt = t0
	var p claimProgress
	assert.Equal(t, []string{"Requested c1 (template small)"}, p.observe(cl))
	assert.Empty(t, p.observe(cl), "nothing new")

	cl.Status = types.MachineClaimStatus{Phase: types.ClaimBound, Node: "n1", Machine: "m1",
		PhaseTimes: types.MakePhaseTimes(types.PhaseTime{Phase: "Bound", At: t0.Add(1500 * time.Millisecond)})}
	assert.Equal(t, []string{"Bound on node n1 (machine m1) in 1.5s"}, p.observe(cl), "falls back to createdAt")
	assert.Empty(t, p.observe(cl))

	// Seen Bound at once: both lines.
	var q claimProgress
	assert.Equal(t, []string{"Requested c1 (template small)", "Bound on node n1 (machine m1) in 1.5s"}, q.observe(cl))
}

func TestClaimOutcome(t *testing.T) {
	tests := []struct {
		phase   types.ClaimPhase
		done    bool
		wantErr string
	}{
		{"", false, ""},
		{types.ClaimRequested, false, ""},
		{types.ClaimBound, true, ""},
		{types.ClaimFailed, false, `claim "c1" failed: no reason given`},
		{types.ClaimTerminated, false, `claim "c1" failed: terminated before it was bound`},
	}
	for _, tt := range tests {
		t.Run(string(tt.phase), func(t *testing.T) {
			cl := newClaim("c1", "small", "", nil)
			cl.Status.Phase = tt.phase
			done, err := claimOutcome(cl)
			assert.Equal(t, tt.done, done)
			if tt.wantErr == "" {
				assert.NoError(t, err)
				return
			}
			assert.EqualError(t, err, tt.wantErr)
			assert.Equal(t, ExitTimeout, ExitCode(err))
		})
	}
}

// TestNameArgsMustBeNames: get and delete refuse an argument no object can
// be named (a selector typed as a name) before anything is sent, naming it.
func TestNameArgsMustBeNames(t *testing.T) {
	c := newCLI(t)
	for _, args := range [][]string{
		{"claim", "delete", "a1,hf/claim!=x"},
		{"claim", "delete", "ok", "Not_A_Name"},
		{"template", "get", "a/b"},
	} {
		r := c.run(args...)
		assert.Equal(t, ExitUsage, r.code, "%v: %s", args, r.err)
		assert.Contains(t, r.err, fmt.Sprintf("%q is not a name", args[len(args)-1]), args)
		assert.Empty(t, c.srv.Requests(), "nothing reaches the server")
	}
}
