package clustertest

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// An access code's status.status goes Active at its notBefore and Inactive
// at its notAfter on its own (the proposal's AccessCodeStatus), never
// before its time; disabling it makes it Inactive whatever the clock says.
func TestAccessCodeActiveOnItsOwn(t *testing.T) {
	f := Start(t, 2, Options{})
	start := time.Now().Add(2 * time.Second)
	end := start.Add(3 * time.Second)
	f.Put(0, &types.AccessCode{TypeMeta: types.TypeMeta{Kind: types.KindAccessCode}, Metadata: types.ObjectMeta{Name: "ws"},
		Spec: types.AccessCodeSpec{Code: "open-sesame", NotBefore: start, NotAfter: end}})

	type seen struct {
		state types.AccessCodeState
		at    time.Time
	}
	var states []seen
	deadline := end.Add(20 * time.Second)
	for time.Now().Before(deadline) {
		c, err := store.Get[types.AccessCode](f.Hosts[1].Store, types.KindAccessCode, "ws")
		if errors.Is(err, store.ErrNotFound) {
			time.Sleep(20 * time.Millisecond)
			continue // not replicated yet
		}
		require.NoError(t, err)
		if st := c.Status.Status; st != "" && (len(states) == 0 || states[len(states)-1].state != st) {
			states = append(states, seen{st, time.Now()})
			if cond := c.Status.Conditions.Get("Active"); assert.NotNil(t, cond) {
				assert.Equal(t, string(st), cond.Reason)
				assert.NotEmpty(t, cond.Message)
			}
		}
		if len(states) == 3 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	var got []types.AccessCodeState
	for _, s := range states {
		got = append(got, s.state)
	}
	require.Equal(t, []types.AccessCodeState{types.AccessCodeInactive, types.AccessCodeActive, types.AccessCodeInactive}, got)
	assert.False(t, states[1].at.Before(start), "Active only from notBefore")
	assert.False(t, states[2].at.Before(end), "Inactive again from notAfter")

	// Disabled: Inactive at once, with the reason.
	_, err := store.Update(f.Hosts[0].Store, types.KindAccessCode, "ws", func(o *types.AccessCode) error {
		o.Spec.NotAfter, o.Spec.Disabled = time.Time{}, false
		return nil
	})
	require.NoError(t, err)
	waitCode(t, f, "ws", types.AccessCodeActive, "valid")
	_, err = store.Update(f.Hosts[0].Store, types.KindAccessCode, "ws", func(o *types.AccessCode) error {
		o.Spec.Disabled = true
		return nil
	})
	require.NoError(t, err)
	waitCode(t, f, "ws", types.AccessCodeInactive, "disabled by its owner")
}

func waitCode(t *testing.T, f *Fleet, name string, want types.AccessCodeState, msg string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		code, err := store.Get[types.AccessCode](f.Hosts[1].Store, types.KindAccessCode, name)
		require.NoError(c, err)
		assert.Equal(c, want, code.Status.Status)
		cond := code.Status.Conditions.Get("Active")
		require.NotNil(c, cond)
		assert.Equal(c, msg, cond.Message)
		assert.True(c, slices.Contains([]types.ConditionStatus{types.ConditionTrue, types.ConditionFalse}, cond.Status))
	}, 15*time.Second, 20*time.Millisecond)
}

// A claim that requires a set reserved for an access code or a scheduled
// event waits, then fails, saying the set is reserved and how to get in;
// its status, which its user reads (status.reason, the Bound condition's
// message, status.election.reason), never names the code or the event.
func TestReservedSetReasonsNameNoCodeOrEvent(t *testing.T) {
	f := Start(t, 1, Options{Driver: `{"cpus": 100, "ram_gb": 1000}`})
	f.Put(0, Template("one", 1, 1))
	for name, a := range map[string]types.AvailabilityConfiguration{
		"code-pool":  {Availability: types.AvailabilityAccessCode, Value: "admcode"},
		"event-pool": {Availability: types.AvailabilityScheduledEvent, Value: "wsevent"},
	} {
		s := machineSet(name, "one", 1, 1)
		s.Spec.AvailabilityConfiguration = a
		f.Put(0, s)
	}
	for _, tc := range []struct{ set, secret, says string }{
		{"code-pool", "admcode", "machine set code-pool is reserved for an access code (present one that grants it in spec.accessCode)"},
		{"event-pool", "wsevent", "machine set event-pool is reserved for a scheduled event (claim under that event in spec.scheduledEvent)"},
	} {
		c := Claim("for-"+tc.set, "one", 2*time.Second)
		c.Spec.BindStrategy, c.Spec.MachineSets = types.BindRequireMachineSets, []string{tc.set}
		f.Put(0, c)
		check := func(t require.TestingT, got *types.MachineClaim) {
			require.NotNil(t, got.Status.Election, "the elector has written its word")
			texts := map[string]string{"status.reason": got.Status.Reason, "status.election.reason": got.Status.Election.Reason}
			for i, cond := range got.Status.Conditions {
				texts[fmt.Sprintf("status.conditions[%d].message", i)] = cond.Message
			}
			for field, text := range texts {
				assert.Contains(t, text, tc.says, field)
				assert.NotContains(t, text, tc.secret, field)
			}
		}
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			got, err := store.Get[types.MachineClaim](f.Hosts[0].Store, types.KindMachineClaim, c.Metadata.Name)
			require.NoError(ct, err)
			check(ct, got)
		}, 15*time.Second, 20*time.Millisecond, "while it waits")
		check(t, waitClaim(t, f.Hosts[0], c.Metadata.Name, types.ClaimFailed))
	}
}
