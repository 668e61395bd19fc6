package types

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// Of two nodes' bindings of one round the earlier wins (a higher epoch); a
// later round always wins; a node's own rewrite of its binding keeps its
// epoch, so the store's version orders those.
func TestBindingEpoch(t *testing.T) {
	t0 := time.Date(2030, 5, 6, 7, 8, 9, 0, time.UTC)
	var c MachineClaim
	c.SetBinding(ClaimBinding{Round: 1, Node: "n1", Machine: "m1", Phase: BindingBound}, t0)
	first := BindingEpoch(c.Status.Binding)
	var d MachineClaim
	d.SetBinding(ClaimBinding{Round: 1, Node: "n2", Machine: "m2", Phase: BindingBound}, t0.Add(2*time.Second))
	assert.Greater(t, first, BindingEpoch(d.Status.Binding), "the earlier binding of the round wins")

	c.SetBinding(ClaimBinding{Round: 1, Node: "n1", Phase: BindingReleased, Reason: "gone"}, t0.Add(time.Hour))
	assert.Equal(t, t0, c.Status.Binding.Since, "a node's rewrite keeps Since")
	assert.Equal(t, first, BindingEpoch(c.Status.Binding))

	c.SetBinding(ClaimBinding{Round: 2, Node: "n2", Machine: "m3", Phase: BindingBound}, t0.Add(2*time.Hour))
	assert.Greater(t, BindingEpoch(c.Status.Binding), first, "a later round wins")
	assert.Equal(t, uint64(0), BindingEpoch(nil))
	facets := c.Facets()
	assert.Equal(t, BindingEpoch(c.Status.Binding), facets[2].Epoch)
}
