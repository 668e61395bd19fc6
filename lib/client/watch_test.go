package client

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestReadEvents(t *testing.T) {
	stream := ": keep-alive\r\n\r\n" +
		"event: put\r\n" +
		`data: {"type":"put","kind":"MachineClaim","name":"c1","seq":7,` + "\r\n" +
		`data: "object":{"kind":"MachineClaim","metadata":{"name":"c1"},"spec":{"machineTemplate":"t"},"status":{"phase":"Bound"}}}` + "\r\n\r\n" +
		"id: 8\nretry: 1000\nevent: delete\ndata: {\"kind\":\"Machine\",\"name\":\"m1\",\"seq\":8}\n\n" +
		"event: resync\ndata: {\"type\":\"resync\",\"seq\":9}\n\n" +
		"event: put\ndata: {\"kind\":\"Node\",\"name\":\"half\""
	var got []WatchEvent
	err := readEvents(strings.NewReader(stream), func(ev WatchEvent) bool {
		got = append(got, ev)
		return true
	})
	require.NoError(t, err)
	require.Len(t, got, 3, "the unterminated last event is dropped")

	assert.Equal(t, EventPut, got[0].Type)
	assert.Equal(t, uint64(7), got[0].Seq)
	cl, ok := got[0].Object.(*types.MachineClaim)
	require.True(t, ok, "%T", got[0].Object)
	assert.Equal(t, types.ClaimBound, cl.Status.Phase)

	assert.Equal(t, WatchEvent{Type: EventDelete, Kind: types.KindMachine, Name: "m1", Seq: 8}, got[1])
	assert.Equal(t, WatchEvent{Type: EventResync, Seq: 9}, got[2])
}

func TestReadEventsStopsWhenEmitSaysSo(t *testing.T) {
	stream := strings.Repeat("data: {\"kind\":\"Node\",\"name\":\"n\"}\n\n", 5)
	n := 0
	err := readEvents(strings.NewReader(stream), func(WatchEvent) bool { n++; return n < 2 })
	require.NoError(t, err)
	assert.Equal(t, 2, n)
}

func TestReadEventsBadData(t *testing.T) {
	tests := map[string]string{
		"not json":     "data: {nope\n\n",
		"unknown kind": `data: {"kind":"Gadget","object":{"kind":"Gadget"}}` + "\n\n",
	}
	for name, stream := range tests {
		t.Run(name, func(t *testing.T) {
			err := readEvents(strings.NewReader(stream), func(WatchEvent) bool { return true })
			assert.Error(t, err)
		})
	}
}
