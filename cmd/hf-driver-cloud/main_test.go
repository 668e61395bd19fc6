package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/internal/syncbuf"
	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/cloud/ec2test"
	"github.com/hf-fleet/hf/lib/drivers/cloud/gcetest"
	"github.com/hf-fleet/hf/lib/drivers/plugin"
	"github.com/hf-fleet/hf/lib/types"
)

// The test binary is the plugin when a node (the test) starts it.
func TestMain(m *testing.M) {
	if plugin.StartedByNode() {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// The node registers the types this plugin runs, under its name.
func TestNodeKnowsThePlugin(t *testing.T) {
	var types []string
	for k := range factories() {
		types = append(types, k)
	}
	slices.Sort(types)
	assert.Equal(t, plugin.CloudTypes, types)
	assert.Equal(t, Name, plugin.Cloud.Executable)
}

// prepared is a driver of typ run in this plugin's process (the test
// binary), prepared with cfg plus a 16-vCPU quota and fast polls, closed
// when the test ends; its log, and a context for the test's calls.
func prepared(t *testing.T, typ string, cfg map[string]any) (*plugin.Driver, *syncbuf.Buffer, context.Context) {
	t.Helper()
	log := &syncbuf.Buffer{}
	d := plugin.New(plugin.Options{Executable: Name, Path: os.Args[0]}, typ, drivers.Env{
		Instance: typ, NodeName: "n1", DataDir: t.TempDir(),
		Log: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	t.Cleanup(func() { _ = d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	for k, v := range map[string]any{"quota": map[string]any{"vcpus": 16}, "poll_interval": "20ms", "retry_max_backoff": "20ms", "quota_refresh": "1h"} {
		cfg[k] = v
	}
	raw, err := json.Marshal(cfg)
	require.NoError(t, err)
	require.NoError(t, d.Prepare(ctx, raw), log.String())
	assert.True(t, d.IsRemote())
	return d, log, ctx
}

// The aws driver, run as the node runs it (in this plugin's process),
// against the EC2 test double through the real SDK: a VM is made, read,
// listed, its console read, and released; a bad template names its field.
func TestAWSDriverInThePlugin(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTESTDOUBLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-double-secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	srv := ec2test.New()
	t.Cleanup(srv.Close)
	const ami = "ami-0123456789abcdef0"
	srv.AddImage(ec2test.Image{ID: ami, Name: "lab", Owner: "self", CreationDate: "2025-01-01T00:00:00.000Z"})

	d, log, ctx := prepared(t, "aws", map[string]any{"region": "us-test-1", "endpoint": srv.URL})
	assert.Equal(t, 16.0, d.HostCapacity().Total.CPU)

	tpl := types.MachineTemplate{
		Metadata: types.ObjectMeta{Name: "vm"},
		Spec: types.MachineTemplateSpec{Resources: types.Resources{CPU: 2, RAMGB: 4},
			ProviderConfiguration: map[string]json.RawMessage{"aws": json.RawMessage(`{"ami": "` + ami + `", "instance_type": "t3.small"}`)}},
	}
	bad := tpl
	bad.Spec.ProviderConfiguration = map[string]json.RawMessage{"aws": json.RawMessage(`{"ami": "` + ami + `", "instance_type": 7}`)}
	var fe *types.FieldError
	require.ErrorAs(t, d.ValidateTemplate(bad), &fe)
	assert.Contains(t, fe.Field, "instance_type")
	require.NoError(t, d.ValidateTemplate(tpl))

	r, err := d.Allocate(ctx, tpl, map[string]string{"hf/claim": "c1"})
	require.NoError(t, err)
	assert.Len(t, srv.Live(), 1)
	phase, err := d.Status(ctx, r)
	require.NoError(t, err)
	assert.Equal(t, types.MachineRunning, phase)
	list, err := d.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, r.ID, list[0].ID)

	consoleReadsBack(ctx, t, d, r, srv)

	require.NoError(t, d.Deallocate(ctx, r))
	assert.Empty(t, srv.Live())
	_, err = d.Status(ctx, r)
	assert.ErrorIs(t, err, drivers.ErrNotFound)
	require.NoError(t, d.Close())
	assert.NotContains(t, log.String(), "driver plugin output", "the plugin logs only records")
}

// The gce driver, run as the node runs it, against the Compute test double
// through the real SDK, with a service account as Application Default
// Credentials (the plugin's process cannot be handed the in-process tests'
// option.WithoutAuthentication): a VM is made, listed, its serial port
// read, and released.
func TestGCEDriverInThePlugin(t *testing.T) {
	srv := gcetest.New()
	t.Cleanup(srv.Close)
	srv.AddImage("debian-cloud", "debian-12-v20250601", "debian-12")
	sa, err := srv.ServiceAccount("hf-test")
	require.NoError(t, err)
	keyFile := filepath.Join(t.TempDir(), "sa.json")
	require.NoError(t, os.WriteFile(keyFile, sa, 0o600))
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", keyFile)
	// Nothing may reach a metadata server: point it at a closed port here.
	t.Setenv("GCE_METADATA_HOST", "127.0.0.1:9")

	d, log, ctx := prepared(t, "gce", map[string]any{"project": "hf-test", "zone": "europe-west1-b", "endpoint": srv.Endpoint()})

	tpl := types.MachineTemplate{
		Metadata: types.ObjectMeta{Name: "vm"},
		Spec: types.MachineTemplateSpec{Resources: types.Resources{CPU: 2, RAMGB: 4},
			ProviderConfiguration: map[string]json.RawMessage{"gce": json.RawMessage(`{"image_family": "debian-12", "image_project": "debian-cloud", "machine_type": "e2-small", "network": "default"}`)}},
	}
	r, err := d.Allocate(ctx, tpl, map[string]string{"hf/claim": "c1"})
	require.NoError(t, err, log.String())
	assert.Len(t, srv.Instances(), 1)
	list, err := d.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	consoleReadsBack(ctx, t, d, r, srv)
	require.NoError(t, d.Deallocate(ctx, r))
	assert.Empty(t, srv.Instances())
	assert.Positive(t, srv.Calls("insert"))
	assert.Positive(t, srv.Calls("token"), "the SDK got its token from the test double, with the service account")
	require.NoError(t, d.Close())
}

// consoleReadsBack writes a line to r's console on the test double and reads
// it back through the plugin.
func consoleReadsBack(ctx context.Context, t *testing.T, d *plugin.Driver, r *types.Resource, srv interface{ AppendConsole(id, text string) bool }) {
	t.Helper()
	require.True(t, srv.AppendConsole(r.ID, "login: "))
	var out strings.Builder
	require.NoError(t, d.Logs(ctx, r, drivers.LogOptions{Tail: 1}, &out))
	assert.Equal(t, "login: ", out.String())
}
