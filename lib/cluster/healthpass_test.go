package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// countingDriver is the test driver, counting its Status calls: one a
// machine each health pass.
type countingDriver struct {
	*testdriver.Driver
	statuses atomic.Int64
}

func (d *countingDriver) Status(ctx context.Context, r *types.Resource) (types.MachinePhase, error) {
	d.statuses.Add(1)
	return d.Driver.Status(ctx, r)
}

// The health pass reads no machine record of a machine outside a set: the
// cache keeps machines packed, and the pass used to decode each one every
// StatusInterval to look at its set (2.5 % of a core for 10,000 idle
// machines). Cool drops the decoded copies, and they are decoded again
// when read.
func TestHealthPassDecodesNothing(t *testing.T) {
	dir := t.TempDir()
	log := testLogger()
	st, err := store.Open(store.Config{Dir: filepath.Join(dir, "store"), NodeID: "n1"}, log)
	require.NoError(t, err)
	defer st.Close()
	td := testdriver.New(drivers.Env{Instance: "test", DataDir: filepath.Join(dir, "test"), NodeName: "n1", Log: log})
	require.NoError(t, td.Prepare(context.Background(), []byte(`{"cpus": 64, "ram_gb": 64}`)))
	drv := &countingDriver{Driver: td.(*testdriver.Driver)}
	n, err := New(Config{Name: "n1", OfferTimeout: time.Second, StatusInterval: 10 * time.Millisecond}, log, st,
		[]Instance{{Name: "test", Type: "test", Driver: drv}}, nil)
	require.NoError(t, err)
	require.NoError(t, n.Start(context.Background()))
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, n.Stop(ctx))
	}()
	_, err = st.Put(template("small", 1, 1, `{}`), store.PutOptions{Create: true})
	require.NoError(t, err)
	const claims = 20
	for i := range claims {
		_, err := st.Put(claim(fmt.Sprintf("c%d", i), "small", time.Minute), store.PutOptions{Create: true})
		require.NoError(t, err)
	}
	require.Eventually(t, func() bool { return n.cache.Count(idxClaimPhase, string(types.ClaimBound)) == claims },
		10*time.Second, 5*time.Millisecond)
	// The machines decoded no longer (as on an idle node after a trim, or
	// past the last 1,024 written), passes over every machine, counted by
	// the driver, decode none of them. (A reconciler still finishing the
	// bindings may read a claim in a window: a few windows are allowed, and
	// the old pass decoded every machine in every one.)
	var got []uint64
	for range 5 {
		n.Cool()
		from, decodes := drv.statuses.Load(), n.cache.Decodes()
		require.Eventually(t, func() bool { return drv.statuses.Load()-from >= 5*claims }, 10*time.Second, 5*time.Millisecond)
		if got = append(got, n.cache.Decodes()-decodes); got[len(got)-1] == 0 {
			return
		}
	}
	t.Fatalf("decodes in windows of 5 health passes over %d machines: %v, want a window with none", claims, got)
}
