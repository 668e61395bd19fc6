package clustertest

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster"
	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/cloud"
	"github.com/hf-fleet/hf/lib/drivers/cloud/ec2test"
	"github.com/hf-fleet/hf/lib/types"
)

const cloudAMI = "ami-0123456789abcdef0"

// cloudFleet starts one node whose only driver is aws, pointed at an EC2
// test double (static fake credentials from the environment, as the SDK's
// default chain reads them).
func cloudFleet(t *testing.T, srv *ec2test.Server) *Fleet {
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDTESTDOUBLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-double-secret")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	srv.AddImage(ec2test.Image{ID: cloudAMI, Name: "lab", Owner: "self", CreationDate: "2025-01-01T00:00:00.000Z"})
	cfg, _ := json.Marshal(map[string]any{
		"region": "us-test-1", "endpoint": srv.URL, "quota": map[string]any{"vcpus": 100},
		"poll_interval": "20ms", "retry_max_backoff": "20ms", "quota_refresh": "100ms", "no_capacity_hold": "0s",
	})
	return Start(t, 1, Options{Drivers: func(t testing.TB, i int, node, dir string) []cluster.Instance {
		d := cloud.NewAWS(drivers.Env{Instance: "aws", NodeName: node, DataDir: filepath.Join(dir, "aws"), Log: Logger()})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, d.Prepare(ctx, cfg))
		return []cluster.Instance{{Name: "aws", Type: cloud.TypeAWS, Driver: d}}
	}})
}

func cloudTemplate(name string) *types.MachineTemplate {
	return &types.MachineTemplate{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate},
		Metadata: types.ObjectMeta{Name: name},
		Spec: types.MachineTemplateSpec{
			Resources: types.Resources{CPU: 2, RAMGB: 4},
			ProviderConfiguration: map[string]json.RawMessage{
				"aws": json.RawMessage(`{"ami": "` + cloudAMI + `", "instance_type": "t3.small"}`),
			},
		},
	}
}

// With the account's vCPU quota at 8 (Service Quotas, lower than the
// configured 100) and 2-vCPU templates, four claims bind, the fifth waits
// (Requested, not Failed) and binds once one of the four is released.
func TestCloudQuotaClaimWaits(t *testing.T) {
	srv := ec2test.New()
	t.Cleanup(srv.Close)
	srv.SetVCPUQuota(8)
	f := cloudFleet(t, srv)
	f.Put(0, cloudTemplate("vm"))
	f.WaitEverywhere(types.KindMachineTemplate, "vm")
	for i := range 4 {
		f.Put(0, Claim(fmt.Sprintf("c%d", i), "vm", time.Minute))
	}
	for i := range 4 {
		waitClaim(t, f.Hosts[0], fmt.Sprintf("c%d", i), types.ClaimBound)
	}
	f.Put(0, Claim("fifth", "vm", time.Minute))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		cl := f.Hosts[0].Claims()["fifth"]
		if assert.NotNil(c, cl) {
			assert.Equal(c, types.ClaimRequested, cl.Status.Phase)
			assert.Contains(c, cl.Status.Reason, "cpu")
		}
	}, 15*time.Second, 20*time.Millisecond, "the fifth claim waits for capacity")
	assert.Len(t, srv.Live(), 4)

	_, err := f.Hosts[0].Store.Delete(types.KindMachineClaim, "c0", types.Version{})
	require.NoError(t, err)
	waitClaim(t, f.Hosts[0], "fifth", types.ClaimBound)
	require.Eventually(t, func() bool { return len(srv.Live()) == 4 }, 15*time.Second, 20*time.Millisecond,
		"c0's VM is terminated, the fifth's runs")
}

// An AutoScale set of cloud machines fills in parallel: with a create delay
// of 1 s, the node starts all five VMs within one delay of each other (one
// at a time they would start a second apart).
func TestCloudPoolFillsInParallel(t *testing.T) {
	srv := ec2test.New()
	t.Cleanup(srv.Close)
	srv.SetFaults(ec2test.Faults{CreateDelay: time.Second})
	f := cloudFleet(t, srv)
	f.Put(0, cloudTemplate("vm"))
	f.WaitEverywhere(types.KindMachineTemplate, "vm")
	f.Put(0, machineSet("pool", "vm", 5, 5))
	require.Eventually(t, func() bool {
		_, available := poolCounts(f.Hosts[0], "pool")
		return available == 5
	}, 30*time.Second, 20*time.Millisecond, "the pool fills")
	var first, last time.Time
	for _, in := range srv.Instances() {
		if first.IsZero() || in.Launched.Before(first) {
			first = in.Launched
		}
		if in.Launched.After(last) {
			last = in.Launched
		}
	}
	require.Len(t, srv.Instances(), 5)
	t.Logf("five VMs launched within %s", last.Sub(first))
	assert.Less(t, last.Sub(first), time.Second, "all five were created while the first was still starting")
}
