package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/drivers"
	"github.com/hf-fleet/hf/lib/drivers/testdriver"
	"github.com/hf-fleet/hf/lib/scheduler"
	"github.com/hf-fleet/hf/lib/store"
)

// An ask made while a known member is absent waits for the probe of the
// live ones, and is decided on its answer: a majority reached, or not.
func TestAskWaitsForTheProbeOfTheMembers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		answers bool
		decided bool
	}{
		{"n1 answers: two of three", true, true},
		{"n1 does not: one of three", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			peers := &fakePeers{live: []string{"n0", "n1"}, known: []string{"n0", "n1", "n2"}, answers: map[string]bool{"n1": tc.answers}}
			st, err := store.Open(store.Config{InMemory: true, NodeID: "n0"}, testLogger())
			require.NoError(t, err)
			t.Cleanup(func() { _ = st.Close() })
			drv := testdriver.New(drivers.Env{Instance: "test", DataDir: t.TempDir(), NodeName: "n0", Log: testLogger()})
			require.NoError(t, drv.Prepare(context.Background(), []byte(`{"cpus": 1, "ram_gb": 1}`)))
			n, err := New(Config{Name: "n0", ReportInterval: time.Hour, OwnerSettle: time.Nanosecond, AskTimeout: 10 * time.Second},
				testLogger(), st, []Instance{{Name: "test", Type: "test", Driver: drv}}, peers)
			require.NoError(t, err)
			require.NoError(t, n.Start(context.Background()))
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				assert.NoError(t, n.Stop(ctx))
			})
			key := ""
			for i := 0; key == ""; i++ {
				if k := fmt.Sprintf("k%d", i); scheduler.Owner(k, []string{"n0", "n1"}) == "n0" {
					key = k
				}
			}
			n.HandleAsks(key, func(_ context.Context, body []byte) []byte { return body })

			start := time.Now()
			out, err := n.Ask(context.Background(), key, []byte("hi"))
			assert.Less(t, time.Since(start), 5*time.Second, "decided when the probe answered, not when the ask timed out")
			if tc.decided {
				require.NoError(t, err)
				assert.Equal(t, "hi", string(out))
			} else {
				require.ErrorIs(t, err, ErrNotDecided)
				assert.ErrorContains(t, err, "does not reach a majority of the 3 nodes it knows")
			}
		})
	}
}
