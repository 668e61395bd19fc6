package openapi

import (
	"fmt"
	"log/slog"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/client"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// BenchmarkListPages lists 10,000 claims through the API with the client,
// which pages (client.DefaultListPage a request): the time of a whole list.
//
//	go test -run '^$' -bench ListPages ./lib/openapi/
func BenchmarkListPages(b *testing.B) {
	const n = 10_000
	st := openStore(b)
	for i := range n {
		c := &types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
			Metadata: types.ObjectMeta{Name: fmt.Sprintf("c-%05d", i), Labels: map[string]string{"hf/bench": "x"}},
			Spec:     types.MachineClaimSpec{MachineTemplate: "small"}}
		_, err := st.Put(c, store.PutOptions{Create: true})
		require.NoError(b, err)
	}
	srv, err := New(Config{AdminToken: adminTok, NodeName: "n1"}, slog.New(slog.DiscardHandler), st)
	require.NoError(b, err)
	hs := httptest.NewServer(srv.Handler())
	b.Cleanup(hs.Close)
	c, err := client.New(hs.URL, adminTok)
	require.NoError(b, err)
	for b.Loop() {
		objs, err := c.List(b.Context(), types.KindMachineClaim, nil)
		require.NoError(b, err)
		require.Len(b, objs, n)
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/list")
}
