package types

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// A claim bound, then handed back and failed keeps its Bound time in its
// phase history (it went Requested -> Failed, as if never bound); a claim
// whose round was given back before it bound shows none.
func TestClaimHistoryKeepsBound(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	claim := func(b *ClaimBinding, e *ClaimElection) *MachineClaim {
		c := &MachineClaim{Metadata: ObjectMeta{Name: "c", CreatedAt: t0}, Status: MachineClaimStatus{Binding: b, Election: e}}
		c.Derive()
		return c
	}
	lost := &ClaimBinding{Round: 1, Node: "n1", Machine: "m1", Phase: BindingLost, At: t0.Add(time.Hour), Since: t0.Add(time.Second)}
	failed := claim(lost, &ClaimElection{Round: 2, Failed: true, Reason: "machine m1 lost", At: t0.Add(2 * time.Hour)})
	assert.Equal(t, ClaimFailed, failed.Status.Phase)
	assert.Equal(t, t0.Add(time.Second), failed.Status.PhaseTimes.At(string(ClaimBound)))
	assert.Equal(t, t0.Add(2*time.Hour), failed.Status.PhaseTimes.At(string(ClaimFailed)))

	rebinding := claim(lost, &ClaimElection{Round: 2, Reason: "machine m1 lost", Rebinds: 1})
	assert.Equal(t, ClaimRequested, rebinding.Status.Phase)
	assert.Equal(t, t0.Add(time.Second), rebinding.Status.PhaseTimes.At(string(ClaimBound)))

	released := &ClaimBinding{Round: 1, Node: "n1", Phase: BindingReleased, Reason: "no room", At: t0.Add(time.Second), Since: t0.Add(time.Second)}
	never := claim(released, &ClaimElection{Round: 2, Failed: true, Reason: "no room", At: t0.Add(time.Minute)})
	assert.True(t, never.Status.PhaseTimes.At(string(ClaimBound)).IsZero(), "never bound")

	bound := claim(&ClaimBinding{Round: 1, Node: "n1", Machine: "m1", Phase: BindingBound, At: t0.Add(time.Second), Since: t0.Add(time.Second)}, nil)
	assert.Equal(t, ClaimBound, bound.Status.Phase)
	assert.Equal(t, t0.Add(time.Second), bound.Status.PhaseTimes.At(string(ClaimBound)))
}
