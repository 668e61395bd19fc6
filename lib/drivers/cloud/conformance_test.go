package cloud

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/api/compute/v1"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/cloud/ec2test"
	"github.com/hf-fleet/hf/lib/drivers/drivertest"
	"github.com/hf-fleet/hf/lib/types"
)

// conformanceMeta is the claim metadata of the conformance runs: the node's
// HF_* keys, one declared key and two that must never reach a VM.
var conformanceMeta = map[string]string{
	"HF_CLAIM": "claim-1", "HF_MACHINE": "machine-1", "LAB_USER": "o'brien",
	"LD_PRELOAD": "/evil.so", "undeclared": "x",
}

// TestConformanceAWS runs the shared driver checks against the EC2 test
// double with the real SDK. CheckRunning proves what RunInstances was sent
// (tags, user data with only the declared metadata, gp3 root volume, subnet,
// groups); CheckGone that the instance is terminated.
func TestConformanceAWS(t *testing.T) {
	t.Parallel()
	f := newAWSFixture(t)
	f.setDelay(50 * time.Millisecond)
	tmpl := f.template("small", nil)
	drivertest.Conformance(t, drivertest.Harness{
		New: func(t *testing.T, dataDir string) drivers.Driver {
			return f.driver(t, nil)
		},
		Template: tmpl,
		Meta:     conformanceMeta,
		Timeout:  30 * time.Second,
		CheckRunning: func(t *testing.T, r types.Resource) {
			in := ec2Instance(t, f.ec2, r.ID)
			assert.Equal(t, "running", in.State)
			assert.Equal(t, testAMI, in.ImageID)
			assert.Equal(t, "t3.small", in.Type)
			assert.Equal(t, testSubnet, in.SubnetID)
			assert.Equal(t, []string{"sg-0123456789abcdef0"}, in.SecurityGroups)
			assert.Equal(t, 20, in.VolumeSizeGB)
			assert.Equal(t, "gp3", in.VolumeType)
			assert.Equal(t, "node-a", in.Tags["hf/node"])
			assert.Equal(t, "aws", in.Tags["hf/instance"])
			assert.Equal(t, "machine-1", in.Tags["hf/machine"])
			assert.Equal(t, "claim-1", in.Tags["hf/claim"])
			assert.NotContains(t, in.Tags, "hf/machineset", "not a pool machine: no empty tag")
			assert.Equal(t, "small", in.Tags["hf/template"])
			assert.Equal(t, "lab", in.Tags["team"])
			assert.True(t, strings.HasPrefix(in.Tags["Name"], "hf-machine-1-"), in.Tags["Name"])
			assert.Equal(t, in.Tags["hf/node"], in.VolumeTags["hf/node"], "the volume is tagged too")
			ud, err := base64.StdEncoding.DecodeString(in.UserData)
			require.NoError(t, err)
			meta := userDataMetadata(t, string(ud))
			assert.Equal(t, map[string]string{"HF_CLAIM": "claim-1", "HF_MACHINE": "machine-1", "LAB_USER": "o'brien"}, meta,
				"only the declared metadata and the node's keys reach the VM")
			assert.Equal(t, in.PrivateIP, r.Info["private_ip"])
			assert.Equal(t, in.PublicIP, r.Info["public_ip"])
			assert.Equal(t, []types.Endpoint{{Protocol: "ssh", Address: in.PublicIP + ":22"}}, r.Endpoints)
			assert.Equal(t, tmpl.Spec.Resources, r.Resources)
		},
		CheckGone: func(t *testing.T, r types.Resource) {
			assert.Equal(t, "terminated", ec2Instance(t, f.ec2, r.ID).State)
		},
	})
	assert.Empty(t, f.ec2.Live(), "every instance is terminated")
}

// TestConformanceGCE runs the shared driver checks against the Compute test
// double with the real client.
func TestConformanceGCE(t *testing.T) {
	t.Parallel()
	f := newGCEFixture(t)
	f.setDelay(50 * time.Millisecond)
	tmpl := f.template("small", nil)
	drivertest.Conformance(t, drivertest.Harness{
		New: func(t *testing.T, dataDir string) drivers.Driver {
			return f.driver(t, nil)
		},
		Template: tmpl,
		Meta:     conformanceMeta,
		Timeout:  30 * time.Second,
		CheckRunning: func(t *testing.T, r types.Resource) {
			in := gceInstance(t, f.gce.Instances(), r.ID)
			require.NotNil(t, in)
			assert.Equal(t, "RUNNING", in.Status)
			assert.True(t, strings.HasSuffix(in.MachineType, "zones/"+testZone+"/machineTypes/e2-small"), in.MachineType)
			assert.Equal(t, "node-a", in.Labels["hf-node"])
			assert.Equal(t, "gce", in.Labels["hf-instance"])
			assert.Equal(t, "machine-1", in.Labels["hf-machine"])
			assert.Equal(t, "claim-1", in.Labels["hf-claim"])
			assert.NotContains(t, in.Labels, "hf-machineset", "not a pool machine: no empty label")
			assert.Equal(t, "lab", in.Labels["team"])
			require.Len(t, in.Disks, 1)
			assert.Equal(t, int64(20), in.Disks[0].InitializeParams.DiskSizeGb)
			assert.True(t, strings.HasSuffix(in.Disks[0].InitializeParams.SourceImage, "debian-cloud/global/images/debian-12-v20250601"),
				"the family's newest image: %s", in.Disks[0].InitializeParams.SourceImage)
			items := map[string]string{}
			for _, it := range in.Metadata.Items {
				items[it.Key] = *it.Value
			}
			assert.Equal(t, "o'brien", items["LAB_USER"])
			assert.NotContains(t, items, "LD_PRELOAD")
			assert.NotContains(t, items, "undeclared")
			assert.Contains(t, items["startup-script"], "attributes/LAB_USER")
			var meta map[string]string
			require.NoError(t, json.Unmarshal([]byte(items["hf-metadata"]), &meta))
			assert.Equal(t, map[string]string{"HF_CLAIM": "claim-1", "HF_MACHINE": "machine-1", "LAB_USER": "o'brien"}, meta)
			nic := in.NetworkInterfaces[0]
			assert.Equal(t, "global/networks/default", nic.Network)
			assert.Equal(t, nic.NetworkIP, r.Info["private_ip"])
			assert.Equal(t, nic.AccessConfigs[0].NatIP, r.Info["public_ip"])
			assert.Equal(t, []types.Endpoint{{Protocol: "ssh", Address: nic.AccessConfigs[0].NatIP + ":22"}}, r.Endpoints)
		},
		CheckGone: func(t *testing.T, r types.Resource) {
			assert.Nil(t, gceInstance(t, f.gce.Instances(), r.ID), "instance %s is deleted", r.ID)
		},
	})
	assert.Empty(t, f.gce.Instances(), "every instance is deleted")
}

func ec2Instance(t *testing.T, s *ec2test.Server, id string) ec2test.Instance {
	t.Helper()
	for _, in := range s.Instances() {
		if in.ID == id {
			return in
		}
	}
	t.Fatalf("no instance %s in the test double", id)
	return ec2test.Instance{}
}

func gceInstance(t *testing.T, list []compute.Instance, name string) *compute.Instance {
	t.Helper()
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// userDataMetadata reads the metadata file out of a #cloud-config user data.
func userDataMetadata(t *testing.T, ud string) map[string]string {
	t.Helper()
	require.True(t, strings.HasPrefix(ud, "#cloud-config\n"), ud)
	lines := strings.Split(ud, "\n")
	for i, l := range lines {
		if l == "  - path: "+metadataJSONPath {
			for _, c := range lines[i+1:] {
				if b64, ok := strings.CutPrefix(c, "    content: "); ok {
					raw, err := base64.StdEncoding.DecodeString(b64)
					require.NoError(t, err)
					var m map[string]string
					require.NoError(t, json.Unmarshal(raw, &m))
					return m
				}
			}
		}
	}
	t.Fatalf("no %s in the user data:\n%s", metadataJSONPath, ud)
	return nil
}
