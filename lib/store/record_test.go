package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestRecordEncodingRoundTrip(t *testing.T) {
	cases := []struct {
		name string
		rec  Record
	}{
		{"object", Record{Kind: "MachineClaim", Name: "c1", Seq: 42, Version: types.Version{HLC: 1 << 50, Node: "node-a"}, Data: []byte(`{"kind":"MachineClaim"}`)}},
		{"tombstone", Record{Kind: "Node", Name: "n", Seq: 1, Version: types.Version{HLC: 7, Node: "b"}, Deleted: true, DeletedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}},
		{"empty node", Record{Kind: "K", Name: "x", Seq: 1 << 62, Version: types.Version{HLC: 1}, Data: []byte(`{}`)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeRecord(tc.rec.Kind, tc.rec.Name, encodeRecord(&tc.rec))
			require.NoError(t, err)
			assert.Equal(t, tc.rec, got)
		})
	}
}

func TestRecordDecodeRejectsGarbage(t *testing.T) {
	good := encodeRecord(&Record{Seq: 3, Version: types.Version{HLC: 9, Node: "abc"}, Deleted: true, DeletedAt: time.Unix(5, 0)})
	cases := map[string][]byte{
		"empty":          nil,
		"wrong format":   {9, 0},
		"truncated seq":  {recordFormat, 0, 0x80},
		"truncated node": good[:5],
		"no deletedAt":   good[:8], // header, seq, hlc, node "abc"
	}
	for name, b := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := decodeRecord("K", "x", b)
			assert.Error(t, err)
		})
	}
}

func TestObjectKeys(t *testing.T) {
	kind, name, err := parseObjectKey(objectKey("MachineClaim", "a/b"))
	require.NoError(t, err)
	assert.Equal(t, "MachineClaim", kind)
	assert.Equal(t, "a/b", name)
	_, _, err = parseObjectKey([]byte("q/xx"))
	assert.Error(t, err)
	assert.Less(t, string(seqKey(255)), string(seqKey(256)), "seq keys sort numerically")
}
