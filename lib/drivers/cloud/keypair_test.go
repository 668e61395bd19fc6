package cloud

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/internal/syncbuf"
	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/cloud/ec2test"
	"github.com/hf-fleet/hf/lib/types"
)

// generated is a template entry that makes a key pair per machine.
var generated = map[string]any{"generate_key_pair": true}

// TestKeyPairPerMachine: generate_key_pair makes a key pair named and
// tagged like the instance, launches with it, hands the private key to the
// machine's information (never to the log) and deletes it with the machine.
func TestKeyPairPerMachine(t *testing.T) {
	t.Parallel()
	f := newAWSFixture(t)
	logs := &syncbuf.Buffer{}
	d := f.newDriver(t, "node-a", TypeAWS)
	d.log = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	require.NoError(t, d.Prepare(t.Context(), f.config(nil)))
	t.Cleanup(func() { _ = d.Close() })

	r, err := d.Allocate(t.Context(), f.template("small", generated), testMeta)
	require.NoError(t, err)
	kps := f.ec2.KeyPairs()
	require.Len(t, kps, 1)
	kp := kps[0]
	in := ec2Instance(t, f.ec2, r.ID)
	assert.Equal(t, in.Tags["Name"], kp.Name, "the key pair is named after its instance")
	assert.Equal(t, kp.Name, in.KeyName, "the instance is launched with it")
	assert.Equal(t, "ed25519", kp.Type)
	assert.Equal(t, "node-a", kp.Tags["hf/node"])
	assert.Equal(t, "aws", kp.Tags["hf/instance"])
	assert.Equal(t, "machine-x", kp.Tags["hf/machine"])
	assert.Equal(t, kp.Name, in.Tags["hf/key_pair"])
	assert.Equal(t, kp.Name, r.Info["key_name"])
	assert.Equal(t, kp.Fingerprint, r.Info["key_fingerprint"])
	block, _ := pem.Decode([]byte(r.Info["ssh_private_key"]))
	require.NotNil(t, block, "the private key is in the machine's information")
	_, err = x509.ParsePKCS8PrivateKey(block.Bytes)
	require.NoError(t, err)

	listed, err := d.List(t.Context())
	require.NoError(t, err)
	require.Len(t, listed, 1)
	assert.Len(t, f.ec2.KeyPairs(), 1, "List keeps the key pair of a live instance")
	assert.Empty(t, listed[0].Info["ssh_private_key"], "EC2 hands the private key out once: List cannot show it")
	assert.Equal(t, kp.Name, listed[0].Info["key_name"])

	require.NoError(t, d.Deallocate(t.Context(), r))
	assert.Empty(t, f.ec2.KeyPairs(), "the key pair goes with its machine")
	assert.NotContains(t, logs.String(), "PRIVATE KEY", "the private key is never logged")
	assert.NotContains(t, logs.String(), string(block.Bytes[len(block.Bytes)-8:]))
}

func TestKeyPairTemplate(t *testing.T) {
	t.Parallel()
	f := newAWSFixture(t)
	d := f.driver(t, map[string]any{"defaults": map[string]any{"key_name": "shared"}})
	err := d.ValidateTemplate(f.template("both", map[string]any{"generate_key_pair": true, "key_name": "mine"}))
	assert.ErrorContains(t, err, "spec.providerConfiguration.aws.generate_key_pair")
	tc, err := parseAWSTemplate([]byte(`{"ami":"`+testAMI+`","generate_key_pair":true}`), AWSDefaults{InstanceType: "t3.small", KeyName: "shared"})
	require.NoError(t, err)
	assert.Empty(t, tc.KeyName, "the default key_name does not apply to a generated key pair")
}

// TestKeyPairGoneAfterFailedAllocate: an allocation that fails after the key
// pair was made (the cloud has no capacity, the caller gives up while the
// instance starts) leaves no key pair and no instance.
func TestKeyPairGoneAfterFailedAllocate(t *testing.T) {
	t.Parallel()
	f := newAWSFixture(t)
	d := f.driver(t, nil)
	f.ec2.Update(func(x *ec2test.Faults) { x.NoCapacity = 1 })
	_, err := d.Allocate(t.Context(), f.template("small", generated), testMeta)
	require.ErrorIs(t, err, drivers.ErrNoCapacity)
	assert.Equal(t, 1, f.ec2.Calls("CreateKeyPair"))
	assert.Empty(t, f.ec2.KeyPairs(), "no capacity: the key pair is deleted")

	f.setDelay(time.Hour)
	ctx, cancel := context.WithCancel(t.Context())
	f.ec2.OnCreate(func(string) { cancel() })
	_, err = d.Allocate(ctx, f.template("small", generated), testMeta)
	require.ErrorIs(t, err, context.Canceled)
	assert.Empty(t, f.ec2.KeyPairs(), "cancelled: the key pair is deleted")
	assert.Empty(t, f.ec2.Live(), "cancelled: the instance is terminated")
}

// TestKeyPairKilledMidAllocate: a node killed mid-Allocate (its own cleanup
// cannot reach the cloud) leaves a key pair, with or without its instance;
// the restarted node's List removes the one without an instance, and
// Deallocate of the instance it lists removes the other.
func TestKeyPairKilledMidAllocate(t *testing.T) {
	t.Parallel()
	f := newAWSFixture(t)
	first := f.driver(t, nil)
	f.failDeletes(true)
	// Killed after CreateKeyPair, before an instance existed.
	f.ec2.Update(func(x *ec2test.Faults) { x.NoCapacity = 1 })
	_, err := first.Allocate(t.Context(), f.template("small", generated), testMeta)
	require.Error(t, err)
	// Killed while its instance started.
	f.setDelay(time.Hour)
	ctx, cancel := context.WithCancel(t.Context())
	f.ec2.OnCreate(func(string) { cancel() })
	_, err = first.Allocate(ctx, f.template("small", generated), testMeta)
	require.Error(t, err)
	require.Len(t, f.ec2.KeyPairs(), 2, "the dead node could not clean up")
	require.Len(t, f.ec2.Live(), 1)
	_ = first.Close()

	f.failDeletes(false)
	second := f.driver(t, nil)
	listed, err := second.List(t.Context())
	require.NoError(t, err)
	require.Len(t, listed, 1, "the half-made instance is found by its tags")
	kps := f.ec2.KeyPairs()
	require.Len(t, kps, 1, "the key pair without an instance is removed")
	assert.Equal(t, listed[0].Info["name"], kps[0].Name, "the instance's own key pair stays while it lives")
	require.NoError(t, second.Deallocate(t.Context(), &listed[0]))
	assert.Empty(t, f.ec2.KeyPairs(), "nothing leaked")
	assert.Empty(t, f.ec2.Live())
}

// TestListSparesKeyPairInFlight: a List while an allocation waits for its
// instance leaves that allocation's key pair alone.
func TestListSparesKeyPairInFlight(t *testing.T) {
	t.Parallel()
	f := newAWSFixture(t)
	d := f.driver(t, nil)
	f.setDelay(200 * time.Millisecond)
	done := make(chan *types.Resource, 1)
	go func() {
		r, err := d.Allocate(t.Context(), f.template("small", generated), testMeta)
		assert.NoError(t, err)
		done <- r
	}()
	require.Eventually(t, func() bool { return len(f.ec2.KeyPairs()) == 1 }, 10*time.Second, time.Millisecond)
	_, err := d.List(t.Context())
	require.NoError(t, err)
	r := <-done
	require.NotNil(t, r)
	assert.Len(t, f.ec2.KeyPairs(), 1)
	require.NoError(t, d.Deallocate(t.Context(), r))
	assert.Empty(t, f.ec2.KeyPairs())
}
