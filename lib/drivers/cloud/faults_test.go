package cloud

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/cloud/ec2test"
	"github.com/hf-fleet/hf/lib/drivers/cloud/gcetest"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/types"
)

var testMeta = map[string]string{types.MetaClaim: "claim-x", types.MetaMachine: "machine-x", "LAB_USER": "ann"}

// release deallocates r when the test ends.
func release(t *testing.T, d *Driver, r *types.Resource) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, d.Deallocate(ctx, r))
	})
}

// createCalls counts the create calls the test double answered.
func (f *fixture) createCalls() int {
	if f.kind == TypeAWS {
		return f.ec2.Calls("RunInstances")
	}
	return f.gce.Calls("insert")
}

// TestNoCapacityDeclines: a cloud without room is ErrNoCapacity (a decline,
// the claim waits), leaves nothing behind, and for no_capacity_hold the
// driver reports itself full and refuses without asking the cloud.
func TestNoCapacityDeclines(t *testing.T) {
	forEachProvider(t, func(t *testing.T, f *fixture) {
		d := f.driver(t, map[string]any{"no_capacity_hold": "1h"})
		now := time.Now()
		d.now = func() time.Time { return now }
		if f.kind == TypeAWS {
			f.ec2.Update(func(x *ec2test.Faults) { x.NoCapacity = 1 })
		} else {
			f.gce.Update(func(x *gcetest.Faults) { x.NoCapacity = 1 })
		}
		tmpl := f.template("small", nil)
		require.Equal(t, 64.0, d.HostCapacity().Usable.CPU)
		_, err := d.Allocate(t.Context(), tmpl, testMeta)
		require.ErrorIs(t, err, drivers.ErrNoCapacity)
		assert.Zero(t, f.live(), "a declined allocation leaves nothing")
		assert.Zero(t, d.HostCapacity().Usable.CPU, "full while the hold lasts: offers are declined at once")

		calls := f.createCalls()
		_, err = d.Allocate(t.Context(), tmpl, testMeta)
		require.ErrorIs(t, err, drivers.ErrNoCapacity)
		assert.Equal(t, calls, f.createCalls(), "no cloud call while the hold lasts")

		now = now.Add(2 * time.Hour) // the hold is over
		assert.Equal(t, 64.0, d.HostCapacity().Usable.CPU)
		r, err := d.Allocate(t.Context(), tmpl, testMeta)
		require.NoError(t, err)
		release(t, d, r)
	})
}

// TestThrottlingRetried: throttled calls are retried with backoff (the SDK's
// retryer for aws, the driver's for gce) and the allocation succeeds with
// one instance.
func TestThrottlingRetried(t *testing.T) {
	forEachProvider(t, func(t *testing.T, f *fixture) {
		d := f.driver(t, nil)
		tmpl := f.template("small", nil)
		require.NoError(t, d.ValidateTemplate(tmpl)) // the image check is cached: the create is throttled
		calls := f.createCalls()
		if f.kind == TypeAWS {
			f.ec2.Update(func(x *ec2test.Faults) { x.Throttle = 3 })
		} else {
			f.gce.Update(func(x *gcetest.Faults) { x.Throttle = 3 })
		}
		r, err := d.Allocate(t.Context(), tmpl, testMeta)
		require.NoError(t, err)
		release(t, d, r)
		assert.Equal(t, calls+4, f.createCalls(), "three throttled creates, then the one that worked")
		assert.Equal(t, 1, f.live(), "retries make no second instance")
	})
}

// TestMissingImageFailsValidation: an image the cloud does not have fails
// ValidateTemplate with the key named, before any claim.
func TestMissingImageFailsValidation(t *testing.T) {
	forEachProvider(t, func(t *testing.T, f *fixture) {
		d := f.driver(t, nil)
		cases := map[string]struct {
			entry map[string]any
			field string
		}{}
		if f.kind == TypeAWS {
			cases["id"] = struct {
				entry map[string]any
				field string
			}{map[string]any{"ami": "ami-0ffffffffffffffff"}, "spec.providerConfiguration.aws.ami"}
			cases["filter"] = struct {
				entry map[string]any
				field string
			}{map[string]any{"ami": nil, "ami_filter": map[string]any{"name": "windows-*", "owners": []string{testOwner}}}, "spec.providerConfiguration.aws.ami_filter.name"}
			cases["subnet"] = struct {
				entry map[string]any
				field string
			}{map[string]any{"subnet_id": nil, "subnet_tags": map[string]string{"Name": "nope"}}, "spec.providerConfiguration.aws.subnet_tags"}
		} else {
			cases["name"] = struct {
				entry map[string]any
				field string
			}{map[string]any{"image_family": nil, "image": "no-such-image"}, "spec.providerConfiguration.gce.image"}
			cases["family"] = struct {
				entry map[string]any
				field string
			}{map[string]any{"image_family": "centos-7"}, "spec.providerConfiguration.gce.image_family"}
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				tmpl := f.template("bad", tc.entry)
				err := d.ValidateTemplate(tmpl)
				require.ErrorIs(t, err, types.ErrInvalid)
				var fe *types.FieldError
				require.True(t, errors.As(err, &fe), "%v", err)
				assert.Equal(t, tc.field, fe.Field, "%v", err)
				_, err = d.Allocate(t.Context(), tmpl, testMeta)
				assert.ErrorIs(t, err, types.ErrInvalid)
			})
		}
		assert.Zero(t, f.createCalls(), "nothing was created")
		require.NoError(t, d.ValidateTemplate(f.template("good", nil)))
	})
}

// TestAMIFilterPicksNewest: a name filter resolves to the newest image.
func TestAMIFilterPicksNewest(t *testing.T) {
	f := newAWSFixture(t)
	d := f.driver(t, nil)
	r, err := d.Allocate(t.Context(), f.template("f", map[string]any{"ami": nil,
		"ami_filter": map[string]any{"name": "ubuntu-24.04-*", "owners": []string{testOwner}}}), testMeta)
	require.NoError(t, err)
	release(t, d, r)
	assert.Equal(t, testAMI, r.Info["image"])
}

// TestKilledMidAllocateLeaksNothing: the node dies right after the create
// call (its context ends and its own cleanup cannot reach the cloud, as
// with kill -9). A new driver of the same node lists the half-made instance
// by its tags, so the node's start reconcile releases it; nothing is left.
func TestKilledMidAllocateLeaksNothing(t *testing.T) {
	forEachProvider(t, func(t *testing.T, f *fixture) {
		f.setDelay(time.Hour) // never runs: the allocation is cut short while waiting
		first := f.driver(t, nil)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			_, err := first.Allocate(ctx, f.template("small", nil), testMeta)
			done <- err
		}()
		require.Eventually(t, func() bool { return f.live() == 1 }, 10*time.Second, 5*time.Millisecond, "the instance is created")
		f.failDeletes(true)
		cancel()
		require.Error(t, <-done)
		require.Equal(t, 1, f.live(), "the dead node could not clean up")

		f.failDeletes(false)
		second := f.driver(t, nil)
		listed, err := second.List(t.Context())
		require.NoError(t, err)
		require.Len(t, listed, 1, "the restarted node finds the half-made instance by its tags")
		assert.Equal(t, types.MachineProvisioning, mustStatus(t, second, &listed[0]))
		require.NoError(t, second.Deallocate(t.Context(), &listed[0]))
		assert.Zero(t, f.live(), "nothing leaked")

		other := f.driverOf(t, "node-b", f.kind, nil)
		listed, err = other.List(t.Context())
		require.NoError(t, err)
		assert.Empty(t, listed)
	})
}

func (f *fixture) failDeletes(on bool) {
	if f.kind == TypeAWS {
		f.ec2.Update(func(x *ec2test.Faults) { x.FailTerminate, x.FailDeleteKeyPair = on, on })
	} else {
		f.gce.Update(func(x *gcetest.Faults) { x.FailDelete = on })
	}
}

func mustStatus(t *testing.T, d *Driver, r *types.Resource) types.MachinePhase {
	t.Helper()
	p, err := d.Status(t.Context(), r)
	require.NoError(t, err)
	return p
}

// TestForeignInstancesUntouched: another node's instances are neither
// listed nor deallocated.
func TestForeignInstancesUntouched(t *testing.T) {
	forEachProvider(t, func(t *testing.T, f *fixture) {
		a, b := f.driverOf(t, "node-a", f.kind, nil), f.driverOf(t, "node-b", f.kind, nil)
		r, err := a.Allocate(t.Context(), f.template("small", nil), testMeta)
		require.NoError(t, err)
		release(t, a, r)
		listed, err := b.List(t.Context())
		require.NoError(t, err)
		assert.Empty(t, listed)
		_, err = b.Status(t.Context(), r)
		assert.ErrorIs(t, err, drivers.ErrNotFound)
		require.NoError(t, b.Deallocate(t.Context(), r))
		assert.Equal(t, types.MachineRunning, mustStatus(t, a, r), "node-b left node-a's instance alone")
	})
}

// TestInstanceDies: an instance that dies is Failed, and is still
// deallocated.
func TestInstanceDies(t *testing.T) {
	forEachProvider(t, func(t *testing.T, f *fixture) {
		d := f.driver(t, nil)
		r, err := d.Allocate(t.Context(), f.template("small", nil), testMeta)
		require.NoError(t, err)
		if f.kind == TypeAWS {
			require.True(t, f.ec2.Kill(r.ID))
		} else {
			require.True(t, f.gce.Kill(r.ID))
		}
		assert.Equal(t, types.MachineFailed, mustStatus(t, d, r))
		require.NoError(t, d.Deallocate(t.Context(), r))
		assert.Zero(t, f.live())
	})
}

// TestCapacityFollowsQuota: with a cloud quota of 8 vCPUs (and a larger
// configured one) the driver reports 8; as the node does, four 2-vCPU
// machines fit and the fifth is declined; after one release it fits again.
// The cloud refuses a fifth all the same (ErrNoCapacity).
func TestCapacityFollowsQuota(t *testing.T) {
	forEachProvider(t, func(t *testing.T, f *fixture) {
		if f.kind == TypeAWS {
			f.ec2.SetVCPUQuota(8)
		} else {
			f.gce.SetQuota(8, 100)
		}
		d := f.driver(t, map[string]any{"quota": map[string]any{"vcpus": 100}})
		tmpl := f.template("small", nil)
		hc := d.HostCapacity()
		assert.Equal(t, 100.0, hc.Total.CPU)
		assert.Equal(t, 8.0, hc.Usable.CPU, "the cloud's quota is lower")

		var used types.Resources
		fits := func() bool {
			ok, _ := scheduler.Reserve(scheduler.WithUsage(d.HostCapacity(), used, types.Resources{}), tmpl.Spec.Resources, false)
			return ok
		}
		var held []*types.Resource
		for range 4 {
			require.True(t, fits())
			r, err := d.Allocate(t.Context(), tmpl, testMeta)
			require.NoError(t, err)
			release(t, d, r)
			held = append(held, r)
			used = used.Add(r.Resources)
		}
		assert.False(t, fits(), "the fifth 2-vCPU machine does not fit a quota of 8")
		_, err := d.Allocate(t.Context(), tmpl, testMeta)
		require.ErrorIs(t, err, drivers.ErrNoCapacity, "and the cloud refuses it too")

		require.NoError(t, d.Deallocate(t.Context(), held[0]))
		used = used.Sub(held[0].Resources)
		require.True(t, fits(), "after one release it fits")
		r, err := d.Allocate(t.Context(), tmpl, testMeta)
		require.NoError(t, err)
		release(t, d, r)
	})
}

// TestOthersUsageLowersCapacity: what other nodes run in the account counts
// against the cloud's quota, read again after quota_refresh.
func TestOthersUsageLowersCapacity(t *testing.T) {
	forEachProvider(t, func(t *testing.T, f *fixture) {
		if f.kind == TypeAWS {
			f.ec2.SetVCPUQuota(8)
		} else {
			f.gce.SetQuota(8, 100)
		}
		other := f.driverOf(t, "node-b", f.kind, nil)
		r, err := other.Allocate(t.Context(), f.template("small", nil), testMeta)
		require.NoError(t, err)
		release(t, other, r)

		d := f.driver(t, map[string]any{"quota_refresh": "1ms"})
		assert.Equal(t, 6.0, d.HostCapacity().Usable.CPU, "8 less node-b's 2")
		own, err := d.Allocate(t.Context(), f.template("small", nil), testMeta)
		require.NoError(t, err)
		release(t, d, own)
		require.NoError(t, other.Deallocate(t.Context(), r))
		require.Eventually(t, func() bool { return d.HostCapacity().Usable.CPU == 8 }, 10*time.Second, 5*time.Millisecond,
			"its own instance does not count as others'; node-b's release frees 2")
	})
}

// TestInstanceQuota: quota.instances caps the instances; the next one is
// declined and the reported capacity shrinks to what the driver holds.
func TestInstanceQuota(t *testing.T) {
	forEachProvider(t, func(t *testing.T, f *fixture) {
		d := f.driver(t, map[string]any{"quota": map[string]any{"vcpus": 64, "instances": 2}})
		tmpl := f.template("small", nil)
		for range 2 {
			r, err := d.Allocate(t.Context(), tmpl, testMeta)
			require.NoError(t, err)
			release(t, d, r)
		}
		assert.Equal(t, 4.0, d.HostCapacity().Usable.CPU, "full: usable is what it holds")
		calls := f.createCalls()
		_, err := d.Allocate(t.Context(), tmpl, testMeta)
		require.ErrorIs(t, err, drivers.ErrNoCapacity)
		assert.Equal(t, calls, f.createCalls())
	})
}

// slowQuota is a provider whose quota read blocks until its context ends,
// then takes a moment more, as an SDK call does while it unwinds.
type slowQuota struct {
	provider
	entered chan struct{}
	done    atomic.Bool
}

func (p *slowQuota) quota(ctx context.Context, _ owner) (usage, error) {
	select {
	case p.entered <- struct{}{}:
	default:
	}
	<-ctx.Done()
	time.Sleep(50 * time.Millisecond)
	p.done.Store(true)
	return usage{}, ctx.Err()
}

// TestCloseWaitsForQuotaRead: a background quota read that HostCapacity
// started has ended when Close returns, so nothing of the driver (its log
// included) outlives it. CI's race detector caught such a read logging
// through a finished test's t.Log.
func TestCloseWaitsForQuotaRead(t *testing.T) {
	forEachProvider(t, func(t *testing.T, f *fixture) {
		d := f.driver(t, map[string]any{"quota_refresh": "1ms"})
		slow := &slowQuota{entered: make(chan struct{}, 1)}
		d.mu.Lock()
		slow.provider, d.prov = d.prov, slow
		d.mu.Unlock()
		require.Eventually(t, func() bool {
			d.HostCapacity()
			select {
			case <-slow.entered:
				return true
			default:
				return false
			}
		}, 10*time.Second, 2*time.Millisecond, "a background quota read starts")
		require.NoError(t, d.Close())
		assert.True(t, slow.done.Load(), "the quota read ended before Close returned")
		assert.Equal(t, types.Capacity{}, d.HostCapacity(), "a closed driver reports nothing and reads nothing")
	})
}
