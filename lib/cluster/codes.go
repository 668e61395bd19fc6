package cluster

import (
	"time"

	"github.com/hf-fleet/hf/lib/cluster/cache"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// reconcileCode keeps an AccessCode's status.status current: Active between
// its notBefore and notAfter unless disabled, Inactive otherwise, with an
// Active condition saying why; it runs again at the next of those times.
func (d *duties) reconcileCode(name string) time.Duration {
	n := d.n
	code, ok := cache.Typed[types.AccessCode](n.cache, types.KindAccessCode, name)
	if !ok {
		return 0
	}
	now := n.cfg.Now()
	state, cond := codeStatus(code, now)
	if _, changed := code.Status.Conditions.Set(cond, now); code.Status.Status != state || changed {
		_, err := store.UpdateFacet(n.st, types.KindAccessCode, name, types.FacetStatus, func(o *types.AccessCode) error {
			state, cond := codeStatus(o, now)
			conds, changed := o.Status.Conditions.Set(cond, now)
			if o.Status.Status == state && !changed {
				return store.ErrNoChange
			}
			o.Status.Status, o.Status.Conditions = state, conds
			return nil
		})
		switch {
		case err == nil:
			n.log.Info("access code", "code", name, "status", state, "reason", cond.Message)
		case !isNotFound(err):
			n.log.Warn("access code status", "code", name, "err", err)
			return time.Second
		}
	}
	return until(now, code.NextChange(now))
}

// codeStatus is what code's status says at now: its state and its Active
// condition.
func codeStatus(code *types.AccessCode, now time.Time) (types.AccessCodeState, types.Condition) {
	state := code.StateAt(now)
	c := types.Condition{Type: string(types.AccessCodeActive), Status: types.ConditionFalse, Reason: string(state), Message: codeReason(code, now)}
	if state == types.AccessCodeActive {
		c.Status = types.ConditionTrue
	}
	return state, c
}

// codeReason says in words why code is as it is at now.
func codeReason(code *types.AccessCode, now time.Time) string {
	s := &code.Spec
	switch {
	case s.Disabled:
		return "disabled by its owner"
	case !s.NotBefore.IsZero() && now.Before(s.NotBefore):
		return "valid from " + s.NotBefore.UTC().Format(time.RFC3339)
	case !s.NotAfter.IsZero() && !now.Before(s.NotAfter):
		return "expired at " + s.NotAfter.UTC().Format(time.RFC3339)
	case !s.NotAfter.IsZero():
		return "valid until " + s.NotAfter.UTC().Format(time.RFC3339)
	}
	return "valid"
}
