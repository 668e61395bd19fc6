package scheduler

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestCheckAccessCode(t *testing.T) {
	now := evStart
	code := &types.AccessCode{
		TypeMeta: types.TypeMeta{Kind: types.KindAccessCode},
		Metadata: types.ObjectMeta{Name: "k1"},
		Spec: types.AccessCodeSpec{
			Code: "secret", MachineSets: []string{"s1", "s2"}, ScheduledEvents: []string{"ws"},
			NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour),
		},
		Status: types.AccessCodeStatus{Phase: types.AccessCodeActive},
	}
	with := func(f func(c *types.AccessCode)) *types.AccessCode {
		c := *code
		f(&c)
		return &c
	}
	claim := func(code string, sets []string, ev string) types.MachineClaim {
		c := claimFor("c", types.BindPreferMachineSets, sets...)
		c.Spec.AccessCode, c.Spec.ScheduledEvent = code, ev
		return c
	}
	tests := []struct {
		name  string
		now   time.Time
		code  *types.AccessCode
		claim types.MachineClaim
		field string // "" when the claim passes
		msg   string
	}{
		{name: "no code named", code: nil, claim: claim("", []string{"anything"}, "ev")},
		{name: "granted sets and event", code: code, claim: claim("k1", []string{"s2", "s1"}, "ws")},
		{name: "no sets, no event", code: code, claim: claim("k1", nil, "")},
		{name: "event's own sets are granted with the event", code: code, claim: claim("k1", []string{"ws-0", "ws-12"}, "ws")},
		{name: "open-ended code", code: with(func(c *types.AccessCode) { c.Spec.NotBefore, c.Spec.NotAfter = time.Time{}, time.Time{} }),
			now: now.Add(1000 * time.Hour), claim: claim("k1", nil, "")},
		{name: "empty status counts as active", code: with(func(c *types.AccessCode) { c.Status.Phase = "" }), claim: claim("k1", nil, "")},
		{name: "at notBefore", code: code, now: now.Add(-time.Hour), claim: claim("k1", nil, "")},
		{name: "missing code", code: nil, claim: claim("k1", nil, ""),
			field: "spec.accessCode", msg: "no access code matches"},
		{name: "inactive", code: with(func(c *types.AccessCode) { c.Spec.Disabled = true }), claim: claim("k1", nil, ""),
			field: "spec.accessCode", msg: "the access code is disabled; ask its owner to enable it"},
		{name: "not yet valid", code: code, now: now.Add(-61 * time.Minute), claim: claim("k1", nil, ""),
			field: "spec.accessCode", msg: "the access code is valid from 2025-06-02T09:00:00Z"},
		{name: "expired at notAfter", code: code, now: now.Add(time.Hour), claim: claim("k1", nil, ""),
			field: "spec.accessCode", msg: "the access code expired at 2025-06-02T11:00:00Z"},
		{name: "set not granted", code: code, claim: claim("k1", []string{"s1", "s3"}, ""),
			field: "spec.bindStrategyMachineSets[1]", msg: "the access code does not grant machine set s3"},
		{name: "another event's set", code: code, claim: claim("k1", []string{"other-0"}, "ws"),
			field: "spec.bindStrategyMachineSets[0]", msg: "the access code does not grant machine set other-0"},
		{name: "event not granted", code: code, claim: claim("k1", []string{"s1"}, "other"),
			field: "spec.scheduledEvent", msg: "the access code does not grant scheduled event other"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			at := tc.now
			if at.IsZero() {
				at = now
			}
			err := CheckAccessCode(at, tc.code, tc.claim)
			if tc.field == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.ErrorIs(t, err, types.ErrInvalid)
			var fe *types.FieldError
			require.True(t, errors.As(err, &fe))
			assert.Equal(t, tc.field, fe.Field)
			assert.Equal(t, tc.msg, fe.Message)
		})
	}
}
