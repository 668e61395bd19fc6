package cluster

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/hf-fleet/hf/lib/types"
)

func TestReachability(t *testing.T) {
	since := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		phase       types.NodePhase
		alive       bool
		live, known int
		status      types.ConditionStatus
		reason      string
		message     string
	}{
		{"a live member", types.NodeUp, true, 3, 3, types.ConditionTrue, types.ReasonMember, "a live member as n0 sees it"},
		{"live, under a verdict not yet answered", types.NodeDown, true, 3, 3, types.ConditionTrue, types.ReasonMember, "a live member as n0 sees it"},
		{"gone, seen from a majority", types.NodeUp, false, 2, 3, types.ConditionFalse, types.ReasonUnreachable, "n0 reaches 2 of the 3 members it knows, a majority: the down verdict is due"},
		{"gone, seen from no majority", types.NodeUp, false, 1, 3, types.ConditionFalse, types.ReasonNoQuorum, "n0 reaches 1 of the 3 members it knows, no majority"},
		{"half is no majority", types.NodeDraining, false, 2, 4, types.ConditionFalse, types.ReasonNoQuorum, "no majority"},
		{"down already", types.NodeDown, false, 1, 3, types.ConditionFalse, types.ReasonUnreachable, "not a live member as n0 sees it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := reachability("n0", tc.phase, tc.alive, tc.live, tc.known, since)
			assert.Equal(t, types.ConditionReachable, c.Type)
			assert.Equal(t, tc.status, c.Status)
			assert.Equal(t, tc.reason, c.Reason)
			assert.Contains(t, c.Message, tc.message)
			if tc.alive {
				assert.True(t, c.LastTransitionTime.IsZero())
			} else {
				assert.Equal(t, since, c.LastTransitionTime, "since when n0 has not seen it")
			}
		})
	}
}
