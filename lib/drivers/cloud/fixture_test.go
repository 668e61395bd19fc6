package cloud

import (
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/option"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/cloud/ec2test"
	"github.com/hf-fleet/hf/lib/drivers/cloud/gcetest"
	"github.com/hf-fleet/hf/lib/types"
)

// Test images and places the test doubles know.
const (
	testAMI     = "ami-0123456789abcdef0"
	testAMIOld  = "ami-00000000000000001"
	testOwner   = "099720109477"
	testSubnet  = "subnet-0a1b2c3d4e5f60718"
	testProject = "hf-test-project"
	testZone    = "europe-west1-b"
)

func testLog(t testing.TB) *slog.Logger {
	if _, bench := t.(*testing.B); bench {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(p))
	return len(p), nil
}

// fixture is one test double and the drivers pointed at it.
type fixture struct {
	kind string
	ec2  *ec2test.Server
	gce  *gcetest.Server
}

func newAWSFixture(t testing.TB) *fixture {
	s := ec2test.New()
	t.Cleanup(s.Close)
	s.AddImage(ec2test.Image{ID: testAMIOld, Name: "ubuntu-24.04-20240101", Owner: testOwner, CreationDate: "2024-01-01T00:00:00.000Z", RootDevice: "/dev/sda1"})
	s.AddImage(ec2test.Image{ID: testAMI, Name: "ubuntu-24.04-20250601", Owner: testOwner, CreationDate: "2025-06-01T00:00:00.000Z", RootDevice: "/dev/sda1"})
	s.AddSubnet(testSubnet, map[string]string{"Name": "lab"})
	return &fixture{kind: TypeAWS, ec2: s}
}

func newGCEFixture(t testing.TB) *fixture {
	s := gcetest.New()
	t.Cleanup(s.Close)
	s.AddImage("debian-cloud", "debian-12-v20240101", "debian-12")
	s.AddImage("debian-cloud", "debian-12-v20250601", "debian-12")
	s.AddImage(testProject, "lab-image", "")
	return &fixture{kind: TypeGCE, gce: s}
}

// config is the driver config pointing at the test double, fast polls and
// retries, with extra keys on top.
func (f *fixture) config(extra map[string]any) []byte {
	c := map[string]any{
		"quota": map[string]any{"vcpus": 64}, "poll_interval": "10ms", "retry_max_backoff": "20ms",
		"quota_refresh": "1h", "no_capacity_hold": "0s",
	}
	if f.kind == TypeAWS {
		c["region"], c["endpoint"] = "us-test-1", f.ec2.URL
	} else {
		c["project"], c["zone"], c["endpoint"] = testProject, testZone, f.gce.Endpoint()
	}
	for k, v := range extra {
		c[k] = v
	}
	b, _ := json.Marshal(c)
	return b
}

// newDriver builds an unprepared driver for the fixture's provider.
func (f *fixture) newDriver(t testing.TB, node, instance string) *Driver {
	env := drivers.Env{Instance: instance, NodeName: node, DataDir: t.TempDir(), Log: testLog(t)}
	if f.kind == TypeAWS {
		return newAWS(env, []func(*awsconfig.LoadOptions) error{
			awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("AKIDTESTDOUBLE", "test-double-secret", "")),
			awsconfig.WithSharedConfigFiles([]string{}), awsconfig.WithSharedCredentialsFiles([]string{}),
		})
	}
	return newGCE(env, []option.ClientOption{option.WithoutAuthentication()})
}

// driver is a prepared driver of node "node-a", instance = the provider.
func (f *fixture) driver(t testing.TB, extra map[string]any) *Driver {
	return f.driverOf(t, "node-a", f.kind, extra)
}

func (f *fixture) driverOf(t testing.TB, node, instance string, extra map[string]any) *Driver {
	t.Helper()
	d := f.newDriver(t, node, instance)
	require.NoError(t, d.Prepare(t.Context(), f.config(extra)))
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// entry is a valid template entry for the provider, with extra keys on top.
func (f *fixture) entry(extra map[string]any) map[string]any {
	var e map[string]any
	if f.kind == TypeAWS {
		e = map[string]any{"ami": testAMI, "instance_type": "t3.small", "subnet_id": testSubnet,
			"security_group_ids": []string{"sg-0123456789abcdef0"}, "tags": map[string]string{"team": "lab"},
			"startup_script": "#!/bin/sh\n. /etc/hf/metadata.env\necho \"hello $LAB_USER\" > /tmp/hello\n"}
	} else {
		e = map[string]any{"image_family": "debian-12", "image_project": "debian-cloud", "machine_type": "e2-small",
			"network": "default", "external_ip": true, "labels": map[string]string{"team": "lab"},
			"startup_script": "#!/bin/sh\ncurl -s -H Metadata-Flavor:Google http://metadata/computeMetadata/v1/instance/attributes/LAB_USER\n"}
	}
	for k, v := range extra {
		e[k] = v
	}
	return e
}

// template is a 2-vCPU template with the fixture's entry.
func (f *fixture) template(name string, extra map[string]any) types.MachineTemplate {
	b, _ := json.Marshal(f.entry(extra))
	return types.MachineTemplate{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate},
		Metadata: types.ObjectMeta{Name: name},
		Spec: types.MachineTemplateSpec{
			Resources:             types.Resources{CPU: 2, RAMGB: 4, DiskGB: 20},
			ProviderConfiguration: map[string]json.RawMessage{f.kind: b},
			ConnectProtocols:      []string{"ssh"},
			ClaimMetadata:         []types.MetadataKey{{Name: "LAB_USER"}},
		},
	}
}

// live counts the instances in the test double that are not gone.
func (f *fixture) live() int {
	if f.kind == TypeAWS {
		return len(f.ec2.Live())
	}
	return len(f.gce.Instances())
}

// setDelay sets the test double's create delay.
func (f *fixture) setDelay(d time.Duration) {
	if f.kind == TypeAWS {
		f.ec2.Update(func(x *ec2test.Faults) { x.CreateDelay = d })
	} else {
		f.gce.Update(func(x *gcetest.Faults) { x.CreateDelay = d })
	}
}

func forEachProvider(t *testing.T, fn func(t *testing.T, f *fixture)) {
	for _, kind := range []string{TypeAWS, TypeGCE} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			if kind == TypeAWS {
				fn(t, newAWSFixture(t))
			} else {
				fn(t, newGCEFixture(t))
			}
		})
	}
}
