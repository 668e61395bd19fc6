package member_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/member/membertest"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// claim is a small object to replicate.
func claim(name, user string) *types.MachineClaim {
	return &types.MachineClaim{
		TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
		Metadata: types.ObjectMeta{Name: name},
		Spec:     types.MachineClaimSpec{MachineTemplate: "ubuntu", User: user},
	}
}

// put writes claim name on st and returns the record.
func put(t testing.TB, st *store.Store, name, user string) store.Record {
	t.Helper()
	rec, err := st.Put(claim(name, user), store.PutOptions{})
	require.NoError(t, err)
	return rec
}

// hasVersion reports whether st holds kind/name (tombstone or not) at v.
func hasVersion(st *store.Store, kind, name string, v types.Version) bool {
	found := false
	_ = st.Scan(func(r store.Record) error {
		if r.Kind == kind && r.Name == name && r.Version == v {
			found = true
		}
		return nil
	})
	return found
}

// waitEverywhere waits until every running node holds kind/name at v.
func waitEverywhere(t testing.TB, c *membertest.Cluster, kind, name string, v types.Version, within time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, n := range c.Running() {
			if !hasVersion(n.Store, kind, name, v) {
				return false
			}
		}
		return true
	}, within, 5*time.Millisecond, "%s/%s@%s did not reach every node", kind, name, v)
}

func nodeName(i int) string { return fmt.Sprintf("n%d", i) }

// openMemStore opens an in-memory store for node id and closes it at the end.
func openMemStore(t testing.TB, id string) *store.Store {
	t.Helper()
	st, err := store.Open(store.Config{InMemory: true, NodeID: id, GCInterval: -1}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}
