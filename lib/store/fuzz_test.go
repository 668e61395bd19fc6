package store

import (
	"fmt"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hf-fleet/hf/lib/types"
)

// fuzzKinds are the kinds the fuzzers pick from (by a byte): the ones whose
// records carry most facets, and one that does not exist.
var fuzzKinds = []string{types.KindMachineClaim, types.KindMachine, types.KindNode, types.KindMachineSet, "Nope"}

func fuzzKind(k byte) string { return fuzzKinds[int(k)%len(fuzzKinds)] }

// FuzzDecodeRecord feeds the stored form of records (what badger returns,
// and what a data dir of any release holds) to decodeRecord: it must fail or
// give a record that encodes and decodes to itself, and whose object decodes
// or fails, without a panic.
func FuzzDecodeRecord(f *testing.F) {
	v1, v2 := types.Version{HLC: 1 << 50, Node: "node-a"}, types.Version{HLC: 1<<50 + 1, Node: "node-b"}
	for _, r := range []Record{
		{Seq: 42, Version: v2, Facets: []FacetRecord{{Name: "spec", Version: v1, Data: []byte(`{"spec":{"machineTemplate":"t"}}`)},
			{Name: "election", Epoch: 2, Version: v2, Data: []byte(`{"status":{"election":{"round":2,"node":"n1"}}}`)}}},
		{Seq: 1, Version: v2, Deleted: true, Tomb: v2, DeletedAt: time.Unix(5, 0).UTC()},
		{Seq: 9, Version: v2, Tomb: v1, DeletedAt: time.Unix(5, 0).UTC(), Facets: []FacetRecord{{Name: "spec", Version: v2, Data: []byte(`{}`)}}},
	} {
		f.Add(byte(0), encodeRecord(&r))
	}
	f.Add(byte(1), append([]byte{recordFormatV1, 0, 3, 1, 1, 'a'}, `{"kind":"Machine","metadata":{"name":"x"},"status":{"phase":"Running"}}`...))
	f.Add(byte(2), []byte{recordFormatV1, flagDeleted, 3, 1, 1, 'a', 10})
	f.Fuzz(func(t *testing.T, k byte, b []byte) {
		kind := fuzzKind(k)
		r, err := decodeRecord(kind, "x", b)
		if err != nil {
			return
		}
		again, err := decodeRecord(kind, "x", encodeRecord(&r))
		if err != nil {
			t.Fatalf("a decoded record does not decode again: %v", err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("round trip changed the record: %+v -> %+v", r, again)
		}
		if !r.Deleted {
			_, _ = Decode(r)
			_, _ = r.JSON()
		}
	})
}

// FuzzApply feeds records from a peer, facet by facet, to Apply on a store
// holding a claim: a record Apply takes must read back and decode, so that a
// peer's bad bytes are refused at the door, never stored to fail every later
// read of the object.
func FuzzApply(f *testing.F) {
	f.Add(byte(0), "spec", uint64(0), []byte(`{"spec":{"machineTemplate":"t2"}}`), false)
	f.Add(byte(0), "election", uint64(3), []byte(`{"status":{"election":{"round":3,"node":"n2","failed":true,"reason":"x"}}}`), false)
	f.Add(byte(0), "binding", uint64(1), []byte(`{"status":{"binding":{"round":1,"phase":"Bound","machine":"m"}}}`), false)
	f.Add(byte(1), "owner", uint64(0), []byte(`{"spec":{"claim":"x"},"status":{"phase":"Running"}}`), false)
	f.Add(byte(2), "report", uint64(0), []byte(`{"status":{"phase":"Up"}}`), true)
	f.Add(byte(0), "spec", uint64(0), []byte(`{"metadata":{"labels":{"a":1}}}`), false)
	f.Add(byte(0), "nope", uint64(0), []byte(`[]`), false)
	s, clk := newMemStore(f)
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, k byte, facet string, epoch uint64, data []byte, tomb bool) {
		name := fmt.Sprintf("x%d", n.Add(1))
		putClaim(t, s, name)
		kind := fuzzKind(k)
		v := types.Version{HLC: uint64(clk.Now().UnixNano()) << 1, Node: "peer"}
		rec := Record{Kind: kind, Name: name, Version: v, Facets: []FacetRecord{{Name: facet, Epoch: epoch, Version: v, Data: data}}}
		if tomb {
			rec.Tomb = types.Version{HLC: v.HLC - 1, Node: "peer"}
		}
		if changed, err := s.Apply(rec); err != nil || !changed {
			return
		}
		var got Record
		var ok bool
		err := s.db.View(func(txn *badger.Txn) (err error) {
			got, ok, err = getRecord(txn, kind, name)
			return err
		})
		if err != nil || !ok {
			t.Fatalf("applied record does not read back: %v", err)
		}
		if got.Deleted {
			return // a tombstone newer than the claim
		}
		if got, err = s.Get(kind, name); err != nil {
			t.Fatalf("applied record does not read back: %v", err)
		}
		if _, err := Decode(got); err != nil {
			t.Fatalf("applied record does not decode: %v", err)
		}
		if _, err := got.JSON(); err != nil {
			t.Fatalf("applied record does not assemble: %v", err)
		}
	})
}
