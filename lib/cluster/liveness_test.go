package cluster

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// downVerdict stores a down verdict on this node's current report as n9, a
// member that found it gone, would pass it; it returns the node as it was.
func (tn *testNode) downVerdict() *types.Node {
	tn.t.Helper()
	cur, err := store.Get[types.Node](tn.st, types.KindNode, tn.name)
	require.NoError(tn.t, err)
	verdict := *cur
	verdict.Status.Down = &types.NodeVerdict{Reason: "gone for 2s", By: "n9", Report: cur.Metadata.Facets.Get(types.FacetReport), Was: types.NodeUp}
	tn.applyRemote(&verdict, types.FacetLiveness, "n9")
	return cur
}

// A down verdict on a node that runs (a member wrongly found it gone, or
// its report crossed the verdict as it came back) is answered with a report
// at once, not at the next heartbeat; the verdict touches only the liveness
// facet, so the report, capacity and all, stays the node's own. A majority
// that cannot reach the node but gets its reports passes a new verdict on
// each: the node answers one per heartbeat interval, so the two cannot
// loop.
func TestOwnDownVerdictIsAnsweredOncePerInterval(t *testing.T) {
	var skew atomic.Int64 // the clock's lead over the wall clock
	tn := &testNode{t: t, name: "n1", dir: t.TempDir(), driver: `{"cpus": 4, "ram_gb": 8}`,
		now:    func() time.Time { return time.Now().Add(time.Duration(skew.Load())) },
		config: func(c *Config) { c.ReportInterval = time.Hour }} // no heartbeat during the test
	tn.start()
	t.Cleanup(tn.stop)
	tn.put(template("small", 1, 1, `{}`))
	tn.put(claim("c1", "small", time.Minute))
	tn.waitPhase("c1", types.ClaimBound)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := store.Get[types.Node](tn.st, types.KindNode, "n1")
		require.NoError(c, err)
		assert.Equal(c, 1.0, got.Spec.Drivers[0].Capacity.Used.CPU)
	}, 5*time.Second, 5*time.Millisecond)
	upAgain := func(msg string) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			got, err := store.Get[types.Node](tn.st, types.KindNode, "n1")
			require.NoError(c, err)
			assert.Equal(c, types.NodeUp, got.Status.Phase, msg)
			assert.False(c, got.DownHolds())
		}, 5*time.Second, 5*time.Millisecond)
	}

	tn.downVerdict()
	upAgain("the first verdict is answered at once")

	// The majority passes its verdict again on the answer: not answered
	// before the interval is over.
	before := tn.downVerdict()
	assert.Never(t, func() bool {
		got, err := store.Get[types.Node](tn.st, types.KindNode, "n1")
		return err != nil || !got.DownHolds()
	}, 500*time.Millisecond, 10*time.Millisecond, "a second verdict within the interval waits for the heartbeat")
	got, err := store.Get[types.Node](tn.st, types.KindNode, "n1")
	require.NoError(t, err)
	assert.Equal(t, types.NodeDown, got.Status.Phase, "the verdict shows while it holds")
	assert.Equal(t, before.Metadata.Facets.Get(types.FacetReport), got.Metadata.Facets.Get(types.FacetReport), "the report is untouched")
	assert.Equal(t, 1.0, got.Spec.Drivers[0].Capacity.Used.CPU, "the report is untouched")

	skew.Add(int64(time.Hour))
	tn.downVerdict()
	upAgain("a verdict after the interval is answered at once again")
}

func TestAnswerDue(t *testing.T) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		now, last time.Time
		want      bool
	}{
		{"never answered", at, time.Time{}, true},
		{"within the gap", at.Add(9 * time.Second), at, false},
		{"the gap over", at.Add(10 * time.Second), at, true},
		{"the clock went back", at.Add(-time.Second), at, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, answerDue(tc.now, tc.last, 10*time.Second))
		})
	}
}
