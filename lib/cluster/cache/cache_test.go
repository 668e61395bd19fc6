package cache

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/internal/intern"
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

// startedByTemplate is a started cache of a new in-memory store, with the
// claims indexed by template under "tmpl", packed with keep decoded when
// keep > 0; both end with the test.
func startedByTemplate(t *testing.T, keep int) (*store.Store, *Cache, context.Context) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(store.Config{InMemory: true, NodeID: "n1"}, log)
	require.NoError(t, err)
	c := New(st, log)
	if keep > 0 {
		c.Pack(types.KindMachineClaim, keep, nil)
	}
	c.Index("tmpl", types.KindMachineClaim, func(o types.Object) []string {
		return []string{o.(*types.MachineClaim).Spec.MachineTemplate}
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); c.Wait(); _ = st.Close() })
	require.NoError(t, c.Start(ctx))
	return st, c, ctx
}

// The index follows puts, changes of key and deletes, for keys holding one
// object and keys holding more than a slice's worth (the bucket turns into a
// map and keeps working); of a packed kind too, whose objects a lookup and a
// change's old keys mostly decode again (only 2 stay decoded).
func TestIndexFollowsChanges(t *testing.T) {
	for _, keep := range []int{0, 2} {
		t.Run(fmt.Sprintf("packed=%v", keep > 0), func(t *testing.T) { testIndexFollowsChanges(t, keep) })
	}
}

func testIndexFollowsChanges(t *testing.T, keep int) {
	st, c, _ := startedByTemplate(t, keep)

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
	_, err := st.Delete(types.KindMachineClaim, "c01", types.Version{})
	require.NoError(t, err)
	_, err = st.Delete(types.KindMachineClaim, "lone", types.Version{})
	require.NoError(t, err)
	settle(map[string]int{"big": len(many) - 2, "small": 1})
	assert.Equal(t, many[2:], names(c.ByIndex("tmpl", "big")))
	assert.Equal(t, []string{"c00"}, names(c.ByIndex("tmpl", "small")))
	_, err = st.Delete(types.KindMachineClaim, "c00", types.Version{})
	require.NoError(t, err)
	settle(map[string]int{"big": len(many) - 2})

	// A change that keeps the keys: the index serves the new object (in a
	// bucket of a few and in one of many).
	for _, key := range []string{"small", "big"} {
		name := map[string]string{"small": "s1", "big": "c05"}[key]
		put(name, key)
		_, err = st.Put(&types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
			Metadata: types.ObjectMeta{Name: name, Labels: map[string]string{"v": "2"}}, Spec: types.MachineClaimSpec{MachineTemplate: key}}, store.PutOptions{})
		require.NoError(t, err)
		require.EventuallyWithT(t, func(col *assert.CollectT) {
			var labels map[string]string
			for _, o := range c.ByIndex("tmpl", key) {
				if o.Meta().Name == name {
					labels = o.Meta().Labels
				}
			}
			assert.Equal(col, map[string]string{"v": "2"}, labels)
		}, 5*time.Second, time.Millisecond)
	}
	settle(map[string]int{"big": len(many) - 2, "small": 1})

	// A bucket of a few loses its middle element and keeps the rest.
	b := &bucket{}
	for _, n := range []string{"a", "b", "c"} {
		b.put(n, &types.MachineClaim{Metadata: types.ObjectMeta{Name: n}})
	}
	b.del("b")
	b.del("x")
	assert.Equal(t, []string{"a", "c"}, names(b.objects()))
}

// A packed kind reads back what was written, through loads, changes and
// deletes, whatever its few decoded objects hold; handlers see the old and
// the new object of each change once; its indexes come after it.
func TestPackedKind(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(store.Config{InMemory: true, NodeID: "n1"}, log)
	require.NoError(t, err)
	defer st.Close()
	put := func(name string, cpu int) {
		t.Helper()
		_, err := st.Put(&types.MachineTemplate{TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate},
			Metadata: types.ObjectMeta{Name: name, Labels: map[string]string{"size": fmt.Sprint(cpu)}},
			Spec:     types.MachineTemplateSpec{Resources: types.Resources{CPU: float64(cpu), RAMGB: 1}}}, store.PutOptions{})
		require.NoError(t, err)
	}
	for i := range 5 {
		put(fmt.Sprintf("t%d", i), i+1) // before Start: the load packs them
	}
	late := New(st, log)
	late.Index("x", types.KindMachineTemplate, func(types.Object) []string { return nil })
	assert.Panics(t, func() { late.Pack(types.KindMachineTemplate, 2, nil) }, "Pack after Index")
	c := New(st, log)
	c.Pack(types.KindMachineTemplate, 2, nil)
	type change struct{ name, old, new string }
	var mu sync.Mutex
	var changes []change
	cpu := func(o types.Object) string {
		if o == nil {
			return "-"
		}
		return fmt.Sprint(o.(*types.MachineTemplate).Spec.Resources.CPU)
	}
	c.OnChange(func(kind, name string, old, new types.Object) {
		mu.Lock()
		defer mu.Unlock()
		changes = append(changes, change{name, cpu(old), cpu(new)})
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); c.Wait() }()
	require.NoError(t, c.Start(ctx))

	read := func() map[string]string {
		out := map[string]string{}
		for i := range 6 {
			if tm, ok := Typed[types.MachineTemplate](c, types.KindMachineTemplate, fmt.Sprintf("t%d", i)); ok {
				out[tm.Metadata.Name] = cpu(tm) + "/" + tm.Metadata.Labels["size"]
			}
		}
		return out
	}
	assert.Equal(t, map[string]string{"t0": "1/1", "t1": "2/2", "t2": "3/3", "t3": "4/4", "t4": "5/5"}, read())
	assert.Equal(t, read(), read(), "reads past the decoded few decode again")
	decodes := c.Decodes()
	c.Cool()
	assert.Equal(t, map[string]string{"t0": "1/1", "t1": "2/2", "t2": "3/3", "t3": "4/4", "t4": "5/5"}, read(), "cooled")
	assert.Equal(t, decodes+5, c.Decodes(), "a cooled cache decodes each object it reads")
	assert.Equal(t, 5, c.Len(types.KindMachineTemplate))
	assert.Len(t, c.List(types.KindMachineTemplate), 5)

	put("t1", 20)
	put("t5", 6)
	_, err = st.Delete(types.KindMachineTemplate, "t0", types.Version{})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(col *assert.CollectT) {
		assert.Equal(col, map[string]string{"t1": "20/20", "t2": "3/3", "t3": "4/4", "t4": "5/5", "t5": "6/6"}, read())
	}, 5*time.Second, time.Millisecond)
	assert.Equal(t, 5, c.Len(types.KindMachineTemplate))

	// A packed object's record, as the store holds it, without a decode.
	rec, ok := c.Record(types.KindMachineTemplate, "t1")
	require.True(t, ok)
	stored, err := st.Get(types.KindMachineTemplate, "t1")
	require.NoError(t, err)
	assert.Equal(t, stored.Version, rec.Version)
	assert.Equal(t, stored.Facets, rec.Facets)
	_, ok = c.Record(types.KindMachineTemplate, "t0")
	assert.False(t, ok, "deleted")
	_, ok = c.Record(types.KindMachine, "t1")
	assert.False(t, ok, "a kind that is not packed")

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []change{
		{"t0", "-", "1"}, {"t1", "-", "2"}, {"t2", "-", "3"}, {"t3", "-", "4"}, {"t4", "-", "5"},
		{"t1", "2", "20"}, {"t5", "-", "6"}, {"t0", "1", "-"},
	}, changes, "each change once, in commit order, with its old object")
}

// A reload (what a resync does) drops the objects the store no longer
// holds, of decoded and of packed kinds, and tells the handlers.
func TestReloadDropsWhatIsGone(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(store.Config{InMemory: true, NodeID: "n1"}, log)
	require.NoError(t, err)
	defer st.Close()
	for _, name := range []string{"a", "b"} {
		_, err := st.Put(&types.MachineTemplate{TypeMeta: types.TypeMeta{Kind: types.KindMachineTemplate}, Metadata: types.ObjectMeta{Name: name}}, store.PutOptions{})
		require.NoError(t, err)
		_, err = st.Put(&types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim}, Metadata: types.ObjectMeta{Name: name}}, store.PutOptions{})
		require.NoError(t, err)
	}
	c := New(st, log)
	c.Pack(types.KindMachineTemplate, 8, nil)
	var gone []string
	c.OnChange(func(kind, name string, old, new types.Object) {
		if new == nil {
			gone = append(gone, kind+"/"+name)
		}
	})
	require.NoError(t, c.load()) // not started: the cache follows no watch
	for _, kind := range []string{types.KindMachineTemplate, types.KindMachineClaim} {
		_, err := st.Delete(kind, "a", types.Version{})
		require.NoError(t, err)
	}
	require.NoError(t, c.load())
	assert.ElementsMatch(t, []string{"MachineTemplate/a", "MachineClaim/a"}, gone)
	for _, kind := range []string{types.KindMachineTemplate, types.KindMachineClaim} {
		assert.Equal(t, 1, c.Len(kind), kind)
		_, ok := c.Get(kind, "b")
		assert.True(t, ok, kind)
		_, ok = c.Get(kind, "a")
		assert.False(t, ok, kind)
	}
}

// BenchmarkIndexedUpdate: a write to an object of an indexed kind that
// leaves its keys as they were (most writes: a claim's status), 10,000
// objects under three indexes.
//
//	go test -run '^$' -bench IndexedUpdate ./lib/cluster/cache/
func BenchmarkIndexedUpdate(b *testing.B) {
	c := New(nil, slog.New(slog.DiscardHandler))
	for _, f := range []func(*types.MachineClaim) string{
		func(o *types.MachineClaim) string { return o.Spec.MachineTemplate },
		func(o *types.MachineClaim) string { return string(o.Status.Phase) },
		func(o *types.MachineClaim) string { return o.Status.Node },
	} {
		c.Index(fmt.Sprintf("ix%p", f), types.KindMachineClaim, func(o types.Object) []string { return []string{f(o.(*types.MachineClaim))} })
	}
	const n = 10_000
	claims := make([]*types.MachineClaim, n)
	for i := range claims {
		claims[i] = &types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim}, Metadata: types.ObjectMeta{Name: fmt.Sprintf("c%05d", i)},
			Spec: types.MachineClaimSpec{MachineTemplate: fmt.Sprintf("t%d", i%100)}, Status: types.MachineClaimStatus{Phase: types.ClaimBound, Node: "n1"}}
		c.set(types.KindMachineClaim, claims[i].Metadata.Name, claims[i], nil)
	}
	i := 0
	for b.Loop() {
		o := *claims[i%n]
		o.Metadata.Version = types.Version{HLC: uint64(i + 1)}
		c.set(types.KindMachineClaim, o.Metadata.Name, &o, nil)
		i++
	}
}

// WaitSeq is read-your-writes: once it returns for the store's Seq (as in
// ByIndexNow), the cache holds every write up to it; a wait for a write not
// made yet ends with its context.
func TestWaitSeqReadsYourWrites(t *testing.T) {
	st, c, ctx := startedByTemplate(t, 0)
	require.NoError(t, c.WaitSeq(ctx, st.Seq()), "an empty store's")
	for i := range 200 {
		_, err := st.Put(&types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
			Metadata: types.ObjectMeta{Name: fmt.Sprintf("c%03d", i)}, Spec: types.MachineClaimSpec{MachineTemplate: "t"}}, store.PutOptions{})
		require.NoError(t, err)
		objs, err := c.ByIndexNow(ctx, "tmpl", "t")
		require.NoError(t, err)
		require.Len(t, objs, i+1, "the write just made is in the cache")
	}
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	assert.ErrorIs(t, c.WaitSeq(short, st.Seq()+1), context.DeadlineExceeded)
}

// Pinned objects of a packed kind stay decoded, through Cool, while they
// are pinned; Names and Indexed answer from the index without decoding.
func TestPinnedAndNames(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(store.Config{InMemory: true, NodeID: "n1"}, log)
	require.NoError(t, err)
	c := New(st, log)
	c.Pack(types.KindMachineClaim, 1, func(o types.Object, _ func(string, string) bool) bool { return o.Meta().Labels["pin"] == "y" })
	c.Index("tmpl", types.KindMachineClaim, func(o types.Object) []string {
		return []string{o.(*types.MachineClaim).Spec.MachineTemplate}
	})
	c.Index("pin", types.KindMachineClaim, func(o types.Object) []string { return []string{o.Meta().Labels["pin"]} })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); c.Wait(); _ = st.Close() })
	require.NoError(t, c.Start(ctx))
	put := func(name, pin string) {
		t.Helper()
		_, err := st.Put(&types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
			Metadata: types.ObjectMeta{Name: name, Labels: map[string]string{"pin": pin}}, Spec: types.MachineClaimSpec{MachineTemplate: "a"}}, store.PutOptions{})
		require.NoError(t, err)
	}
	put("p1", "y")
	put("u1", "n")
	put("u2", "n")
	require.Eventually(t, func() bool { return c.Count("tmpl", "a") == 3 }, 5*time.Second, time.Millisecond)

	c.Cool()
	decodes := c.Decodes()
	assert.Equal(t, []string{"p1", "u1", "u2"}, names(c.ByIndex("tmpl", "a")))
	assert.Equal(t, decodes+2, c.Decodes(), "the two unpinned claims decoded, the pinned one held")
	decodes = c.Decodes()
	got := c.Names("tmpl", "a")
	slices.Sort(got)
	assert.Equal(t, []string{"p1", "u1", "u2"}, got)
	assert.True(t, c.Indexed("tmpl", "a", "u1"))
	assert.False(t, c.Indexed("tmpl", "b", "u1"))
	assert.False(t, c.Indexed("tmpl", "a", "x"))
	assert.False(t, c.Indexed("none", "a", "u1"))
	assert.Empty(t, c.Names("tmpl", "b"))
	both := c.Intersect("tmpl", "a", "pin", "y", "x")
	assert.Equal(t, []string{"p1"}, both, "a's claims pinned y (or x, which none is)")
	both = c.Intersect("tmpl", "a", "pin", "n", "y")
	slices.Sort(both)
	assert.Equal(t, []string{"p1", "u1", "u2"}, both)
	assert.Empty(t, c.Intersect("tmpl", "a", "pin", "x"))
	assert.Empty(t, c.Intersect("tmpl", "b", "pin", "y"))
	assert.Empty(t, c.Intersect("tmpl", "a", "none", "y"))
	assert.Equal(t, decodes, c.Decodes(), "names are read without decoding")

	put("p1", "n") // unpinned: decoded again once cooled
	require.Eventually(t, func() bool {
		o, ok := c.Get(types.KindMachineClaim, "p1")
		return ok && o.Meta().Labels["pin"] == "n"
	}, 5*time.Second, time.Millisecond)
	c.Cool()
	decodes = c.Decodes()
	_, ok := c.Get(types.KindMachineClaim, "p1")
	require.True(t, ok)
	assert.Equal(t, decodes+1, c.Decodes())
}

// A packed object whose stored form no longer decodes (it cannot be read
// for its old keys) still leaves its old keys when it changes.
func TestPackedChangeOfUndecodableOld(t *testing.T) {
	st, c, _ := startedByTemplate(t, 2)
	put := func(tmpl string) {
		_, err := st.Put(&types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
			Metadata: types.ObjectMeta{Name: "c1"}, Spec: types.MachineClaimSpec{MachineTemplate: tmpl}}, store.PutOptions{})
		require.NoError(t, err)
	}
	put("a")
	require.Eventually(t, func() bool { return c.Count("tmpl", "a") == 1 }, 5*time.Second, time.Millisecond)
	c.Cool()
	c.mu.Lock()
	p := c.packed[types.KindMachineClaim]
	p.recs["c1"] = p.arena.put([]byte("not a packed record"))
	c.mu.Unlock()
	put("b")
	require.Eventually(t, func() bool { return c.Count("tmpl", "b") == 1 }, 5*time.Second, time.Millisecond)
	assert.Equal(t, map[string]int{"b": 1}, c.Keys("tmpl"))
}

// Cool squeezes a packed kind's records once it holds enough of them: they
// take a fraction of their plain bytes, read back as they were (by name, by
// index, List, Record), and a change or deletion of a squeezed record still
// hands the handlers its old object and moves it in the indexes. Records
// written after are squeezed at the next Cool; a kind of a few records is
// left plain.
func TestCoolSqueezes(t *testing.T) {
	st, c, ctx := startedByTemplate(t, 2)
	var mu sync.Mutex
	olds := map[string]string{} // name -> template of the old object at its last change
	c.OnChange(func(kind, name string, old, _ types.Object) {
		mu.Lock()
		defer mu.Unlock()
		if old != nil {
			olds[name] = old.(*types.MachineClaim).Spec.MachineTemplate
		}
	})
	put := func(name, tmpl string) {
		t.Helper()
		_, err := st.Put(&types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
			Metadata: types.ObjectMeta{Name: name, Labels: map[string]string{"team": "blue", "seat": name}},
			Spec:     types.MachineClaimSpec{MachineTemplate: tmpl}}, store.PutOptions{})
		require.NoError(t, err)
	}
	settle := func() {
		t.Helper()
		require.NoError(t, c.WaitSeq(ctx, st.Seq()))
	}
	p := c.packed[types.KindMachineClaim]
	for i := range squeezeMin - 1 {
		put(fmt.Sprintf("c%03d", i), "a")
	}
	settle()
	c.Cool()
	assert.Nil(t, p.sq, "too few records to squeeze")
	assert.Equal(t, squeezeMin-1, p.arena.unsqueezed)

	for i := squeezeMin - 1; i < 200; i++ {
		put(fmt.Sprintf("c%03d", i), []string{"a", "b"}[i%2])
	}
	settle()
	read := func() map[string]string {
		out := map[string]string{}
		for _, o := range c.List(types.KindMachineClaim) {
			cl := o.(*types.MachineClaim)
			out[cl.Metadata.Name] = cl.Spec.MachineTemplate + "/" + cl.Metadata.Labels["seat"] + "/" + cl.Metadata.Version.String()
		}
		return out
	}
	want := read()
	require.Len(t, want, 200)
	plain := p.arena.live
	assert.Positive(t, c.Cool(), "the decoded objects dropped, counted")
	require.NotNil(t, p.sq)
	assert.Zero(t, p.arena.unsqueezed)
	assert.Less(t, p.arena.live, plain/2, "squeezed: %d bytes, plain: %d", p.arena.live, plain)
	for name, at := range p.recs {
		assert.Equal(t, squeezed, at.form, name)
	}
	t.Logf("200 claims: %d bytes plain, %d squeezed", plain, p.arena.live)
	assert.Equal(t, want, read(), "List")
	cl, ok := Typed[types.MachineClaim](c, types.KindMachineClaim, "c101")
	require.True(t, ok)
	assert.Equal(t, "b", cl.Spec.MachineTemplate)
	// c000-c030 and the even ones after under a, the odd ones under b.
	assert.Equal(t, map[string]int{"a": 115, "b": 85}, c.Keys("tmpl"))
	rec, ok := c.Record(types.KindMachineClaim, "c101")
	require.True(t, ok)
	stored, err := st.Get(types.KindMachineClaim, "c101")
	require.NoError(t, err)
	assert.Equal(t, stored.Facets, rec.Facets, "Record restores the record")

	put("c000", "b") // squeezed, moves from a to b
	_, err = st.Delete(types.KindMachineClaim, "c002", types.Version{})
	require.NoError(t, err)
	settle()
	assert.Equal(t, map[string]int{"a": 113, "b": 86}, c.Keys("tmpl"))
	assert.Contains(t, names(c.ByIndex("tmpl", "b")), "c000")
	mu.Lock()
	assert.Equal(t, map[string]string{"c000": "a", "c002": "a"}, olds, "the old objects, restored")
	mu.Unlock()
	assert.Equal(t, 1, p.arena.unsqueezed, "the rewritten record is plain until the next Cool")
	c.Cool()
	assert.Zero(t, p.arena.unsqueezed)
	got := read()
	assert.Len(t, got, 199)
	assert.Equal(t, "b/c000", got["c000"][:6])
	assert.Zero(t, c.Cool(), "nothing left to drop")
}

// Compact copies the cache's names, maps and index buckets afresh, with one
// copy of each name shared by the maps and the indexes, and leaves every
// lookup as it was; the cache goes on following writes after it.
func TestCompactKeepsLookups(t *testing.T) {
	for _, keep := range []int{0, 2} {
		t.Run(fmt.Sprintf("packed=%v", keep > 0), func(t *testing.T) {
			st, c, ctx := startedByTemplate(t, keep)
			put := func(name, tmpl string) {
				t.Helper()
				_, err := st.Put(&types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
					Metadata: types.ObjectMeta{Name: name}, Spec: types.MachineClaimSpec{MachineTemplate: tmpl}}, store.PutOptions{})
				require.NoError(t, err)
			}
			for i := range 40 {
				put(fmt.Sprintf("c%02d", i), []string{"a", "a", "a", "b"}[i%4]) // a: 30 (a map), b: 10 (a map)
			}
			put("c40", "solo") // a slice of one
			require.NoError(t, c.WaitSeq(ctx, st.Seq()))
			lookups := func() (map[string]int, []string, []string, []string, []string) {
				return c.Keys("tmpl"), names(c.ByIndex("tmpl", "a")), names(c.ByIndex("tmpl", "solo")),
					names(c.List(types.KindMachineClaim)), c.Names("tmpl", "solo")
			}
			k0, a0, s0, l0, n0 := lookups()
			c.Cool()
			tab := intern.New()
			c.Compact(tab)
			k1, a1, s1, l1, n1 := lookups()
			assert.Equal(t, k0, k1)
			assert.Equal(t, a0, a1)
			assert.Equal(t, s0, s1)
			assert.Equal(t, l0, l1)
			assert.Equal(t, n0, n1)
			assert.Equal(t, 41+3, tab.Len(), "each name and key copied once")

			// The bucket's name is the map's key, one copy.
			held := func() map[string]string {
				out := map[string]string{}
				if p := c.packed[types.KindMachineClaim]; p != nil {
					for k := range p.recs {
						out[k] = k
					}
					return out
				}
				for k := range c.objs[types.KindMachineClaim] {
					out[k] = k
				}
				return out
			}()
			b := c.indexes["tmpl"].byKey["solo"]
			require.Len(t, b.few, 1)
			assert.True(t, unsafe.StringData(b.few[0].name) == unsafe.StringData(held["c40"]), "one copy of a name")
			cl, ok := Typed[types.MachineClaim](c, types.KindMachineClaim, "c40")
			require.True(t, ok)
			assert.Equal(t, "solo", cl.Spec.MachineTemplate)

			put("c40", "a") // moves from solo to a
			_, err := st.Delete(types.KindMachineClaim, "c00", types.Version{})
			require.NoError(t, err)
			put("c41", "b")
			require.NoError(t, c.WaitSeq(ctx, st.Seq()))
			assert.Equal(t, map[string]int{"a": 30, "b": 11}, c.Keys("tmpl"))
			assert.Contains(t, names(c.ByIndex("tmpl", "a")), "c40")
			assert.NotContains(t, names(c.ByIndex("tmpl", "a")), "c00")
			assert.Empty(t, c.Names("tmpl", "solo"))
		})
	}
}

// BenchmarkCompact measures Compact over 20,000 packed claims under two
// indexes (one key each, one key for all): the time it holds the cache's
// lock once a node goes idle.
//
//	go test -run x -bench Compact ./lib/cluster/cache/
func BenchmarkCompact(b *testing.B) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := store.Open(store.Config{InMemory: true, NodeID: "n1"}, log)
	require.NoError(b, err)
	defer st.Close()
	c := New(st, log)
	c.Pack(types.KindMachineClaim, 16, nil)
	c.Index("tmpl", types.KindMachineClaim, func(o types.Object) []string {
		return []string{o.(*types.MachineClaim).Spec.MachineTemplate}
	})
	c.Index("name", types.KindMachineClaim, func(o types.Object) []string { return []string{o.Meta().Name} })
	ctx, cancel := context.WithCancel(context.Background())
	defer func() { cancel(); c.Wait() }()
	require.NoError(b, c.Start(ctx))
	const n = 20_000
	for i := range n {
		_, err := st.Put(&types.MachineClaim{TypeMeta: types.TypeMeta{Kind: types.KindMachineClaim},
			Metadata: types.ObjectMeta{Name: fmt.Sprintf("claim-%08x", i)}, Spec: types.MachineClaimSpec{MachineTemplate: "small"}}, store.PutOptions{})
		require.NoError(b, err)
	}
	require.NoError(b, c.WaitSeq(ctx, st.Seq()))
	for b.Loop() {
		c.Compact(intern.New())
	}
}

// A packed kind's bucket holds names alone: past fewMax in a set, which
// answers as the slice did and is copied as one; an unpacked kind's goes
// on holding its objects past fewMax.
func TestBucketOfNames(t *testing.T) {
	b := &bucket{}
	var want []string
	for i := range fewMax + 3 {
		n := fmt.Sprint("m", i)
		b.put(n, nil)
		want = append(want, n)
	}
	require.NotNil(t, b.set, "a packed kind's names past fewMax go in a set")
	assert.Nil(t, b.many)
	b.put("m0", nil)
	b.del("m1")
	b.del("x")
	want = slices.DeleteFunc(want, func(n string) bool { return n == "m1" })
	assert.ElementsMatch(t, want, b.names())
	assert.Equal(t, len(want), b.len())
	assert.True(t, b.has("m2"))
	assert.False(t, b.has("m1"))

	var bs intern.Slab[bucket]
	var ns intern.Slab[named]
	c := b.copy(intern.New(), &bs, &ns)
	assert.ElementsMatch(t, want, c.names(), "the copy holds the same names")

	c.del("m2")
	assert.False(t, c.has("m2"))
	assert.Equal(t, len(want)-1, c.len())

	objs := &bucket{}
	var claims []types.Object
	for i := range fewMax + 3 {
		o := &types.MachineClaim{Metadata: types.ObjectMeta{Name: fmt.Sprint("c", i)}}
		objs.put(o.Metadata.Name, o)
		claims = append(claims, o)
	}
	assert.Nil(t, objs.set, "an unpacked kind's objects are kept, not their names alone")
	assert.ElementsMatch(t, claims, objs.objects())
}
