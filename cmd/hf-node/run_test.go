package main

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// A store that cannot close (badger retrying a flush for ever) does not hold
// the node: it stops without it, with an error that says so.
func TestCloseWithinGivesUp(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	err := closeWithin(closerFunc(func() error { <-block; return nil }), 20*time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not close within 20ms")
	assert.NoError(t, closeWithin(closerFunc(func() error { return nil }), time.Minute))
	assert.EqualError(t, closeWithin(closerFunc(func() error { return errors.New("disk gone") }), time.Minute), "disk gone")
}
