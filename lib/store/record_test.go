package store

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/types"
)

func TestRecordEncodingRoundTrip(t *testing.T) {
	v1, v2 := types.Version{HLC: 1 << 50, Node: "node-a"}, types.Version{HLC: 1<<50 + 1, Node: "node-b"}
	cases := []struct {
		name string
		rec  Record
	}{
		{"object", Record{Kind: "MachineClaim", Name: "c1", Seq: 42, Version: v2, Facets: []FacetRecord{
			{Name: "spec", Version: v1, Data: []byte(`{"spec":{}}`)}, {Name: "status", Version: v2, Data: []byte(`{}`)}}}},
		{"tombstone", Record{Kind: "Node", Name: "n", Seq: 1, Version: types.Version{HLC: 7, Node: "b"}, Deleted: true,
			Tomb: types.Version{HLC: 7, Node: "b"}, DeletedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)}},
		{"deleted and made again", Record{Kind: "MachineClaim", Name: "c1", Seq: 9, Version: v2, Tomb: v1, DeletedAt: time.Unix(5, 0).UTC(),
			Facets: []FacetRecord{{Name: "spec", Version: v2, Data: []byte(`{}`)}}}},
		{"facets without their object", Record{Kind: "Node", Name: "x", Seq: 1 << 62, Version: types.Version{HLC: 1}, Deleted: true,
			Facets: []FacetRecord{{Name: "maintenance", Version: types.Version{HLC: 1}, Data: []byte(`{"maintenance":true}`)}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeRecord(tc.rec.Kind, tc.rec.Name, encodeRecord(&tc.rec))
			require.NoError(t, err)
			assert.Equal(t, tc.rec, got)
		})
	}
}

// A data dir of the previous release holds whole objects with one version:
// they read as facets of that version.
func TestRecordFormat1IsRead(t *testing.T) {
	v := types.Version{HLC: 1 << 50, Node: "a"}
	b := []byte{recordFormatV1, 0}
	b = binary.AppendUvarint(b, 3)
	b = binary.AppendUvarint(b, v.HLC)
	b = binary.AppendUvarint(b, 1)
	b = append(b, 'a')
	b = append(b, `{"kind":"MachineClaim","metadata":{"name":"c1","labels":{"x":"y"}},"spec":{"machineTemplate":"t"},"status":{"phase":"Bound"}}`...)
	r, err := decodeRecord("MachineClaim", "c1", b)
	require.NoError(t, err)
	assert.Equal(t, v, r.Version)
	assert.Equal(t, uint64(3), r.Seq)
	require.Len(t, r.Facets, 4)
	for _, f := range r.Facets {
		assert.Equal(t, v, f.Version)
	}
	require.NoError(t, r.withData())
	assert.Contains(t, string(r.Data), `"phase":"Bound"`)
	assert.Contains(t, string(r.Data), `"labels":{"x":"y"}`)

	tomb := []byte{recordFormatV1, flagDeleted}
	tomb = binary.AppendUvarint(tomb, 4)
	tomb = binary.AppendUvarint(tomb, v.HLC)
	tomb = binary.AppendUvarint(tomb, 1)
	tomb = append(tomb, 'a')
	tomb = binary.AppendVarint(tomb, time.Unix(9, 0).UnixNano())
	r, err = decodeRecord("MachineClaim", "c1", tomb)
	require.NoError(t, err)
	assert.True(t, r.Deleted)
	assert.Equal(t, v, r.Tomb)
}

func TestRecordDecodeRejectsGarbage(t *testing.T) {
	good := encodeRecord(&Record{Seq: 3, Version: types.Version{HLC: 9, Node: "abc"}, Deleted: true,
		Tomb: types.Version{HLC: 9, Node: "abc"}, DeletedAt: time.Unix(5, 0)})
	cases := map[string][]byte{
		"empty":          nil,
		"wrong format":   {9, 0},
		"truncated seq":  {recordFormat, 0, 0x80},
		"truncated node": good[:5],
		"no deletedAt":   good[:8], // header, seq, hlc, node "abc"
		"trailing bytes": append(append([]byte{}, good...), 1, 2),
		"facet count":    {recordFormat, 0, 1, 200},
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
