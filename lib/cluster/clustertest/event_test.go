package clustertest

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

func scheduledEvent(name string, provision, start, end time.Time, exp types.ExpirationStrategy) *types.ScheduledEvent {
	return &types.ScheduledEvent{
		TypeMeta: types.TypeMeta{Kind: types.KindScheduledEvent},
		Metadata: types.ObjectMeta{Name: name},
		Spec: types.ScheduledEventSpec{
			ProvisioningStartTime: provision, StartTime: start, EndTime: end, ExpirationStrategy: exp,
			RequiredMachines: []types.RequiredMachines{{MachineTemplate: "one", Count: 2, MachineType: types.MachineTypeShared, CreateMachineSet: &types.CreateMachineSet{}}},
		},
	}
}

func eventClaim(name, event string) *types.MachineClaim {
	c := Claim(name, "one", time.Minute)
	c.Spec.ScheduledEvent = event
	return c
}

// Issue 7, acceptance 4 (cluster side): an event's sets appear at its
// provisioning start, its claims bind to their machines, and at its end
// CutOff terminates the claims and removes the sets while Soft lets bound
// claims run. (Claims outside the window are refused by the API:
// lib/openapi TestClaimsOnlyInsideTheirEventWindow.)
func TestScheduledEventWindow(t *testing.T) {
	f := Start(t, 3, Options{Driver: `{"cpus": 100, "ram_gb": 1000}`})
	f.Put(0, Template("one", 1, 1))
	now := time.Now()
	f.Put(0, scheduledEvent("cut", now, now.Add(500*time.Millisecond), now.Add(4*time.Second), types.ExpireCutOff))
	f.Put(1, scheduledEvent("soft", now, now.Add(500*time.Millisecond), now.Add(4*time.Second), types.ExpireSoft))

	for _, ev := range []string{"cut", "soft"} {
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			e, err := store.Get[types.ScheduledEvent](f.Hosts[2].Store, types.KindScheduledEvent, ev)
			require.NoError(c, err)
			require.Len(c, e.Status.CreatedMachineSets, 1)
			_, avail := poolCounts(f.Hosts[2], e.Status.CreatedMachineSets[0])
			assert.Equal(c, 2, avail, "ready machines of %s", ev)
		}, 20*time.Second, 20*time.Millisecond)
	}
	cutSet := setOf(f.Hosts[2], "cut")
	f.Put(2, eventClaim("c-cut", "cut"))
	f.Put(2, eventClaim("c-soft", "soft"))
	for _, name := range []string{"c-cut", "c-soft"} {
		c := waitClaim(t, f.Hosts[0], name, types.ClaimBound)
		m, err := store.Get[types.Machine](f.Hosts[0].Store, types.KindMachine, c.Status.Machine)
		require.NoError(t, err)
		assert.NotEmpty(t, m.Spec.MachineSet, "claim %s bound to its event's machine", name)
	}

	// At the end: CutOff terminates its claim and removes its set and machines.
	cut := waitClaim(t, f.Hosts[0], "c-cut", types.ClaimTerminated)
	assert.Contains(t, cut.Status.Reason, "ended")
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		e, err := store.Get[types.ScheduledEvent](f.Hosts[0].Store, types.KindScheduledEvent, "cut")
		require.NoError(c, err)
		assert.Equal(c, types.EventExpired, e.Status.Phase)
		for _, m := range f.Hosts[0].Machines() {
			assert.NotEqual(c, "c-cut", m.Spec.Claim, "the cut claim's machine is released")
		}
		p, _ := poolCounts(f.Hosts[0], cutSet)
		assert.Zero(c, p, "no machine of the cut event's set is left")
		_, err = f.Hosts[0].Store.Get(types.KindMachineSet, cutSet)
		assert.ErrorIs(c, err, store.ErrNotFound, "the cut event's set is deleted")
	}, 20*time.Second, 50*time.Millisecond)
	// Soft: the bound claim runs on.
	assert.Equal(t, types.ClaimBound, f.Hosts[0].Claims()["c-soft"].Status.Phase)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Empty(c, f.Audit(nil))
	}, 10*time.Second, 50*time.Millisecond)
}

// setOf is the first set an event created, as h sees it.
func setOf(h *Host, event string) string {
	e, err := store.Get[types.ScheduledEvent](h.Store, types.KindScheduledEvent, event)
	if err != nil || len(e.Status.CreatedMachineSets) == 0 {
		return ""
	}
	return e.Status.CreatedMachineSets[0]
}
