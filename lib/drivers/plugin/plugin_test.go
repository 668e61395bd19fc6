package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/rpc"
	"net/rpc/jsonrpc"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/internal/syncbuf"
	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/types"
)

// The test binary is its own plugin: started with the cookie, it serves
// the fake driver below (and the test driver) instead of running tests.
func TestMain(m *testing.M) {
	if os.Getenv("HF_PLUGIN_TEST_SILENT") != "" {
		// Not a plugin: it never answers (TestNotAPlugin).
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	if os.Getenv(cookieEnv) != "" {
		if err := Serve("plugin.test", map[string]drivers.Factory{"fake": newFake, testdriver.Type: testdriver.New}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// fake is a driver whose calls do what the template's or resource's name
// says, and leave marks in its data dir for the test to find.
type fake struct {
	env      drivers.Env
	mu       sync.Mutex
	prepares int
}

func newFake(env drivers.Env) drivers.Driver { return &fake{env: env} }

func (f *fake) mark(name, text string) {
	_ = os.WriteFile(filepath.Join(f.env.DataDir, name), []byte(text), 0o600)
}

func (f *fake) Name() string   { return "fake" }
func (f *fake) IsRemote() bool { return true }

func (f *fake) Prepare(_ context.Context, cfg []byte) error {
	var c struct{ Fail bool }
	if err := json.Unmarshal(cfg, &c); err != nil {
		return err
	}
	if c.Fail {
		return types.Invalid("zone", "no such zone %q", "z9")
	}
	f.mu.Lock()
	f.prepares++
	f.mu.Unlock()
	f.env.Log.Info("prepared", "zone", "z1", "instance", f.env.Instance)
	f.env.Log.Debug("prepare detail", "zone", "z1")
	return nil
}

func (f *fake) ValidateTemplate(t types.MachineTemplate) error {
	if t.Metadata.Name == "bad" {
		return types.Invalid("spec.providerConfiguration.fake.size", "must be small")
	}
	return nil
}

func (f *fake) HostCapacity() types.Capacity {
	f.mu.Lock()
	defer f.mu.Unlock()
	return types.Capacity{Total: types.Resources{CPU: float64(os.Getpid())}, Usable: types.Resources{CPU: float64(f.prepares)}}
}

func (f *fake) Allocate(ctx context.Context, t types.MachineTemplate, meta map[string]string) (*types.Resource, error) {
	switch t.Metadata.Name {
	case "block":
		<-ctx.Done()
		f.mark("allocate-ended", ctx.Err().Error())
		return nil, ctx.Err()
	case "crash":
		os.Exit(3)
	case "full":
		return nil, fmt.Errorf("zone z1 is full: %w", drivers.ErrNoCapacity)
	}
	_, deadline := ctx.Deadline()
	return &types.Resource{ID: meta["id"], Driver: f.env.Instance,
		Info: map[string]string{"deadline": fmt.Sprint(deadline), "node": f.env.NodeName,
			"env": os.Getenv("HF_ADMIN_TOKEN") + "|" + os.Getenv("AWS_REGION")}, Data: json.RawMessage(`{"vm":"i-1"}`)}, nil
}

func (f *fake) Status(_ context.Context, r *types.Resource) (types.MachinePhase, error) {
	if r.ID == "gone" {
		return "", fmt.Errorf("vm %s: %w", r.ID, drivers.ErrNotFound)
	}
	return types.MachineRunning, nil
}

func (f *fake) Deallocate(context.Context, *types.Resource) error { return nil }

func (f *fake) List(context.Context) ([]types.Resource, error) {
	return []types.Resource{{ID: "a", Driver: "fake"}, {ID: "b", Driver: "fake"}}, nil
}

func (f *fake) Activity(context.Context, *types.Resource) (uint64, error) { return 42, nil }

func (f *fake) Logs(ctx context.Context, r *types.Resource, opts drivers.LogOptions, w io.Writer) error {
	if r.ID == "big" {
		line := bytes.Repeat([]byte("x"), 1023)
		for range 1024 {
			if _, err := w.Write(append(line, '\n')); err != nil {
				return err
			}
		}
		return nil
	}
	for i := range opts.Tail {
		fmt.Fprintf(w, "line %d\n", i)
	}
	if !opts.Follow {
		return nil
	}
	defer f.mark("logs-ended", "")
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
			if _, err := io.WriteString(w, "tick\n"); err != nil {
				return err
			}
		}
	}
}

func (f *fake) Close() error {
	f.mark("closed", "")
	return nil
}

// start is a driver of typ run by this test binary, closed (its process
// checked gone) when the test ends.
func start(t *testing.T, typ string) (*Driver, *syncbuf.Buffer, string) {
	t.Helper()
	logs := &syncbuf.Buffer{}
	dir := t.TempDir()
	d := New(Options{Executable: "plugin.test", Path: os.Args[0]}, typ, drivers.Env{
		Instance: typ + "/one", DataDir: dir, NodeName: "n1",
		Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	t.Cleanup(func() {
		d.mu.Lock()
		p := d.p
		d.mu.Unlock()
		_ = d.Close()
		if p != nil {
			select {
			case <-p.exited:
			default:
				t.Errorf("plugin process %d still runs after Close", p.cmd.Process.Pid)
			}
		}
	})
	return d, logs, dir
}

func prepare(t *testing.T, d *Driver) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, d.Prepare(ctx, []byte(`{}`)))
}

func template(name string) types.MachineTemplate {
	return types.MachineTemplate{Metadata: types.ObjectMeta{Name: name}}
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10 s: %s", what)
		}
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Every call of the contract crosses the process and comes back as the
// driver answered it: values, and errors that still match their sentinels
// and name their field.
func TestCallsCrossTheProcess(t *testing.T) {
	t.Setenv("HF_ADMIN_TOKEN", "secret-of-the-node")
	t.Setenv("AWS_REGION", "us-test-1")
	d, logs, dir := start(t, "fake")
	ctx := context.Background()
	assert.False(t, d.IsRemote(), "unknown before the plugin runs")
	prepare(t, d)
	assert.True(t, d.IsRemote())
	assert.Equal(t, "fake", d.Name())
	eventually(t, "the plugin's log record in the node's log", func() bool {
		return strings.Contains(logs.String(), `level=INFO msg=prepared plugin=plugin.test instance=fake/one zone=z1`)
	})

	err := d.ValidateTemplate(template("bad"))
	var fe *types.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "spec.providerConfiguration.fake.size", fe.Field)
	assert.True(t, errors.Is(err, types.ErrInvalid))
	assert.NoError(t, d.ValidateTemplate(template("good")))

	c := d.HostCapacity()
	assert.NotEqual(t, float64(os.Getpid()), c.Total.CPU, "the driver runs in another process")
	assert.Equal(t, 1.0, c.Usable.CPU)

	r, err := d.Allocate(ctx, template("ok"), map[string]string{"id": "m-1"})
	require.NoError(t, err)
	assert.Equal(t, "m-1", r.ID)
	assert.Equal(t, "fake/one", r.Driver)
	assert.Equal(t, "n1", r.Info["node"])
	assert.JSONEq(t, `{"vm":"i-1"}`, string(r.Data))
	assert.Equal(t, "|us-test-1", r.Info["env"], "the node's HF_ settings stay in the node, the SDKs' get through")

	_, err = d.Allocate(ctx, template("full"), nil)
	assert.ErrorIs(t, err, drivers.ErrNoCapacity)
	assert.EqualError(t, err, "zone z1 is full: no capacity")

	phase, err := d.Status(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, types.MachineRunning, phase)
	_, err = d.Status(ctx, &types.Resource{ID: "gone"})
	assert.ErrorIs(t, err, drivers.ErrNotFound)

	list, err := d.List(ctx)
	require.NoError(t, err)
	assert.Len(t, list, 2)
	n, err := d.Activity(ctx, r)
	require.NoError(t, err)
	assert.EqualValues(t, 42, n)
	require.NoError(t, d.Deallocate(ctx, r))

	require.NoError(t, d.Close())
	assert.True(t, exists(filepath.Join(dir, "closed")), "Close reached the driver")
	_, err = d.List(ctx)
	assert.ErrorIs(t, err, errClosed)
}

// A caller's cancellation and deadline reach the driver in the plugin.
func TestContextCrossesTheProcess(t *testing.T) {
	d, _, dir := start(t, "fake")
	prepare(t, d)

	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	began := time.Now()
	_, err := d.Allocate(ctx, template("block"), nil)
	assert.ErrorIs(t, err, context.Canceled)
	assert.Less(t, time.Since(began), 5*time.Second)
	eventually(t, "the plugin's Allocate sees its context cancelled", func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "allocate-ended"))
		return string(b) == context.Canceled.Error()
	})

	ctx, cancel = context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err = d.Allocate(ctx, template("block"), nil)
	assert.ErrorIs(t, err, context.DeadlineExceeded)

	ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := d.Allocate(ctx, template("ok"), nil)
	require.NoError(t, err)
	assert.Equal(t, "true", r.Info["deadline"])
	r, err = d.Allocate(context.Background(), template("ok"), nil)
	require.NoError(t, err)
	assert.Equal(t, "false", r.Info["deadline"])
}

// A machine's logs come across whole, however long, and a followed stream
// ends in the plugin when its reader stops.
func TestLogsCrossTheProcess(t *testing.T) {
	d, _, dir := start(t, "fake")
	prepare(t, d)
	ctx := context.Background()

	var out bytes.Buffer
	require.NoError(t, d.Logs(ctx, &types.Resource{ID: "m"}, drivers.LogOptions{Tail: 3}, &out))
	assert.Equal(t, "line 0\nline 1\nline 2\n", out.String())

	out.Reset()
	require.NoError(t, d.Logs(ctx, &types.Resource{ID: "big"}, drivers.LogOptions{}, &out))
	assert.Equal(t, 1<<20, out.Len())
	assert.Equal(t, strings.Repeat(strings.Repeat("x", 1023)+"\n", 1024), out.String())

	fctx, cancel := context.WithCancel(ctx)
	w := &syncbuf.Buffer{}
	done := make(chan error, 1)
	go func() { done <- d.Logs(fctx, &types.Resource{ID: "m"}, drivers.LogOptions{Tail: 1, Follow: true}, w) }()
	eventually(t, "followed lines", func() bool { return strings.Count(w.String(), "tick") >= 3 })
	cancel()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second):
		t.Fatal("Logs did not return after its context ended")
	}
	assert.True(t, strings.HasPrefix(w.String(), "line 0\ntick\n"), w.String())
	eventually(t, "the plugin's Logs ends", func() bool { return exists(filepath.Join(dir, "logs-ended")) })
}

// A plugin that dies is started again by the next call, and prepared as
// the one before.
func TestPluginRestartsAfterExit(t *testing.T) {
	d, logs, _ := start(t, "fake")
	prepare(t, d)
	first := d.HostCapacity().Total.CPU

	_, err := d.Allocate(context.Background(), template("crash"), nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "exited (exit status 3)")

	c := d.HostCapacity()
	assert.NotEqual(t, first, c.Total.CPU, "another process")
	assert.Equal(t, 1.0, c.Usable.CPU, "prepared again")
	assert.Contains(t, logs.String(), "driver plugin exited; starting it again")
}

// A plugin whose driver refuses its configuration is stopped; the error
// names the field.
func TestPrepareFailureStopsThePlugin(t *testing.T) {
	d, _, _ := start(t, "fake")
	d.mu.Lock()
	assert.Nil(t, d.p)
	d.mu.Unlock()
	err := d.Prepare(context.Background(), []byte(`{"fail": true}`))
	var fe *types.FieldError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, "zone", fe.Field)
	d.mu.Lock()
	assert.Nil(t, d.p, "no process kept for a driver that is not prepared")
	d.mu.Unlock()
}

// When the node goes away (its end of the pipes closes, as when it is
// killed), the plugin closes its driver and exits.
func TestPluginExitsWithItsNode(t *testing.T) {
	d, _, dir := start(t, "fake")
	prepare(t, d)
	d.mu.Lock()
	p := d.p
	d.mu.Unlock()
	require.NoError(t, p.client.Close())
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the plugin still runs without its node")
	}
	assert.True(t, exists(filepath.Join(dir, "closed")))
}

// Signals sent to the node's process group (a terminal's Ctrl-C, the
// hang-up of a node under nohup, which the node ignores) do not end the
// plugin: the node ends it, by closing its requests.
func TestPluginIgnoresTheGroupsSignals(t *testing.T) {
	d, _, _ := start(t, "fake")
	prepare(t, d)
	first := d.HostCapacity().Total.CPU
	d.mu.Lock()
	p := d.p
	d.mu.Unlock()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		require.NoError(t, p.cmd.Process.Signal(sig))
	}
	// A Go process dies of a signal it does not catch within milliseconds.
	assert.Never(t, func() bool {
		select {
		case <-p.exited:
			return true
		default:
			return false
		}
	}, 500*time.Millisecond, 10*time.Millisecond, "the plugin exits")
	assert.Equal(t, first, d.HostCapacity().Total.CPU, "the same process answers")
}

// The test driver runs as a plugin as it runs in the node: a real driver's
// types survive the trip.
func TestTestDriverAsPlugin(t *testing.T) {
	d, _, _ := start(t, testdriver.Type)
	ctx := context.Background()
	require.NoError(t, d.Prepare(ctx, []byte(`{"cpus": 4, "ram_gb": 8}`)))
	assert.False(t, d.IsRemote())
	assert.Equal(t, 4.0, d.HostCapacity().Total.CPU)
	tpl := types.MachineTemplate{Metadata: types.ObjectMeta{Name: "small"}, Spec: types.MachineTemplateSpec{
		Resources:             types.Resources{CPU: 1, RAMGB: 1},
		ProviderConfiguration: map[string]json.RawMessage{"test": json.RawMessage(`{}`)},
	}}
	require.NoError(t, d.ValidateTemplate(tpl))
	r, err := d.Allocate(ctx, tpl, map[string]string{"claim": "c1"})
	require.NoError(t, err)
	list, err := d.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, r.ID, list[0].ID)
	require.NoError(t, d.Deallocate(ctx, r))
	_, err = d.Status(ctx, r)
	assert.ErrorIs(t, err, drivers.ErrNotFound)
}

// A missing plugin is an error that says what to install, and where.
func TestMissingPlugin(t *testing.T) {
	d := New(Options{Executable: "hf-driver-nonesuch"}, "aws", drivers.Env{DataDir: t.TempDir()})
	err := d.Prepare(context.Background(), []byte(`{}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "the aws driver runs in hf-driver-nonesuch, which is neither next to")
	assert.Contains(t, err.Error(), "nor on PATH")
}

// Run by hand, a plugin says what it is for.
func TestServeByHand(t *testing.T) {
	err := Serve("hf-driver-cloud", map[string]drivers.Factory{"gce": newFake, "aws": newFake})
	assert.EqualError(t, err, "hf-driver-cloud runs the aws and gce drivers for hf-node, which starts it when its configuration has one; it is not run by hand")
}

// The plugin's log lines keep their level and attributes; other output
// (a panic) is logged line by line.
func TestPluginOutputIsLogged(t *testing.T) {
	var buf syncbuf.Buffer
	l := &logLines{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	_, _ = l.Write([]byte(`{"time":"x","level":"WARN","msg":"quota low","region":"r1","n":3}` + "\n" + `{"level":"DEBUG","msg":"hidden"}` + "\npanic: boo"))
	_, _ = l.Write([]byte("m\n\ngoroutine 1"))
	l.flush()
	got := buf.String()
	assert.Contains(t, got, `level=WARN msg="quota low" n=3 region=r1`)
	assert.NotContains(t, got, "hidden")
	assert.Contains(t, got, `msg="driver plugin output" line="panic: boom"`)
	assert.Contains(t, got, `msg="driver plugin output" line="goroutine 1"`)
}

// Whatever a plugin writes, its lines are logged and nothing panics.
func FuzzPluginOutput(f *testing.F) {
	f.Add([]byte(`{"level":"WARN","msg":"x","a":{"b":[1,2]}}` + "\n"))
	f.Add([]byte("panic: x\n\ngoroutine 1 [running]:\n"))
	f.Add([]byte(`{"level":"NOPE","msg":3}` + "\n" + `{"msg":"ok"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var buf syncbuf.Buffer
		l := &logLines{log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
		half := len(b) / 2
		_, _ = l.Write(b[:half])
		_, _ = l.Write(b[half:])
		l.flush()
		// (A JSON record may ask for a level below debug; anything else is
		// logged.)
		if !bytes.Contains(b, []byte("{")) && len(bytes.TrimSpace(b)) > 0 && buf.String() == "" {
			t.Fatalf("%q logged nothing", b)
		}
	})
}

// An executable that is not a plugin (it never answers: this test binary,
// told so) fails Prepare within the time a start has, and is killed.
func TestNotAPlugin(t *testing.T) {
	defer func(c, cl time.Duration) { callTimeout, closeTimeout = c, cl }(callTimeout, closeTimeout)
	callTimeout, closeTimeout = 300*time.Millisecond, 300*time.Millisecond
	d := New(Options{Executable: "silent", Path: os.Args[0], Env: []string{"HF_PLUGIN_TEST_SILENT=1"}}, "fake", drivers.Env{DataDir: t.TempDir()})
	began := time.Now()
	err := d.Prepare(context.Background(), []byte(`{}`))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "silent: context deadline exceeded")
	assert.Less(t, time.Since(began), 10*time.Second)
	d.mu.Lock()
	assert.Nil(t, d.p)
	d.mu.Unlock()
}

// While the plugin cannot run (its executable gone), HostCapacity gives
// the last capacity it answered, and says so once, not at every report.
func TestCapacityWhileThePluginIsGone(t *testing.T) {
	d, logs, _ := start(t, "fake")
	prepare(t, d)
	want := d.HostCapacity()
	d.mu.Lock()
	p := d.p
	d.opt.Path = filepath.Join(t.TempDir(), "gone")
	d.mu.Unlock()
	require.NoError(t, p.cmd.Process.Kill())
	<-p.exited
	for range 3 {
		assert.Equal(t, want, d.HostCapacity())
	}
	assert.Equal(t, 1, strings.Count(logs.String(), "driver plugin does not answer; its last capacity stands"), logs.String())
}

// The plugin writes no record below the level the node logs its drivers
// at: what the node would drop is not made, sent and parsed first.
func TestPluginLogsAtTheNodesLevel(t *testing.T) {
	for _, level := range []slog.Level{slog.LevelDebug, slog.LevelInfo} {
		nodeSide, pluginSide := net.Pipe()
		logs := &syncbuf.Buffer{}
		done := make(chan struct{})
		go func() {
			defer close(done)
			serveConn(pluginSide, map[string]drivers.Factory{"fake": newFake}, logs)
		}()
		c := rpc.NewClientWithCodec(jsonrpc.NewClientCodec(nodeSide))
		var ir InitReply
		require.NoError(t, c.Call(service+".Init", InitArgs{Protocol: protocol, Type: "fake", DataDir: t.TempDir(), LogLevel: level}, &ir))
		require.Nil(t, ir.Err)
		var r Result
		require.NoError(t, c.Call(service+".Prepare", PrepareArgs{Config: []byte(`{}`)}, &r))
		require.Nil(t, r.Err)
		require.NoError(t, c.Close())
		<-done
		assert.Contains(t, logs.String(), `"msg":"prepared"`)
		if level == slog.LevelDebug {
			assert.Contains(t, logs.String(), `"msg":"prepare detail"`)
		} else {
			assert.NotContains(t, logs.String(), "prepare detail", "the node logs at %s", level)
		}
	}
	assert.Equal(t, slog.LevelInfo, leastLevel(slog.New(slog.NewTextHandler(io.Discard, nil))))
	assert.Equal(t, slog.LevelError, leastLevel(slog.New(slog.DiscardHandler)))
}
