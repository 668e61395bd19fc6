package member

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/hf-fleet/hf/lib/cluster/wire"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

func TestRecordsRoundTrip(t *testing.T) {
	deletedAt := time.Date(2026, 3, 1, 12, 0, 0, 5, time.UTC)
	tests := []struct {
		name string
		typ  msgType
		recs []store.Record
	}{
		{"empty", msgRecords, []store.Record{}},
		{"object", msgRecords, []store.Record{{
			Kind: "MachineClaim", Name: "c1", Version: types.Version{HLC: 42, Node: "n1"},
			Facets: []store.FacetRecord{{Name: "spec", Version: types.Version{HLC: 41, Node: "n2"}, Data: json.RawMessage(`{"spec":{}}`)},
				{Name: "status", Version: types.Version{HLC: 42, Node: "n1"}, Data: json.RawMessage(`{}`)}},
		}}},
		{"tombstone and object", msgPullResp, []store.Record{
			{Kind: "Node", Name: "n2", Version: types.Version{HLC: 1 << 60, Node: "n2"}, Tomb: types.Version{HLC: 1 << 60, Node: "n2"}, DeletedAt: deletedAt},
			{Kind: "Node", Name: "n3", Version: types.Version{HLC: 9, Node: "n3"}, Tomb: types.Version{HLC: 7, Node: "n3"}, DeletedAt: deletedAt,
				Facets: []store.FacetRecord{{Name: "report", Version: types.Version{HLC: 9, Node: "n3"}, Data: json.RawMessage(`{}`)}}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			buf := encodeRecords(tt.typ, "n9", tt.recs)
			typ, body, err := splitType(buf)
			require.NoError(t, err)
			assert.Equal(t, tt.typ, typ)
			got, err := decodeRecords(typ, body)
			require.NoError(t, err)
			assert.Equal(t, "n9", got.From)
			assert.Equal(t, tt.recs, got.Records)
		})
	}
}

func TestRecordsDropSeq(t *testing.T) {
	buf := encodeRecords(msgRecords, "n1", []store.Record{{Kind: "K", Name: "a", Seq: 99, Version: types.Version{HLC: 1, Node: "n1"},
		Facets: []store.FacetRecord{{Name: "spec", Version: types.Version{HLC: 1, Node: "n1"}, Data: []byte("{}")}}}})
	got, err := decodeRecords(msgRecords, buf[1:])
	require.NoError(t, err)
	assert.Zero(t, got.Records[0].Seq, "seq is local to each store")
}

func TestTreeMessagesRoundTrip(t *testing.T) {
	hashes := make([]uint64, 2*treeFanout)
	for i := range hashes {
		hashes[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	req := treeReq{Round: 7, From: "n1", InFlight: 123 << 16, Level: 2, Parents: []int{3, 15}, Hashes: hashes}
	buf := encodeTreeReq(req)
	assert.Less(t, len(buf), 8*len(hashes)+32)
	gotReq, err := decodeTreeReq(buf[1:])
	require.NoError(t, err)
	assert.Equal(t, req, gotReq)

	resp := treeResp{Round: 7, From: "n2", Level: treeDepth, Page: 1, Pages: 3, Differ: []int{0, 5, NumLeaves - 1}, Empty: []int{7}, Sent: []int{9},
		Entries: []leafEntry{{Key: Key{"Node", "n1"}, Hash: 1 << 63, Settled: true}, {Key: Key{"MachineClaim", "c"}, Hash: 5}, {Key: Key{"Node", "n2"}, Hash: 6}}}
	buf = encodeTreeResp(resp)
	gotResp, err := decodeTreeResp(buf[1:])
	require.NoError(t, err)
	assert.Equal(t, resp, gotResp)

	inSync := encodeTreeResp(treeResp{Round: 7, From: "n2", Level: 1, Pages: 1})
	assert.Less(t, len(inSync), 16, "an in-sync answer is a few bytes")

	pull := pullReq{Round: 7, From: "n1", Keys: []Key{{"Node", "a"}, {"MachineClaim", "b"}}}
	gotPull, err := decodePullReq(encodePullReq(pull)[1:])
	require.NoError(t, err)
	assert.Equal(t, pull, gotPull)

	gotLeave, err := decodeLeaving(encodeLeaving(leavingMsg{From: "n3"})[1:])
	require.NoError(t, err)
	assert.Equal(t, "n3", gotLeave.From)
}

func TestElectionRoundTrip(t *testing.T) {
	msg := wire.Message{Type: wire.MsgDecline, From: "a", To: "b", Claim: "c", Round: 4, Reason: "full",
		Fresh: &types.Capacity{Total: types.Resources{CPU: 2}}}
	// The binary form carries every field, an offer's records included.
	offer := wire.Message{Type: wire.MsgOffer, From: "a", To: "b", Claim: "c", Node: "b", Driver: "test", Round: 2, Set: "pool",
		Records: []store.Record{
			{Kind: types.KindMachineClaim, Name: "c", Version: types.Version{HLC: 9, Node: "a"},
				Facets: []store.FacetRecord{{Name: "spec", Version: types.Version{HLC: 9, Node: "a"}, Data: []byte(`{"spec":{}}`)},
					{Name: "election", Epoch: 1, Version: types.Version{HLC: 8, Node: "a"}, Data: []byte(`{"round":1}`)}}},
			{Kind: types.KindMachineTemplate, Name: "t", Version: types.Version{HLC: 5, Node: "x"}, Tomb: types.Version{HLC: 5, Node: "x"},
				DeletedAt: time.Unix(7, 0).UTC()},
		}}
	for _, codec := range []struct {
		typ    msgType
		encode func(wire.Message) ([]byte, error)
		decode func([]byte) (wire.Message, error)
		msgs   []wire.Message
	}{
		{msgElection, encodeElection, decodeElection, []wire.Message{msg}},
		{msgElectionBinary, encodeElectionBinary, decodeElectionBinary,
			[]wire.Message{msg, offer, {Type: wire.MsgTake, From: "a", To: "b", Claim: "c", Machine: "m-1"}}},
	} {
		for _, m := range codec.msgs {
			buf, err := codec.encode(m)
			require.NoError(t, err)
			assert.Equal(t, byte(codec.typ), buf[0])
			got, err := codec.decode(buf[1:])
			require.NoError(t, err)
			assert.Equal(t, m, got)
		}
	}
	_, err := decodeElectionBinary([]byte{0})
	assert.ErrorContains(t, err, "out of range", "type 0")
}

func TestDecodeRejectsBadInput(t *testing.T) {
	good := encodeTreeResp(treeResp{Round: 1, From: "n", Level: 1, Pages: 1, Differ: []int{3}})
	req := func(level int, parents []int, hashes int) []byte {
		return encodeTreeReq(treeReq{From: "n", Level: level, Parents: parents, Hashes: make([]uint64, hashes)})[1:]
	}
	resp := func(m treeResp) []byte { m.From = "n"; return encodeTreeResp(m)[1:] }
	decReq := func(b []byte) error { _, err := decodeTreeReq(b); return err }
	decResp := func(b []byte) error { _, err := decodeTreeResp(b); return err }
	tests := []struct {
		name   string
		decode func([]byte) error
		body   []byte
		want   string
	}{
		{"records short", func(b []byte) error { _, err := decodeRecords(msgRecords, b); return err }, []byte{}, "too short"},
		{"records huge count", func(b []byte) error { _, err := decodeRecords(msgRecords, b); return err }, []byte{1, 'n', 0xff, 0xff, 0xff, 0x0f}, "exceeds"},
		{"request level 0", decReq, req(0, nil, 0), "level"},
		{"request level below the leaves", decReq, req(treeDepth+1, nil, 0), "level"},
		{"request too few hashes", decReq, req(1, []int{0}, treeFanout-1), "exceeds"},
		{"request too many hashes", decReq, req(1, []int{0}, treeFanout+1), "trailing"},
		{"request parent out of range", decReq, req(2, []int{treeFanout}, treeFanout), "out of range"},
		{"request parents repeat", decReq, req(3, []int{4, 4}, 2*treeFanout), "ascending"},
		{"response page out of range", decResp, resp(treeResp{Level: 1, Page: 2, Pages: 2}), "page"},
		{"response level out of range", decResp, resp(treeResp{Level: 9, Pages: 1}), "level"},
		{"response node out of range", decResp, resp(treeResp{Level: 1, Pages: 1, Differ: []int{treeFanout}}), "out of range"},
		{"response leaf out of range", decResp, resp(treeResp{Level: treeDepth, Pages: 1, Sent: []int{NumLeaves}}), "out of range"},
		{"response kind out of range", decResp, badKind(), "kind"},
		{"trailing bytes", decResp, append(good[1:], 0), "trailing"},
		{"election not json", func(b []byte) error { _, err := decodeElection(b); return err }, []byte("{"), "election"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.decode(tt.body)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tt.want)
		})
	}
	_, _, err := splitType(nil)
	assert.Error(t, err)
}

// badKind is a tree response whose one entry names a kind its table lacks.
func badKind() []byte {
	e := newEncoder(msgTreeResp, 64)
	e.uint(1) // round
	e.str("n")
	e.uint(1) // level
	e.uint(0) // page
	e.uint(1) // pages
	e.indexes(nil)
	e.indexes(nil)
	e.indexes(nil)
	e.uint(0) // no kinds
	e.uint(1) // one entry
	e.uint(2) // kind 1
	e.str("x")
	e.fixed64(0)
	return e.b[1:]
}

func FuzzDecode(f *testing.F) {
	f.Add(encodeRecords(msgRecords, "n1", []store.Record{{Kind: "K", Name: "a", Version: types.Version{HLC: 1, Node: "n1"}, Data: []byte("{}")}}))
	f.Add(encodeTreeReq(treeReq{From: "n", Level: 1, Parents: []int{0}, Hashes: make([]uint64, treeFanout)}))
	f.Add(encodeTreeReq(treeReq{From: "n", InFlight: 1 << 40, Level: treeDepth, Parents: []int{1, 200}, Hashes: make([]uint64, 2*treeFanout)}))
	f.Add(encodeTreeResp(treeResp{From: "n", Level: 1, Pages: 1, Differ: []int{1}, Empty: []int{2}, Sent: []int{3}}))
	f.Add(encodeTreeResp(treeResp{From: "n", Level: treeDepth, Pages: 2, Page: 1, Differ: []int{1, 4000},
		Entries: []leafEntry{{Key: Key{"K", "a"}, Hash: 3, Settled: true}, {Key: Key{"L", "b"}}}}))
	f.Add(encodePullReq(pullReq{From: "n", Keys: []Key{{"K", "a"}}}))
	f.Add(encodeLeaving(leavingMsg{From: "n"}))
	if b, err := encodeElectionBinary(wire.Message{Type: wire.MsgDecline, From: "a", To: "b", Claim: "c", Round: 3, Reason: "full",
		Fresh: &types.Capacity{}, Records: []store.Record{{Kind: "K", Name: "a", Version: types.Version{HLC: 1, Node: "n1"},
			Facets: []store.FacetRecord{{Name: "spec", Version: types.Version{HLC: 1, Node: "n1"}, Data: []byte("{}")}}}}}); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, buf []byte) {
		// Nothing may panic or allocate without bound; what decodes must
		// encode back to the same bytes.
		typ, body, err := splitType(buf)
		if err != nil {
			return
		}
		switch typ {
		case msgRecords, msgPullResp:
			if m, err := decodeRecords(typ, body); err == nil {
				again, err := decodeRecords(typ, encodeRecords(typ, m.From, m.Records)[1:])
				require.NoError(t, err)
				assert.Equal(t, len(m.Records), len(again.Records))
			}
		case msgTreeReq:
			if m, err := decodeTreeReq(body); err == nil {
				again, err := decodeTreeReq(encodeTreeReq(m)[1:])
				require.NoError(t, err)
				assert.Equal(t, m, again)
			}
		case msgTreeResp:
			if m, err := decodeTreeResp(body); err == nil {
				again, err := decodeTreeResp(encodeTreeResp(m)[1:])
				require.NoError(t, err)
				assert.Equal(t, m, again)
			}
		case msgPullReq:
			if m, err := decodePullReq(body); err == nil {
				again, err := decodePullReq(encodePullReq(m)[1:])
				require.NoError(t, err)
				assert.Equal(t, m, again)
			}
		case msgLeaving:
			_, _ = decodeLeaving(body)
		case msgElectionBinary:
			if m, err := decodeElectionBinary(body); err == nil {
				enc, err := encodeElectionBinary(m)
				require.NoError(t, err)
				again, err := decodeElectionBinary(enc[1:])
				require.NoError(t, err)
				assert.Equal(t, m.Claim, again.Claim)
				assert.Equal(t, len(m.Records), len(again.Records))
			}
		}
	})
}

func TestPaging(t *testing.T) {
	var entries []leafEntry
	for i := range 1000 {
		entries = append(entries, leafEntry{Key: Key{"MachineClaim", strings.Repeat("x", i%50)}, Hash: uint64(i)})
	}
	pages := pageEntries(entries, 4096)
	require.Greater(t, len(pages), 1)
	total := 0
	for _, p := range pages {
		size := 0
		for i := range p {
			size += leafEntrySize(&p[i]) + len(p[i].Kind)
		}
		assert.LessOrEqual(t, size, 4096)
		total += len(p)
	}
	assert.Equal(t, len(entries), total)
	assert.Len(t, pageEntries(nil, 4096), 1, "an empty answer is one empty page")

	keys := make([]Key, 500)
	for i := range keys {
		keys[i] = Key{"Node", strings.Repeat("y", 40)}
	}
	kp := pageKeys(keys, 1024)
	assert.Greater(t, len(kp), 1)
	assert.Empty(t, pageKeys(nil, 1024))
}

func TestSplitLogLine(t *testing.T) {
	tests := []struct{ line, level, text string }{
		{"[DEBUG] memberlist: Stream connection from=1.2.3.4\n", "debug", "Stream connection from=1.2.3.4"},
		{"[ERR] memberlist: Failed to x", "err", "Failed to x"},
		{"no level", "", "no level"},
	}
	for _, tt := range tests {
		level, text := splitLogLine(tt.line)
		assert.Equal(t, tt.level, level, tt.line)
		assert.Equal(t, tt.text, text, tt.line)
	}
}

// BenchmarkRecordsCodec compares the binary batch encoding with JSON of the
// same records (encode and decode of a 200-record batch).
func BenchmarkRecordsCodec(b *testing.B) {
	recs := make([]store.Record, 200)
	for i := range recs {
		recs[i] = store.Record{Kind: "MachineClaim", Name: strings.Repeat("c", 20), Version: types.Version{HLC: uint64(i) << 20, Node: "node-1"},
			Data: json.RawMessage(`{"kind":"MachineClaim","metadata":{"name":"` + strings.Repeat("c", 20) + `"},"spec":{"user":"` + strings.Repeat("u", 400) + `"}}`)}
	}
	b.Run("binary", func(b *testing.B) {
		var size int
		for range b.N {
			buf := encodeRecords(msgRecords, "n1", recs)
			size = len(buf)
			if _, err := decodeRecords(msgRecords, buf[1:]); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(size), "bytes")
	})
	b.Run("json", func(b *testing.B) {
		var size int
		for range b.N {
			buf, err := json.Marshal(recordsMsg{From: "n1", Records: recs})
			if err != nil {
				b.Fatal(err)
			}
			size = len(buf)
			var m recordsMsg
			if err := json.Unmarshal(buf, &m); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(size), "bytes")
	})
}
