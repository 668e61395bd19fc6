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

func TestDigestMessagesRoundTrip(t *testing.T) {
	hashes := make([]uint64, NumBuckets)
	for i := range hashes {
		hashes[i] = uint64(i) * 0x9e3779b97f4a7c15
	}
	req := digestReq{Round: 7, From: "n1", InFlight: 123 << 16, Hashes: hashes}
	buf := encodeDigestReq(req)
	assert.Less(t, len(buf), 8*NumBuckets+64)
	gotReq, err := decodeDigestReq(buf[1:])
	require.NoError(t, err)
	assert.Equal(t, req, gotReq)

	resp := digestResp{Round: 7, From: "n2", Page: 1, Pages: 3, Buckets: []int{0, 5, 1023},
		Entries: []Entry{{Key: Key{"Node", "n1"}, Version: types.Version{HLC: 5, Node: "n1"}, Sum: 1 << 63}}}
	gotResp, err := decodeDigestResp(encodeDigestResp(resp)[1:])
	require.NoError(t, err)
	assert.Equal(t, resp, gotResp)

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
	buf, err := encodeElection(msg)
	require.NoError(t, err)
	assert.Equal(t, byte(msgElection), buf[0])
	got, err := decodeElection(buf[1:])
	require.NoError(t, err)
	assert.Equal(t, msg, got)
}

func TestDecodeRejectsBadInput(t *testing.T) {
	good := encodeDigestResp(digestResp{Round: 1, From: "n", Pages: 1, Buckets: []int{3}})
	tests := []struct {
		name   string
		decode func([]byte) error
		body   []byte
		want   string
	}{
		{"records short", func(b []byte) error { _, err := decodeRecords(msgRecords, b); return err }, []byte{}, "too short"},
		{"records huge count", func(b []byte) error { _, err := decodeRecords(msgRecords, b); return err }, []byte{1, 'n', 0xff, 0xff, 0xff, 0x0f}, "exceeds"},
		{"digest wrong bucket count", func(b []byte) error { _, err := decodeDigestReq(b); return err }, encodeDigestReq(digestReq{From: "n", Hashes: []uint64{1}})[1:], "buckets"},
		{"response page out of range", func(b []byte) error { _, err := decodeDigestResp(b); return err }, encodeDigestResp(digestResp{From: "n", Page: 2, Pages: 2})[1:], "page"},
		{"response bucket out of range", func(b []byte) error { _, err := decodeDigestResp(b); return err }, encodeDigestResp(digestResp{From: "n", Pages: 1, Buckets: []int{NumBuckets}})[1:], "out of range"},
		{"trailing bytes", func(b []byte) error { _, err := decodeDigestResp(b); return err }, append(good[1:], 0), "trailing"},
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

func FuzzDecode(f *testing.F) {
	f.Add(encodeRecords(msgRecords, "n1", []store.Record{{Kind: "K", Name: "a", Version: types.Version{HLC: 1, Node: "n1"}, Data: []byte("{}")}}))
	f.Add(encodeDigestReq(digestReq{From: "n", Hashes: make([]uint64, NumBuckets)}))
	f.Add(encodeDigestResp(digestResp{From: "n", Pages: 1, Buckets: []int{1}, Entries: []Entry{{Key: Key{"K", "a"}}}}))
	f.Add(encodePullReq(pullReq{From: "n", Keys: []Key{{"K", "a"}}}))
	f.Add(encodeLeaving(leavingMsg{From: "n"}))
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
		case msgDigestReq:
			if m, err := decodeDigestReq(body); err == nil {
				assert.Equal(t, buf, encodeDigestReq(m))
			}
		case msgDigestResp:
			if m, err := decodeDigestResp(body); err == nil {
				again, err := decodeDigestResp(encodeDigestResp(m)[1:])
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
		}
	})
}

func TestPaging(t *testing.T) {
	var entries []Entry
	for i := range 1000 {
		entries = append(entries, Entry{Key: Key{"MachineClaim", strings.Repeat("x", i%50)}, Version: types.Version{HLC: uint64(i), Node: "n1"}})
	}
	pages := pageEntries(entries, 4096)
	require.Greater(t, len(pages), 1)
	total := 0
	for _, p := range pages {
		size := 0
		for i := range p {
			size += entrySize(&p[i])
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
