package cache

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

func names(objs []types.Object) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.Meta().Name)
	}
	slices.Sort(out)
	return out
}

// The index follows puts, changes of key and deletes, for keys holding one
// object and keys holding more than a slice's worth (the bucket turns into a
// map and keeps working).
func TestIndexFollowsChanges(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(store.Config{InMemory: true, NodeID: "n1"}, log)
	require.NoError(t, err)
	defer st.Close()
	c := New(st, log)
	c.Index("tmpl", types.KindMachineClaim, func(o types.Object) []string {
		return []string{o.(*types.MachineClaim).Spec.MachineTemplate}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); c.Wait() }()
	require.NoError(t, c.Start(ctx))

	put := func(name, tmpl string) {
		_, err := st.Put(&types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
			Metadata: types.ObjectMeta{Name: name}, Spec: types.MachineClaimSpec{MachineTemplate: tmpl}}, store.PutOptions{})
		require.NoError(t, err)
	}
	var many []string
	for i := range 2*fewMax + 3 {
		n := fmt.Sprintf("c%02d", i)
		many = append(many, n)
		put(n, "big")
	}
	put("lone", "small")
	settle := func(want map[string]int) {
		t.Helper()
		require.EventuallyWithT(t, func(col *assert.CollectT) {
			assert.Equal(col, want, c.Keys("tmpl"))
		}, 5*time.Second, time.Millisecond)
	}
	settle(map[string]int{"big": len(many), "small": 1})
	assert.Equal(t, many, names(c.ByIndex("tmpl", "big")))
	assert.Equal(t, []string{"lone"}, names(c.ByIndex("tmpl", "small")))
	assert.Empty(t, c.ByIndex("tmpl", "none"))
	assert.Zero(t, c.Count("tmpl", "none"))

	put("c00", "small") // moves from the big key to the small one
	_, err = st.Delete(types.KindMachineClaim, "c01", types.Version{})
	require.NoError(t, err)
	_, err = st.Delete(types.KindMachineClaim, "lone", types.Version{})
	require.NoError(t, err)
	settle(map[string]int{"big": len(many) - 2, "small": 1})
	assert.Equal(t, many[2:], names(c.ByIndex("tmpl", "big")))
	assert.Equal(t, []string{"c00"}, names(c.ByIndex("tmpl", "small")))
	_, err = st.Delete(types.KindMachineClaim, "c00", types.Version{})
	require.NoError(t, err)
	settle(map[string]int{"big": len(many) - 2})

	// A bucket of a few loses its middle element and keeps the rest.
	b := &bucket{}
	for _, n := range []string{"a", "b", "c"} {
		b.put(n, &types.MachineClaim{Metadata: types.ObjectMeta{Name: n}})
	}
	b.del("b")
	b.del("x")
	assert.Equal(t, []string{"a", "c"}, names(b.objects()))
}
