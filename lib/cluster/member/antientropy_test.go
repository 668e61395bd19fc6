package member

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBeginStream: one round's unasked-for record streams per peer at a
// time.
func TestBeginStream(t *testing.T) {
	a := newAntiEntropy(nil, nil)
	r1, r2 := roundKey{"b", 1}, roundKey{"a", 1}
	assert.True(t, a.beginStream("b", r1))
	assert.False(t, a.beginStream("b", r2), "another round's stream to b waits for the next round")
	assert.True(t, a.beginStream("b", r1), "the same round's next level goes along")
	assert.True(t, a.beginStream("c", r2), "other peers are not held back")
	a.endStream("b")
	assert.False(t, a.beginStream("b", r2), "one of r1's streams still runs")
	a.endStream("b")
	assert.True(t, a.beginStream("b", r2))
}
