package cmd

import (
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/internal/syncbuf"
	"github.com/hf-fleet/hf/lib/client/clienttest"
	"github.com/hf-fleet/hf/lib/types"
)

// cli runs hf-cli in-process against a fake API server.
type cli struct {
	// localToken is Env.LocalToken (nil: no node on this host).
	localToken func() (string, error)
	// localCA is Env.LocalCA (nil: no node on this host).
	localCA func() ([]byte, error)
	// localEndpoint is Env.LocalEndpoint (nil: no node on this host).
	localEndpoint func() (string, error)
	t             *testing.T
	srv           *clienttest.Server
	env           map[string]string
	terminal      bool
	stdin         string
	rand          io.Reader
	// now is the commands' clock (nil: time.Now).
	now func() time.Time
	// transport, when set, carries the commands' API requests, so a test can
	// act between them.
	transport http.RoundTripper
	// unversioned runs the commands as a build with no version stamped.
	unversioned bool
}

// newCLI starts a fake server and points HF_ENDPOINT/HF_TOKEN at it, with
// profiles in a temporary HF_CONFIG_DIR.
func newCLI(t *testing.T) *cli {
	t.Helper()
	srv := clienttest.New(t)
	return &cli{t: t, srv: srv, rand: rand.Reader, env: map[string]string{
		"HF_ENDPOINT":   srv.URL,
		"HF_TOKEN":      clienttest.Token,
		"HF_CONFIG_DIR": t.TempDir(),
	}}
}

// running is a command running in the background.
type running struct {
	out, err *syncbuf.Buffer
	done     chan int
}

// wait returns the exit code, failing the test if the command does not end.
func (r *running) wait(t *testing.T) int {
	t.Helper()
	select {
	case code := <-r.done:
		return code
	case <-time.After(10 * time.Second):
		require.FailNow(t, "command did not finish", "stdout: %s\nstderr: %s", r.out.String(), r.err.String())
	}
	return -1
}

// start runs args in the background under ctx.
func (c *cli) start(ctx context.Context, args ...string) *running {
	r := &running{out: &syncbuf.Buffer{}, err: &syncbuf.Buffer{}, done: make(chan int, 1)}
	env := Env{
		In:            strings.NewReader(c.stdin),
		Out:           r.out,
		Err:           r.err,
		OutIsTerminal: c.terminal,
		Getenv:        func(k string) string { return c.env[k] },
		UserConfigDir: func() (string, error) { return "", errors.New("no user config dir in tests") },
		Now:           time.Now,
		Rand:          c.rand,
		Version:       "1.2.3-test",
	}
	if c.now != nil {
		env.Now = c.now
	}
	if c.unversioned {
		env.Version = ""
	}
	if c.transport != nil {
		env.HTTPClient = &http.Client{Transport: c.transport}
	}
	env.LocalToken = c.localToken
	env.LocalCA = c.localCA
	env.LocalEndpoint = c.localEndpoint
	go func() { r.done <- Main(ctx, env, args) }()
	return r
}

// result is the outcome of a finished command.
type result struct {
	out, err string
	code     int
}

// run runs args to completion.
func (c *cli) run(args ...string) result {
	c.t.Helper()
	r := c.start(context.Background(), args...)
	code := r.wait(c.t)
	return result{out: r.out.String(), err: r.err.String(), code: code}
}

// lines splits output into lines without the trailing empty one.
func lines(s string) []string {
	return strings.Split(strings.TrimRight(s, "\n"), "\n")
}

func newClaim(name, template, user string, labels map[string]string) *types.MachineClaim {
	return &types.MachineClaim{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
		Metadata: types.ObjectMeta{Name: name, Labels: labels},
		Spec:     types.MachineClaimSpec{MachineTemplate: template, User: user},
	}
}

// labelled gives m the labels and returns it.
func labelled(m *types.Machine, labels map[string]string) *types.Machine {
	m.Metadata.Labels = labels
	return m
}

func bound(cl *types.MachineClaim, node, machine string, took time.Duration) *types.MachineClaim {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cl.Status = types.MachineClaimStatus{
		Phase: types.ClaimBound, Node: node, Machine: machine, Driver: "test",
		PhaseTimes: types.MakePhaseTimes(types.PhaseTime{Phase: "Requested", At: t0}, types.PhaseTime{Phase: "Bound", At: t0.Add(took)}),
	}
	return cl
}

// watchQueries returns the queries of the watch streams the CLI opened.
func watchQueries(t *testing.T, c *cli) []url.Values {
	t.Helper()
	var out []url.Values
	for _, rq := range c.srv.Requests() {
		if rq.Path == "/api/v1/events" {
			q, err := url.ParseQuery(rq.Query)
			require.NoError(t, err)
			out = append(out, q)
		}
	}
	return out
}
