package member

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hf-fleet/hf/lib/cluster/wire"
	"github.com/hf-fleet/hf/lib/store"
	"github.com/hf-fleet/hf/lib/types"
)

// msgType is the first byte of every message this package sends through
// memberlist (always by reliable stream, never by UDP gossip).
type msgType byte

// Message types. Numbers are part of the wire format: never reuse one. 2, 4
// and 6 carried whole objects with one version each (before facets); a node
// of that release and one of this do not understand each other's records. 3
// and 9 carried the flat digest of 1,024 bucket hashes (before the hash
// tree): a node of that release and one of this replicate by push but do not
// repair each other.
const (
	// msgElection carries a wire.Message (JSON: small and rare).
	msgElection msgType = 1
	// msgRecords is a batch of records an anti-entropy round found the peer
	// lacking (and, before relays, the writer's pushes). Never relayed.
	msgRecords msgType = 8
	// msgPush is a replication batch along the dissemination tree: writes
	// pushed by their writer or relayed by a member on the way. The receiver
	// relays what was new to it to its own children in each writer's tree.
	msgPush msgType = 11
	// msgTreeReq is one step of an anti-entropy round's descent: the
	// initiator's hashes of one level of its hash tree under the nodes that
	// differ.
	msgTreeReq msgType = 12
	// msgTreeResp answers a msgTreeReq: which of those nodes differ and, at
	// the leaves, one page of the responder's entries in the differing ones.
	msgTreeResp msgType = 13
	// msgPullReq asks for records by key.
	msgPullReq msgType = 5
	// msgPullResp answers a pull request with records.
	msgPullResp msgType = 10
	// msgLeaving tells the peers the sender is leaving on purpose.
	msgLeaving msgType = 7
	// msgElectionBinary carries a wire.Message in the binary encoding, its
	// records as a push carries them; to members that say they read it
	// (capElectionBinary), the others get msgElection.
	msgElectionBinary msgType = 14
)

// String names the message type for logs.
func (t msgType) String() string {
	switch t {
	case msgElection:
		return "election"
	case msgRecords:
		return "records"
	case msgPush:
		return "push"
	case msgTreeReq:
		return "tree-request"
	case msgTreeResp:
		return "tree-response"
	case msgPullReq:
		return "pull-request"
	case msgPullResp:
		return "pull-response"
	case msgLeaving:
		return "leaving"
	case msgElectionBinary:
		return "election-binary"
	}
	return fmt.Sprintf("msgType(%d)", byte(t))
}

// maxMessageBytes caps one message this package sends. memberlist takes up to
// 20 MB per user message; staying far below keeps a slow peer from holding a
// huge buffer and lets batches interleave with election messages.
const maxMessageBytes = 256 << 10

// errShort is returned for a message that ends early.
var errShort = errors.New("message too short")

// Key names one object.
type Key struct {
	Kind, Name string
}

// recordsMsg is a batch of records (msgRecords, msgPush and msgPullResp).
type recordsMsg struct {
	From    string
	Records []store.Record
}

// treeReq is one level of an initiator's hash tree: for each of Parents
// (nodes of level Level-1, ascending; the root, 0, for level 1) the hashes
// of its treeFanout children.
type treeReq struct {
	Round uint64
	From  string
	// InFlight, when not 0, is an HLC value: records with versions at or
	// above it may still be on their way by push and are left out of the
	// transfers of this round (they still count in the hashes).
	InFlight uint64
	Level    int
	Parents  []int
	Hashes   []uint64 // treeFanout per parent
}

// treeResp is one page of the answer to a treeReq. Every page carries the
// three lists, so pages can arrive in any order (each reliable send is its
// own TCP stream); only answers at the leaves have more than one.
type treeResp struct {
	Round uint64
	From  string
	Level int
	Page  int
	Pages int
	// Differ are the nodes of Level that both sides hold records under,
	// not the same ones: the initiator descends into them, and at the
	// leaves Entries are the responder's entries in them.
	Differ []int
	// Empty are the nodes the responder holds nothing under: in a full
	// round the initiator sends it everything there.
	Empty []int
	// Sent are the nodes the initiator holds nothing under: the responder
	// sends it their records (msgRecords) right after its answer.
	Sent    []int
	Entries []leafEntry
}

// leafEntry is one of the responder's records in a differing leaf: its key,
// its entry hash (version and fingerprint, as the tree sums them) and
// whether its version is older than the request's InFlight.
type leafEntry struct {
	Key
	Hash    uint64
	Settled bool
}

// pullReq asks the receiver for the records of Keys.
type pullReq struct {
	Round uint64
	From  string
	Keys  []Key
}

// leavingMsg announces a graceful leave.
type leavingMsg struct {
	From string
}

// encoder appends the compact binary form: uvarints, length-prefixed strings.
type encoder struct{ b []byte }

func newEncoder(t msgType, size int) *encoder {
	e := &encoder{b: make([]byte, 0, size+1)}
	e.b = append(e.b, byte(t))
	return e
}

func (e *encoder) uint(v uint64)  { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) int(v int64)    { e.b = binary.AppendVarint(e.b, v) }
func (e *encoder) str(s string)   { e.uint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) bytes(b []byte) { e.uint(uint64(len(b))); e.b = append(e.b, b...) }
func (e *encoder) fixed64(v uint64) {
	e.b = binary.BigEndian.AppendUint64(e.b, v)
}
func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
		return
	}
	e.b = append(e.b, 0)
}

func (e *encoder) version(v types.Version) { e.uint(v.HLC); e.str(v.Node) }
func (e *encoder) key(k Key)               { e.str(k.Kind); e.str(k.Name) }

// decoder reads what encoder wrote; the first error sticks and later reads
// return zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

// count reads a length and checks at least min bytes per item remain, so a
// corrupt count cannot make the reader allocate without bound.
func (d *decoder) count(min int) int {
	n := d.uint()
	if d.err == nil && n > uint64(len(d.b)/max(min, 1)) {
		d.fail(fmt.Errorf("count %d exceeds message", n))
		return 0
	}
	return int(n)
}

func (d *decoder) raw() []byte {
	n := d.count(1)
	if d.err != nil {
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}

func (d *decoder) str() string { return string(d.raw()) }

func (d *decoder) fixed64() uint64 {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 8 {
		d.fail(errShort)
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *decoder) bool() bool {
	if d.err != nil {
		return false
	}
	if len(d.b) < 1 {
		d.fail(errShort)
		return false
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v != 0
}

func (d *decoder) version() types.Version {
	hlc := d.uint()
	return types.Version{HLC: hlc, Node: d.str()}
}

func (d *decoder) key() Key {
	kind := d.str()
	return Key{Kind: kind, Name: d.str()}
}

// smallInt reads a non-negative count that must fit an int.
func (d *decoder) smallInt() int {
	v := d.uint()
	if v > math.MaxInt32 {
		d.fail(fmt.Errorf("value %d out of range", v))
		return 0
	}
	return int(v)
}

// done reports the sticky error, or trailing garbage.
func (d *decoder) done(t msgType) error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("decode %s: %w", t, d.err)
	}
	return nil
}

// splitType returns a message's type and body.
func splitType(buf []byte) (msgType, []byte, error) {
	if len(buf) == 0 {
		return 0, nil, errors.New("empty message")
	}
	return msgType(buf[0]), buf[1:], nil
}

// recordSize estimates a record's encoded size, for batching.
func recordSize(r *store.Record) int {
	n := len(r.Kind) + len(r.Name) + len(r.Tomb.Node) + 5*binary.MaxVarintLen64
	for i := range r.Facets {
		f := &r.Facets[i]
		n += len(f.Name) + len(f.Version.Node) + len(f.Data) + 4*binary.MaxVarintLen64
	}
	return n
}

// leafEntrySize bounds a leaf entry's encoded size (its kind aside, which
// a page carries once), for paging.
func leafEntrySize(e *leafEntry) int {
	return len(e.Name) + 2*binary.MaxVarintLen64 + 8
}

// encodeRecords writes a batch of records, facet by facet (the receiver
// assembles the objects):
//
//	type from uvarint(n) n x [kind name bool(deleted before) [uvarint(hlc) node varint(deletedAt)]
//	                          uvarint(m) m x [facet uvarint(epoch) uvarint(hlc) node bytes(data)]]
func encodeRecords(t msgType, from string, recs []store.Record) []byte {
	size := len(from) + binary.MaxVarintLen64
	for i := range recs {
		size += recordSize(&recs[i])
	}
	e := newEncoder(t, size)
	e.str(from)
	e.records(recs)
	return e.b
}

// records writes a list of records as encodeRecords does.
func (e *encoder) records(recs []store.Record) {
	e.uint(uint64(len(recs)))
	for i := range recs {
		r := &recs[i]
		e.str(r.Kind)
		e.str(r.Name)
		e.bool(!r.Tomb.IsZero())
		if !r.Tomb.IsZero() {
			e.version(r.Tomb)
			e.int(r.DeletedAt.UnixNano())
		}
		e.uint(uint64(len(r.Facets)))
		for _, f := range r.Facets {
			e.str(f.Name)
			e.uint(f.Epoch)
			e.version(f.Version)
			e.bytes(f.Data)
		}
	}
}

// decodeRecords reads a batch; the records' facet data alias body, which the
// caller owns. Seq is left zero: it is the receiving store's to assign; the
// version is the newest of the facets' and the deletion's.
func decodeRecords(t msgType, body []byte) (recordsMsg, error) {
	d := &decoder{b: body}
	m := recordsMsg{From: d.str(), Records: d.records()}
	if m.Records == nil && d.err == nil {
		m.Records = []store.Record{} // a batch, if an empty one
	}
	return m, d.done(t)
}

// records reads what encoder.records wrote; facet data alias the input.
func (d *decoder) records() []store.Record {
	n := d.count(4)
	var out []store.Record
	if d.err == nil && n > 0 {
		out = make([]store.Record, 0, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		r := store.Record{Kind: d.str(), Name: d.str()}
		if d.bool() {
			r.Tomb = d.version()
			r.DeletedAt = time.Unix(0, d.int()).UTC()
		}
		r.Version = r.Tomb
		nf := d.count(4)
		for j := 0; j < nf && d.err == nil; j++ {
			f := store.FacetRecord{Name: d.str()}
			f.Epoch = d.uint()
			f.Version = d.version()
			f.Data = d.raw()
			if f.Version.Compare(r.Version) > 0 {
				r.Version = f.Version
			}
			r.Facets = append(r.Facets, f)
		}
		if d.err == nil && r.Version.IsZero() {
			d.fail(fmt.Errorf("record %s/%s has neither facets nor a deletion", r.Kind, r.Name))
		}
		out = append(out, r)
	}
	return out
}

func encodeTreeReq(m treeReq) []byte {
	e := newEncoder(msgTreeReq, (5+len(m.Parents))*binary.MaxVarintLen64+len(m.From)+8*len(m.Hashes))
	e.uint(m.Round)
	e.str(m.From)
	e.uint(m.InFlight)
	e.uint(uint64(m.Level))
	e.uint(uint64(len(m.Parents)))
	for _, p := range m.Parents {
		e.uint(uint64(p))
	}
	for _, h := range m.Hashes {
		e.fixed64(h)
	}
	return e.b
}

// decodeTreeReq reads a treeReq and checks it against the tree's shape: a
// level below the root, parents ascending on the level above, and
// treeFanout hashes for each.
func decodeTreeReq(body []byte) (treeReq, error) {
	d := &decoder{b: body}
	m := treeReq{Round: d.uint(), From: d.str(), InFlight: d.uint(), Level: d.smallInt()}
	if d.err == nil && (m.Level < 1 || m.Level > treeDepth) {
		d.fail(fmt.Errorf("level %d out of range", m.Level))
	}
	np := d.count(1 + 8*treeFanout)
	m.Parents = d.indexes(np, levelWidth(min(max(m.Level-1, 0), treeDepth)))
	if d.err == nil {
		m.Hashes = make([]uint64, np*treeFanout)
	}
	for i := 0; i < len(m.Hashes) && d.err == nil; i++ {
		m.Hashes[i] = d.fixed64()
	}
	return m, d.done(msgTreeReq)
}

// indexes reads n ascending node indexes below width.
func (d *decoder) indexes(n, width int) []int {
	var out []int
	for i := 0; i < n && d.err == nil; i++ {
		v := d.smallInt()
		switch {
		case v >= width:
			d.fail(fmt.Errorf("node %d out of range", v))
		case i > 0 && v <= out[i-1]:
			d.fail(fmt.Errorf("nodes not ascending at %d", v))
		}
		out = append(out, v)
	}
	return out
}

func (e *encoder) indexes(xs []int) {
	e.uint(uint64(len(xs)))
	for _, x := range xs {
		e.uint(uint64(x))
	}
}

// encodeTreeResp writes the entries' kinds once, in a table, and each
// entry's kind as an index into it (shifted left by one, the low bit set
// when the entry is settled):
//
//	type round from level page pages differ empty sent
//	     uvarint(k) k x kind uvarint(n) n x [uvarint(kind<<1|settled) name fixed64(hash)]
func encodeTreeResp(m treeResp) []byte {
	size := 8*binary.MaxVarintLen64 + len(m.From) + 3*(len(m.Differ)+len(m.Empty)+len(m.Sent))
	var kinds []string
	index := map[string]int{}
	for i := range m.Entries {
		size += leafEntrySize(&m.Entries[i])
		if _, ok := index[m.Entries[i].Kind]; !ok {
			index[m.Entries[i].Kind] = len(kinds)
			kinds = append(kinds, m.Entries[i].Kind)
			size += len(m.Entries[i].Kind) + binary.MaxVarintLen64
		}
	}
	e := newEncoder(msgTreeResp, size)
	e.uint(m.Round)
	e.str(m.From)
	e.uint(uint64(m.Level))
	e.uint(uint64(m.Page))
	e.uint(uint64(m.Pages))
	e.indexes(m.Differ)
	e.indexes(m.Empty)
	e.indexes(m.Sent)
	e.uint(uint64(len(kinds)))
	for _, k := range kinds {
		e.str(k)
	}
	e.uint(uint64(len(m.Entries)))
	for i := range m.Entries {
		x := &m.Entries[i]
		tag := uint64(index[x.Kind]) << 1
		if x.Settled {
			tag |= 1
		}
		e.uint(tag)
		e.str(x.Name)
		e.fixed64(x.Hash)
	}
	return e.b
}

func decodeTreeResp(body []byte) (treeResp, error) {
	d := &decoder{b: body}
	m := treeResp{Round: d.uint(), From: d.str(), Level: d.smallInt(), Page: d.smallInt(), Pages: d.smallInt()}
	if d.err == nil && (m.Level < 1 || m.Level > treeDepth) {
		d.fail(fmt.Errorf("level %d out of range", m.Level))
	}
	if d.err == nil && (m.Pages < 1 || m.Page >= m.Pages) {
		d.fail(fmt.Errorf("page %d of %d", m.Page, m.Pages))
	}
	width := levelWidth(min(max(m.Level, 0), treeDepth))
	m.Differ = d.indexes(d.count(1), width)
	m.Empty = d.indexes(d.count(1), width)
	m.Sent = d.indexes(d.count(1), width)
	nk := d.count(1)
	kinds := make([]string, 0, nk)
	for i := 0; i < nk && d.err == nil; i++ {
		kinds = append(kinds, d.str())
	}
	ne := d.count(10)
	if d.err == nil && ne > 0 {
		m.Entries = make([]leafEntry, 0, ne)
	}
	for i := 0; i < ne && d.err == nil; i++ {
		tag := d.uint()
		name := d.str()
		h := d.fixed64()
		if d.err != nil {
			break
		}
		if tag>>1 >= uint64(len(kinds)) {
			d.fail(fmt.Errorf("kind %d out of range", tag>>1))
			break
		}
		m.Entries = append(m.Entries, leafEntry{Key: Key{Kind: kinds[tag>>1], Name: name}, Hash: h, Settled: tag&1 == 1})
	}
	return m, d.done(msgTreeResp)
}

func encodePullReq(m pullReq) []byte {
	size := 3*binary.MaxVarintLen64 + len(m.From)
	for _, k := range m.Keys {
		size += len(k.Kind) + len(k.Name) + 2*binary.MaxVarintLen64
	}
	e := newEncoder(msgPullReq, size)
	e.uint(m.Round)
	e.str(m.From)
	e.uint(uint64(len(m.Keys)))
	for _, k := range m.Keys {
		e.key(k)
	}
	return e.b
}

func decodePullReq(body []byte) (pullReq, error) {
	d := &decoder{b: body}
	m := pullReq{Round: d.uint(), From: d.str()}
	n := d.count(2)
	if d.err == nil {
		m.Keys = make([]Key, 0, n)
	}
	for i := 0; i < n && d.err == nil; i++ {
		m.Keys = append(m.Keys, d.key())
	}
	return m, d.done(msgPullReq)
}

func encodeLeaving(m leavingMsg) []byte {
	e := newEncoder(msgLeaving, len(m.From)+binary.MaxVarintLen64)
	e.str(m.From)
	return e.b
}

func decodeLeaving(body []byte) (leavingMsg, error) {
	d := &decoder{b: body}
	m := leavingMsg{From: d.str()}
	return m, d.done(msgLeaving)
}

func encodeElection(m wire.Message) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode election message: %w", err)
	}
	return append([]byte{byte(msgElection)}, b...), nil
}

func decodeElection(body []byte) (wire.Message, error) {
	var m wire.Message
	if err := json.Unmarshal(body, &m); err != nil {
		return m, fmt.Errorf("decode %s: %w", msgElection, err)
	}
	return m, nil
}

// encodeElectionBinary writes m in the binary encoding:
//
//	type uvarint(msg type) from to claim node driver uvarint(round) machine set reason
//	bytes(fresh capacity as JSON, empty when none) records (as a push's)
//
// The JSON form of election messages took a tenth of their senders' and
// receivers' CPU in a burst of claims: offers carry the claim and its
// template.
func encodeElectionBinary(m wire.Message) ([]byte, error) {
	size := len(m.From) + len(m.To) + len(m.Claim) + len(m.Node) + len(m.Driver) + len(m.Machine) + len(m.Set) + len(m.Reason) + 12*binary.MaxVarintLen64
	for i := range m.Records {
		size += recordSize(&m.Records[i])
	}
	var fresh []byte
	if m.Fresh != nil {
		var err error
		if fresh, err = json.Marshal(m.Fresh); err != nil {
			return nil, fmt.Errorf("encode election message: %w", err)
		}
	}
	e := newEncoder(msgElectionBinary, size+len(fresh))
	e.uint(uint64(m.Type))
	for _, s := range []string{m.From, m.To, m.Claim, m.Node, m.Driver} {
		e.str(s)
	}
	e.uint(m.Round)
	for _, s := range []string{m.Machine, m.Set, m.Reason} {
		e.str(s)
	}
	e.bytes(fresh)
	e.records(m.Records)
	return e.b, nil
}

// decodeElectionBinary reads what encodeElectionBinary wrote; the records'
// facet data alias body, which the caller must own.
func decodeElectionBinary(body []byte) (wire.Message, error) {
	d := &decoder{b: body}
	var m wire.Message
	t := d.uint()
	if d.err == nil && (t == 0 || t > 255) {
		d.fail(fmt.Errorf("message type %d out of range", t))
	}
	m.Type = wire.MessageType(t)
	m.From, m.To, m.Claim, m.Node, m.Driver = d.str(), d.str(), d.str(), d.str(), d.str()
	m.Round = d.uint()
	m.Machine, m.Set, m.Reason = d.str(), d.str(), d.str()
	if fresh := d.raw(); d.err == nil && len(fresh) > 0 {
		m.Fresh = &types.Capacity{}
		if err := json.Unmarshal(fresh, m.Fresh); err != nil {
			d.fail(fmt.Errorf("fresh capacity: %w", err))
		}
	}
	m.Records = d.records()
	return m, d.done(msgElectionBinary)
}

// pageEntries splits entries into pages whose encoded size stays under limit
// bytes (at least one entry per page, and at least one page).
func pageEntries(entries []leafEntry, limit int) [][]leafEntry {
	var pages [][]leafEntry
	start, size := 0, 0
	for i := range entries {
		s := leafEntrySize(&entries[i]) + len(entries[i].Kind)
		if i > start && size+s > limit {
			pages = append(pages, entries[start:i])
			start, size = i, 0
		}
		size += s
	}
	return append(pages, entries[start:])
}

// pageKeys splits keys the same way for pull requests.
func pageKeys(keys []Key, limit int) [][]Key {
	var pages [][]Key
	start, size := 0, 0
	for i, k := range keys {
		s := len(k.Kind) + len(k.Name) + 2*binary.MaxVarintLen64
		if i > start && size+s > limit {
			pages = append(pages, keys[start:i])
			start, size = i, 0
		}
		size += s
	}
	if start < len(keys) {
		pages = append(pages, keys[start:])
	}
	return pages
}
