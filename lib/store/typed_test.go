package store

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestDecode(t *testing.T) {
	s, _ := newMemStore(t)
	rec := putClaim(t, s, "c1")
	obj, err := Decode(rec)
	require.NoError(t, err)
	c, ok := obj.(*types.MachineClaim)
	require.True(t, ok)
	assert.Equal(t, "c1", c.Metadata.Name)
	assert.Equal(t, rec.Version, c.Metadata.Version)
	assert.Equal(t, "alice", c.Spec.User)

	tomb, err := s.Delete(types.KindMachineClaim, "c1", types.Version{})
	require.NoError(t, err)
	_, err = Decode(tomb)
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = Decode(Record{Kind: "Nope", Name: "x", Data: []byte(`{}`)})
	assert.ErrorContains(t, err, "unknown kind")
	_, err = Decode(Record{Kind: types.KindNode, Name: "x", Data: []byte(`{"kind":"Machine"}`)})
	assert.ErrorContains(t, err, "kind")
}

func TestTypedGetList(t *testing.T) {
	s, _ := newMemStore(t)
	for _, n := range []string{"b", "a"} {
		putClaim(t, s, n)
	}
	c, err := Get[types.MachineClaim](s, types.KindMachineClaim, "a")
	require.NoError(t, err)
	assert.Equal(t, "ubuntu", c.Spec.MachineTemplate)
	_, err = Get[types.MachineClaim](s, types.KindMachineClaim, "zz")
	assert.ErrorIs(t, err, ErrNotFound)
	_, err = Get[types.Node](s, types.KindMachineClaim, "a")
	assert.ErrorContains(t, err, "*types.MachineClaim, not *types.Node", "the wrong Go type for the kind is refused")
	_, err = List[types.Node](s, types.KindMachineClaim)
	assert.Error(t, err)
	_, err = Update(s, types.KindMachineClaim, "a", func(*types.Node) error { return nil })
	assert.Error(t, err)

	all, err := List[types.MachineClaim](s, types.KindMachineClaim)
	require.NoError(t, err)
	require.Len(t, all, 2)
	assert.Equal(t, "a", all[0].Metadata.Name)
	assert.Equal(t, "b", all[1].Metadata.Name)
	none, err := List[types.Node](s, types.KindNode)
	require.NoError(t, err)
	assert.Empty(t, none)
}

func TestTypedUpdate(t *testing.T) {
	boom := errors.New("boom")
	cases := []struct {
		name      string
		target    string
		fn        func(*types.MachineClaim) error
		wantErr   error
		wantRound uint64
		wrote     bool
	}{
		{"changes", "c", func(c *types.MachineClaim) error { c.Status.Election = &types.ClaimElection{Round: 5}; return nil }, nil, 5, true},
		{"no change", "c", func(c *types.MachineClaim) error {
			c.Status.Election = &types.ClaimElection{Round: 9}
			return ErrNoChange
		}, nil, 0, false},
		{"fn error aborts", "c", func(c *types.MachineClaim) error { return boom }, boom, 0, false},
		{"missing", "nope", func(c *types.MachineClaim) error { return nil }, ErrNotFound, 0, false},
		{"renaming is refused", "c", func(c *types.MachineClaim) error { c.Metadata.Name = "d"; return nil }, nil, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := newMemStore(t)
			rec := putClaim(t, s, "c")
			got, err := Update(s, types.KindMachineClaim, tc.target, tc.fn)
			switch {
			case tc.name == "renaming is refused":
				require.ErrorContains(t, err, "name")
			case tc.wantErr != nil:
				require.ErrorIs(t, err, tc.wantErr)
			default:
				require.NoError(t, err)
				assert.Equal(t, tc.wantRound, got.Status.Round)
			}
			stored, err := Get[types.MachineClaim](s, types.KindMachineClaim, "c")
			require.NoError(t, err)
			if tc.wrote {
				assert.Equal(t, 1, stored.Metadata.Version.Compare(rec.Version))
				assert.Equal(t, stored.Metadata.Version, got.Metadata.Version)
			} else {
				assert.Equal(t, rec.Version, stored.Metadata.Version, "nothing written")
			}
			assert.Equal(t, tc.wantRound, stored.Status.Round)
		})
	}
}

// TestTypedUpdateConcurrent increments one counter from several goroutines:
// every increment lands exactly once thanks to IfVersion and the retries.
func TestTypedUpdateConcurrent(t *testing.T) {
	s, _ := newMemStore(t)
	putClaim(t, s, "counter")
	const workers, each = 4, 25
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				_, err := Update(s, types.KindMachineClaim, "counter", func(c *types.MachineClaim) error {
					e := types.ClaimElection{}
					if c.Status.Election != nil {
						e = *c.Status.Election
					}
					e.Round++
					c.Status.Election = &e
					return nil
				})
				assert.NoError(t, err)
			}
		})
	}
	// A writer of another facet races them too; it never conflicts with them.
	wg.Go(func() {
		for range 50 {
			_, err := Update(s, types.KindMachineClaim, "counter", func(c *types.MachineClaim) error {
				c.Status.End = &types.ClaimEnd{Reason: "touched"}
				return nil
			})
			assert.NoError(t, err)
		}
	})
	wg.Wait()
	c, err := Get[types.MachineClaim](s, types.KindMachineClaim, "counter")
	require.NoError(t, err)
	assert.Equal(t, uint64(workers*each), c.Status.Round)
	assert.Equal(t, "touched", c.Status.Reason)
}

// An update returns its own object only when no other writer's facet
// changed between its read and its write; else it decodes what is stored.
func TestOnlyOurs(t *testing.T) {
	v := func(hlc uint64, node string) types.Version { return types.Version{HLC: hlc, Node: node} }
	base := Record{Facets: []FacetRecord{{Name: "spec", Version: v(1, "a")}, {Name: "election", Version: v(2, "b")}}}
	ours := Record{Version: v(5, "c"), Facets: []FacetRecord{{Name: "spec", Version: v(1, "a")}, {Name: "election", Version: v(2, "b")}, {Name: "binding", Version: v(5, "c")}}}
	assert.True(t, onlyOurs(base, ours))
	theirs := ours
	theirs.Facets = []FacetRecord{{Name: "spec", Version: v(1, "a")}, {Name: "election", Version: v(4, "b")}, {Name: "binding", Version: v(5, "c")}}
	assert.False(t, onlyOurs(base, theirs), "the elector wrote its facet in between")
	tomb := ours
	tomb.Tomb = v(3, "d")
	assert.False(t, onlyOurs(base, tomb), "a deletion came in between")
}
