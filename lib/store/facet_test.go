package store

import (
	"encoding/json"
	"testing"
	"time"

	fastjson "github.com/goccy/go-json"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/internal/testclock"
	"github.com/hf-fleet/hf/lib/types"
)

// twoNodes is two stores of one cluster on one fake clock, with a way to hand
// each other their copy of an object, as replication does.
type twoNodes struct {
	a, b *Store
	clk  *testclock.Clock
}

func newTwoNodes(t *testing.T) *twoNodes {
	clk := newFakeClock()
	ca, cb := memConfig(clk), memConfig(clk)
	ca.NodeID, cb.NodeID = "a", "b"
	return &twoNodes{a: openStore(t, ca), b: openStore(t, cb), clk: clk}
}

// exchange gives each store the other's record of kind/name.
func (n *twoNodes) exchange(t *testing.T, kind, name string) {
	t.Helper()
	var ra, rb Record
	require.NoError(t, n.a.Scan(func(r Record) error {
		if r.Kind == kind && r.Name == name {
			ra = r
		}
		return nil
	}))
	require.NoError(t, n.b.Scan(func(r Record) error {
		if r.Kind == kind && r.Name == name {
			rb = r
		}
		return nil
	}))
	for _, x := range []struct {
		to  *Store
		rec Record
	}{{n.a, rb}, {n.b, ra}} {
		if x.rec.Kind != "" {
			_, err := x.to.Apply(x.rec)
			require.NoError(t, err)
		}
	}
}

// The lost write the cluster issue found by reading the code: an API drain
// written on one node while the drained node writes its own report. Both are
// read-modify-writes of the same Node object from copies that do not have the
// other's write; whole-object last-writer-wins kept only the later one, so
// the drain was undone. Facets keep both.
func TestDrainDuringReportKeepsBoth(t *testing.T) {
	n := newTwoNodes(t)
	node := &types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode}, Metadata: types.ObjectMeta{Name: "a"},
		Spec: types.NodeSpec{APIAddress: "127.0.0.1:1"}, Status: types.NodeStatus{Phase: types.NodeUp}}
	_, err := n.a.Put(node, PutOptions{Create: true})
	require.NoError(t, err)
	n.exchange(t, types.KindNode, "a")

	// On b, an operator drains a through the API...
	_, err = UpdateFacet(n.b, types.KindNode, "a", types.FacetMaintenance, func(o *types.Node) error {
		o.Spec.Maintenance = true
		return nil
	})
	require.NoError(t, err)
	// ... while a, which has not seen that yet, reports itself later.
	n.clk.Add(time.Second)
	_, err = UpdateFacet(n.a, types.KindNode, "a", types.FacetReport, func(o *types.Node) error {
		o.Status.Heartbeat = n.clk.Now()
		o.Spec.Drivers = []types.NodeDriver{{Name: "test", Driver: "test"}}
		return nil
	})
	require.NoError(t, err)
	n.exchange(t, types.KindNode, "a")

	for _, st := range []*Store{n.a, n.b} {
		got, err := Get[types.Node](st, types.KindNode, "a")
		require.NoError(t, err)
		assert.True(t, got.Spec.Maintenance, "%s: the drain is kept", st.NodeID())
		assert.Equal(t, n.clk.Now(), got.Status.Heartbeat, "%s: and the later report", st.NodeID())
		assert.Len(t, got.Spec.Drivers, 1)
		assert.Equal(t, got.Metadata.Facets.Get(types.FacetMaintenance).Node, "b", "the drain's facet is b's write")
		assert.Equal(t, got.Metadata.Facets.Get(types.FacetReport).Node, "a", "the report's is a's")
	}
}

// The other lost write: a MachineSet spec PUT that overlaps the set owner's
// status write from an older copy.
func TestSetSpecDuringOwnerStatusKeepsBoth(t *testing.T) {
	n := newTwoNodes(t)
	set := &types.MachineSet{TypeMeta: types.TypeMeta{Kind: types.KindMachineSet}, Metadata: types.ObjectMeta{Name: "pool"},
		Spec: types.MachineSetSpec{MachineTemplate: "small", MinAvailable: 1,
			AvailabilityConfiguration: types.AvailabilityConfiguration{Availability: types.AvailabilityPool}}}
	rec, err := n.a.Put(set, PutOptions{Create: true})
	require.NoError(t, err)
	n.exchange(t, types.KindMachineSet, "pool")

	// The API on a takes a PUT of the spec (read, change, write back over
	// what it read, as the handler does) ...
	put := *set
	put.Spec.MinAvailable = 5
	_, err = n.a.Put(&put, PutOptions{Update: true, Base: &rec, Facets: []string{types.FacetSpec}})
	require.NoError(t, err)
	// ... while b, the set's owner, writes the status from its older copy.
	_, err = UpdateFacet(n.b, types.KindMachineSet, "pool", types.FacetStatus, func(o *types.MachineSet) error {
		o.Status.Provisioned, o.Status.Available = 1, 1
		return nil
	})
	require.NoError(t, err)
	n.exchange(t, types.KindMachineSet, "pool")

	for _, st := range []*Store{n.a, n.b} {
		got, err := Get[types.MachineSet](st, types.KindMachineSet, "pool")
		require.NoError(t, err)
		assert.Equal(t, 5, got.Spec.MinAvailable, "%s: the PUT is kept", st.NodeID())
		assert.Equal(t, 1, got.Status.Provisioned, "%s: and the owner's status", st.NodeID())
	}
}

func TestUpdateFacetRefusesOtherFacets(t *testing.T) {
	s, _ := newMemStore(t)
	putClaim(t, s, "c1")
	_, err := UpdateFacet(s, types.KindMachineClaim, "c1", types.FacetStatus, func(o *types.MachineClaim) error {
		o.Spec.User = "mallory"
		return nil
	})
	require.ErrorIs(t, err, ErrNotOwner)
	assert.Contains(t, err.Error(), "facet spec")
	got, err := Get[types.MachineClaim](s, types.KindMachineClaim, "c1")
	require.NoError(t, err)
	assert.Equal(t, "alice", got.Spec.User, "nothing was written")
}

// A write changes only the facets it changed; another writer's facet written
// meanwhile is no conflict and is kept.
func TestUpdateWritesOnlyChangedFacets(t *testing.T) {
	s, _ := newMemStore(t)
	rec := putClaim(t, s, "c1")
	// Someone writes the status after rec was read.
	_, err := Update(s, types.KindMachineClaim, "c1", func(o *types.MachineClaim) error {
		o.Status.Election = &types.ClaimElection{Reason: "owner's word"}
		return nil
	})
	require.NoError(t, err)
	obj, err := Decode(rec)
	require.NoError(t, err)
	c := obj.(*types.MachineClaim)
	c.Spec.User = "bob"
	out, err := s.Put(c, PutOptions{Base: &rec})
	require.NoError(t, err, "the status changed since, but this write does not touch it")
	got, err := Decode(out)
	require.NoError(t, err)
	assert.Equal(t, "bob", got.(*types.MachineClaim).Spec.User)
	assert.Equal(t, "owner's word", got.(*types.MachineClaim).Status.Reason)

	// The same facet changed since Base is a conflict.
	c.Spec.User = "carol"
	_, err = s.Put(c, PutOptions{Base: &rec})
	assert.ErrorIs(t, err, ErrConflict)

	// A function that changes nothing writes nothing.
	seq := s.Seq()
	_, err = Update(s, types.KindMachineClaim, "c1", func(o *types.MachineClaim) error { return nil })
	require.NoError(t, err)
	assert.Equal(t, seq, s.Seq())
}

func TestMergeFacetByFacet(t *testing.T) {
	v := func(h uint64, n string) types.Version { return types.Version{HLC: h, Node: n} }
	f := func(name string, ver types.Version, data string) FacetRecord {
		return FacetRecord{Name: name, Version: ver, Data: []byte(data)}
	}
	spec := `{"spec":{"machineTemplate":"t"}}`
	s, _ := newMemStore(t)

	// Facets may arrive before the object they belong to: kept, not shown.
	ok, err := s.Apply(Record{Kind: types.KindMachineClaim, Name: "c", Version: v(5, "b"),
		Facets: []FacetRecord{f("election", v(5, "b"), `{"round":0,"reason":"early"}`)}})
	require.NoError(t, err)
	require.True(t, ok)
	_, err = s.Get(types.KindMachineClaim, "c")
	assert.ErrorIs(t, err, ErrNotFound, "no creating facet yet")

	ok, err = s.Apply(Record{Kind: types.KindMachineClaim, Name: "c", Version: v(3, "a"), Facets: []FacetRecord{f("spec", v(3, "a"), spec)}})
	require.NoError(t, err)
	require.True(t, ok)
	got, err := Get[types.MachineClaim](s, types.KindMachineClaim, "c")
	require.NoError(t, err)
	assert.Equal(t, "early", got.Status.Reason, "the early facet joins its object")
	assert.Equal(t, v(5, "b"), got.Metadata.Version, "the object's version is its newest facet's")

	// An older copy of a facet changes nothing.
	ok, err = s.Apply(Record{Kind: types.KindMachineClaim, Name: "c", Version: v(4, "c"), Facets: []FacetRecord{f("election", v(4, "c"), `{"round":0,"reason":"old"}`)}})
	require.NoError(t, err)
	assert.False(t, ok)

	// A deletion removes the facets written before it, not those after.
	ok, err = s.Apply(Record{Kind: types.KindMachineClaim, Name: "c", Version: v(6, "a"), Tomb: v(4, "a")})
	require.NoError(t, err)
	require.True(t, ok)
	_, err = s.Get(types.KindMachineClaim, "c")
	assert.ErrorIs(t, err, ErrNotFound, "the spec (3) went with the deletion (4)")
	var kept Record
	require.NoError(t, s.Scan(func(r Record) error { kept = r; return nil }))
	require.Len(t, kept.Facets, 1)
	assert.Equal(t, "election", kept.Facets[0].Name, "the election (5) came after it and stays")

	// The same records in another order end in the same state.
	s2, _ := newMemStore(t)
	for _, r := range []Record{
		{Kind: types.KindMachineClaim, Name: "c", Version: v(6, "a"), Tomb: v(4, "a")},
		{Kind: types.KindMachineClaim, Name: "c", Version: v(4, "c"), Facets: []FacetRecord{f("election", v(4, "c"), `{"round":0,"reason":"old"}`)}},
		{Kind: types.KindMachineClaim, Name: "c", Version: v(3, "a"), Facets: []FacetRecord{f("spec", v(3, "a"), spec)}},
		{Kind: types.KindMachineClaim, Name: "c", Version: v(5, "b"), Facets: []FacetRecord{f("election", v(5, "b"), `{"round":0,"reason":"early"}`)}},
	} {
		_, err := s2.Apply(r)
		require.NoError(t, err)
	}
	var other Record
	require.NoError(t, s2.Scan(func(r Record) error { other = r; return nil }))
	assert.Equal(t, kept.Fingerprint(), other.Fingerprint())
	assert.Equal(t, kept.Facets, other.Facets)
}

// A claim's election and binding order by round (the facet's epoch) before
// version: the node serving round 2 wins over the one of round 1 whatever
// their clocks say, on every copy, and a late write of an older round is
// refused.
func TestEpochOrdersBeforeVersion(t *testing.T) {
	n := newTwoNodes(t)
	putClaim(t, n.a, "c")
	n.exchange(t, types.KindMachineClaim, "c")
	// b serves round 2 first (its clock is behind) ...
	_, err := UpdateFacet(n.b, types.KindMachineClaim, "c", types.FacetBinding, func(c *types.MachineClaim) error {
		c.Status.Binding = &types.ClaimBinding{Round: 2, Node: "b", Machine: "m2", Phase: types.BindingBound}
		return nil
	})
	require.NoError(t, err)
	// ... a writes round 1 later, by the clock.
	n.clk.Add(time.Second)
	_, err = UpdateFacet(n.a, types.KindMachineClaim, "c", types.FacetBinding, func(c *types.MachineClaim) error {
		c.Status.Binding = &types.ClaimBinding{Round: 1, Node: "a", Machine: "m1", Phase: types.BindingBound}
		return nil
	})
	require.NoError(t, err)
	n.exchange(t, types.KindMachineClaim, "c")
	for _, st := range []*Store{n.a, n.b} {
		got, err := Get[types.MachineClaim](st, types.KindMachineClaim, "c")
		require.NoError(t, err)
		assert.Equal(t, "m2", got.Status.Machine, "%s: round 2 wins", st.NodeID())
		var rec Record
		require.NoError(t, st.Scan(func(r Record) error { rec = r; return nil }))
		f, _ := rec.facet(types.FacetBinding)
		assert.Equal(t, types.BindingEpoch(&types.ClaimBinding{Round: 2}), f.Epoch, "%s: the epoch is kept through replication", st.NodeID())
	}
	_, err = UpdateFacet(n.a, types.KindMachineClaim, "c", types.FacetBinding, func(c *types.MachineClaim) error {
		c.Status.Binding = &types.ClaimBinding{Round: 1, Node: "a", Machine: "m1", Phase: types.BindingLost}
		return nil
	})
	assert.ErrorIs(t, err, ErrFenced)
}

// TestSplitFacetsMarshalers: a facet that marshals itself is stored as the
// bytes Marshal would have made of it, HTML escapes and all.
func TestSplitFacetsMarshalers(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 6, time.UTC)
	objs := []types.Object{
		&types.Machine{TypeMeta: types.TypeMeta{Kind: types.KindMachine},
			Metadata: types.ObjectMeta{Name: "m1", CreatedAt: at, Labels: map[string]string{"a<b": "x&y", "z": "\u2028"}, Annotations: map[string]string{"n": "<script>"}},
			Spec:     types.MachineSpec{Node: "n1", Claim: "c1", Round: 3},
			Status:   types.MachineStatus{Phase: types.MachineRunning, Reason: "up > down"}},
		&types.Node{TypeMeta: types.TypeMeta{Kind: types.KindNode},
			Metadata: types.ObjectMeta{Name: "n1", CreatedAt: at, Labels: map[string]string{"zone": "<a>"}},
			Status:   types.NodeStatus{Phase: types.NodeUp}},
	}
	// And every kind's, empty: a facet that marshals itself added later is
	// checked too.
	for _, kind := range types.Kinds() {
		obj, err := types.New(kind)
		require.NoError(t, err)
		objs = append(objs, obj)
	}
	selfMarshalled := map[string]bool{}
	for _, obj := range objs {
		fs, err := splitFacets(obj)
		require.NoError(t, err)
		for i, f := range obj.Facets() {
			if _, ok := f.Value.(json.Marshaler); !ok {
				continue
			}
			selfMarshalled[obj.GetKind()] = true
			want, err := fastjson.Marshal(f.Value)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(fs[i].Data), "%s facet %s", obj.GetKind(), f.Name)
		}
	}
	assert.True(t, selfMarshalled[types.KindMachine] && selfMarshalled[types.KindNode], "the machine's and the node's facets were checked: %v", selfMarshalled)
}

// Nodes of two releases compare fingerprints in anti-entropy, so their value
// is part of the wire: the FNV-1a of the tombstone's version, then
// "\x00name\x00epoch\x00version" per facet. A change of the computation
// that changed the value would make every record differ during an upgrade.
func TestFingerprintValue(t *testing.T) {
	v := func(h uint64, n string) types.Version { return types.Version{HLC: h, Node: n} }
	fnv := func(s string) uint64 {
		h := uint64(14695981039346656037)
		for i := 0; i < len(s); i++ {
			h ^= uint64(s[i])
			h *= 1099511628211
		}
		return h
	}
	r := Record{Tomb: v(7, "n1"), Facets: []FacetRecord{
		{Name: "spec", Version: v(9, "n2")},
		{Name: "binding", Epoch: 3, Version: v(12, "a-very-long-node-name-that-goes-past-the-scratch-buffer-of-the-fingerprint-and-then-some-more")},
	}}
	want := fnv("7@n1" + "\x00spec\x000\x009@n2" + "\x00binding\x003\x0012@a-very-long-node-name-that-goes-past-the-scratch-buffer-of-the-fingerprint-and-then-some-more")
	assert.Equal(t, want, r.Fingerprint())
	assert.Equal(t, fnv("\x00spec\x000\x00"), (&Record{Facets: []FacetRecord{{Name: "spec"}}}).Fingerprint(), "zero versions are empty")
	assert.Zero(t, testing.AllocsPerRun(100, func() { r.Facets = r.Facets[:1]; _ = r.Fingerprint() }))
}

// Apply tells a record the store holds exactly (Held) from one it holds a
// newer copy of: a push that anti-entropy brought first is still relayed.
func TestApplyHeld(t *testing.T) {
	v := func(h uint64, n string) types.Version { return types.Version{HLC: h, Node: n} }
	s, _ := newMemStore(t)
	spec := FacetRecord{Name: types.FacetSpec, Version: v(5, "a"), Data: []byte(`{"spec":{"machineTemplate":"t"}}`)}
	rec := Record{Kind: types.KindMachineClaim, Name: "c", Version: v(5, "a"), Facets: []FacetRecord{spec}}
	got := s.ApplyBatch([]Record{rec})[0]
	require.NoError(t, got.Err)
	assert.True(t, got.Changed)
	assert.False(t, got.Held)

	got = s.ApplyBatch([]Record{rec})[0]
	assert.Equal(t, Applied{Held: true}, got, "the same copy again")

	newer := spec
	newer.Version, newer.Data = v(7, "b"), []byte(`{"spec":{"machineTemplate":"u"}}`)
	require.True(t, s.ApplyBatch([]Record{{Kind: rec.Kind, Name: rec.Name, Version: v(7, "b"), Facets: []FacetRecord{newer}}})[0].Changed)
	assert.Equal(t, Applied{}, s.ApplyBatch([]Record{rec})[0], "an older copy is neither news nor held")
}

// A record from another node whose facets are not JSON, or not this kind's,
// is refused whole, whether it creates the object or only brings a facet
// that waits for its creating one.
func TestApplyRefusesBadFacets(t *testing.T) {
	v := types.Version{HLC: 5, Node: "a"}
	s, _ := newMemStore(t)
	for _, tc := range []struct {
		name  string
		facet FacetRecord
	}{
		{"spec not JSON", FacetRecord{Name: types.FacetSpec, Version: v, Data: []byte(`{"spec":`)}},
		{"spec of another shape", FacetRecord{Name: types.FacetSpec, Version: v, Data: []byte(`{"spec":{"machineTemplate":7}}`)}},
		{"a lone facet not JSON", FacetRecord{Name: "election", Version: v, Epoch: 1, Data: []byte(`{round`)}},
		{"no version", FacetRecord{Name: types.FacetSpec, Data: []byte(`{}`)}},
	} {
		_, err := s.Apply(Record{Kind: types.KindMachineClaim, Name: "c", Version: v, Facets: []FacetRecord{tc.facet}})
		assert.Error(t, err, tc.name)
	}
	_, err := s.Get(types.KindMachineClaim, "c")
	assert.ErrorIs(t, err, ErrNotFound, "nothing was stored")
	changed, err := s.Apply(Record{Kind: types.KindMachineClaim, Name: "c", Version: v,
		Facets: []FacetRecord{{Name: "election", Version: v, Epoch: 1, Data: []byte(`{"round":1}`)}}})
	require.NoError(t, err)
	assert.True(t, changed, "a good lone facet waits for its object")
}
