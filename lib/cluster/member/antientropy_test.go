package member

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestBeginStream: one unasked-for record stream per peer at a time.
func TestBeginStream(t *testing.T) {
	a := newAntiEntropy(nil, nil)
	assert.True(t, a.beginStream("b"))
	assert.False(t, a.beginStream("b"), "a second stream to b waits for the next round")
	assert.True(t, a.beginStream("c"), "other peers are not held back")
	a.endStream("b")
	assert.True(t, a.beginStream("b"))
}
