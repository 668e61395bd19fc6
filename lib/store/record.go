package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/hf-fleet/hf/lib/types"
)

// Key layout. Kinds never contain '/', so "o/<kind>/" is a prefix of exactly
// one kind's records and the first '/' after it starts the name.
var (
	prefixObject = []byte("o/")
	prefixSeq    = []byte("q/")
	prefixTomb   = []byte("t/")
	keySeq       = []byte("m/seq")
	keyHLC       = []byte("m/hlc")
	keyGCSeq     = []byte("m/gcseq")
)

// Record formats: the first byte of every stored record, so the encoding can
// change. Format 1 (whole objects) is still read.
const (
	recordFormatV1 byte = 1
	recordFormat   byte = 2
)

// Record flags.
const (
	flagDeleted byte = 1 << iota // no live creating facet
	flagTomb                     // the record was deleted at least once
)

func objectKey(kind, name string) []byte {
	k := make([]byte, 0, len(prefixObject)+len(kind)+1+len(name))
	k = append(k, prefixObject...)
	k = append(k, kind...)
	k = append(k, '/')
	return append(k, name...)
}

func kindPrefix(kind string) []byte {
	return objectKey(kind, "")
}

func seqKey(seq uint64) []byte { return keyOfSeq(prefixSeq, seq) }

// keyOfSeq is prefix then seq, big-endian, so keys sort in Seq order.
func keyOfSeq(prefix []byte, seq uint64) []byte {
	k := make([]byte, 0, len(prefix)+8)
	k = append(k, prefix...)
	return binary.BigEndian.AppendUint64(k, seq)
}

// tombKey marks the Seq index entry seq as a tombstone's, so a replay that
// wants no tombstones skips it without reading its record. The Seq index
// itself keeps its format (the value is the object key), which every release
// reads; entries written before these marks (or by an earlier release) have
// none and are read to learn what they are.
func tombKey(seq uint64) []byte { return keyOfSeq(prefixTomb, seq) }

// parseObjectKey splits o/<kind>/<name>.
func parseObjectKey(key []byte) (kind, name string, err error) {
	rest, ok := bytes.CutPrefix(key, prefixObject)
	var k, n []byte
	if ok {
		k, n, ok = bytes.Cut(rest, []byte("/"))
	}
	if !ok {
		return "", "", fmt.Errorf("bad object key %q", key)
	}
	return intern(k), string(n), nil
}

func putUint(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

// getUint reads a counter key; a missing key is 0.
func getUint(txn *badger.Txn, key []byte) (uint64, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", key, err)
	}
	var v uint64
	err = item.Value(func(b []byte) error {
		if len(b) != 8 {
			return fmt.Errorf("read %s: want 8 bytes, got %d", key, len(b))
		}
		v = binary.BigEndian.Uint64(b)
		return nil
	})
	return v, err
}

// encodeRecord is the stored form of a record, without its kind and name (they
// are in the key):
//
//	format(1)=2 flags(1) uvarint(seq)
//	[uvarint(tomb hlc) str(tomb node) varint(deletedAt unix ns)  when flagTomb]
//	uvarint(n) n x [str(facet) uvarint(epoch) uvarint(hlc) str(node) uvarint(len) data]
//
// where str is uvarint(len) and the bytes. The version is the newest facet's
// (or the deletion's) and the object JSON is assembled from the facets when
// read (withData); neither is stored.
func encodeRecord(r *Record) []byte {
	size := 3 + 3*binary.MaxVarintLen64 + len(r.Tomb.Node)
	for _, f := range r.Facets {
		size += len(f.Name) + len(f.Version.Node) + len(f.Data) + 4*binary.MaxVarintLen64
	}
	b := make([]byte, 0, size)
	var flags byte
	if r.Deleted {
		flags |= flagDeleted
	}
	if !r.Tomb.IsZero() {
		flags |= flagTomb
	}
	b = append(b, recordFormat, flags)
	b = binary.AppendUvarint(b, r.Seq)
	str := func(s string) {
		b = binary.AppendUvarint(b, uint64(len(s)))
		b = append(b, s...)
	}
	if !r.Tomb.IsZero() {
		b = binary.AppendUvarint(b, r.Tomb.HLC)
		str(r.Tomb.Node)
		b = binary.AppendVarint(b, r.DeletedAt.UnixNano())
	}
	b = binary.AppendUvarint(b, uint64(len(r.Facets)))
	for _, f := range r.Facets {
		str(f.Name)
		b = binary.AppendUvarint(b, f.Epoch)
		b = binary.AppendUvarint(b, f.Version.HLC)
		str(f.Version.Node)
		b = binary.AppendUvarint(b, uint64(len(f.Data)))
		b = append(b, f.Data...)
	}
	return b
}

// decodeRecord is the inverse of encodeRecord. The record's facets alias b;
// its Data is not set (withData assembles it).
func decodeRecord(kind, name string, b []byte) (Record, error) {
	if len(b) > 0 && b[0] == recordFormatV1 {
		return decodeRecordV1(kind, name, b)
	}
	r := Record{Kind: kind, Name: name}
	d := recordDecoder{b: b}
	if len(b) < 2 || b[0] != recordFormat {
		return Record{}, fmt.Errorf("decode %s/%s: bad format", kind, name)
	}
	flags := b[1]
	d.b = b[2:]
	r.Deleted = flags&flagDeleted != 0
	r.Seq = d.uint("seq")
	if flags&flagTomb != 0 {
		r.Tomb.HLC = d.uint("tomb")
		r.Tomb.Node = intern(d.bytes("tomb node"))
		r.DeletedAt = time.Unix(0, d.int("deletedAt")).UTC()
		if d.err == nil && r.Tomb.IsZero() {
			d.fail("tomb") // written only for a deletion's version
		}
	}
	n := d.uint("facets")
	if d.err == nil && n > uint64(len(d.b)) {
		d.fail("facet count")
	}
	r.Version = r.Tomb
	for i := uint64(0); i < n && d.err == nil; i++ {
		f := FacetRecord{Name: intern(d.bytes("facet name"))}
		f.Epoch = d.uint("facet epoch")
		f.Version.HLC = d.uint("facet hlc")
		f.Version.Node = intern(d.bytes("facet node"))
		f.Data = d.bytes("facet data")
		r.Facets = append(r.Facets, f)
		if f.Version.Compare(r.Version) > 0 {
			r.Version = f.Version
		}
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return Record{}, fmt.Errorf("decode %s/%s: bad %s", kind, name, d.err)
	}
	return r, nil
}

// withData assembles the object JSON of a live record (Data), once.
func (r *Record) withData() error {
	if r.Deleted || r.Data != nil {
		return nil
	}
	data, err := assemble(r)
	if err != nil {
		return fmt.Errorf("assemble %s/%s: %w", r.Kind, r.Name, err)
	}
	r.Data = data
	return nil
}

// JSON returns the object JSON of a live record (nil for a tombstone),
// assembling it from the facets the first time: records that writes return
// and watchers receive carry only the facets, since most readers decode
// those (store.Decode) and never need the JSON.
func (r *Record) JSON() (json.RawMessage, error) {
	if err := r.withData(); err != nil {
		return nil, err
	}
	return r.Data, nil
}

// recordDecoder reads encodeRecord's fields; the first error sticks.
type recordDecoder struct {
	b   []byte
	err error
}

func (d *recordDecoder) fail(what string) {
	if d.err == nil {
		d.err = errors.New(what)
	}
}

func (d *recordDecoder) uint(what string) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *recordDecoder) int(what string) int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(what)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *recordDecoder) bytes(what string) []byte {
	l := d.uint(what)
	if d.err == nil && l > uint64(len(d.b)) {
		d.fail(what)
	}
	if d.err != nil {
		return nil
	}
	out := d.b[:l:l]
	d.b = d.b[l:]
	return out
}

// decodeRecordV1 reads a record of format 1 (a whole object with one
// version) as one whose facets all carry that version.
func decodeRecordV1(kind, name string, b []byte) (Record, error) {
	r := Record{Kind: kind, Name: name}
	bad := func(what string) (Record, error) {
		return Record{}, fmt.Errorf("decode %s/%s: bad %s", kind, name, what)
	}
	if len(b) < 2 {
		return bad("format")
	}
	deleted := b[1]&flagDeleted != 0
	d := recordDecoder{b: b[2:]}
	r.Seq = d.uint("seq")
	var v types.Version
	v.HLC = d.uint("hlc")
	v.Node = intern(d.bytes("node"))
	if d.err == nil && v.IsZero() {
		return bad("version") // every record of format 1 was written with one
	}
	if deleted {
		ns := d.int("deletedAt")
		if d.err != nil {
			return bad(d.err.Error())
		}
		r.Tomb, r.Version, r.Deleted, r.DeletedAt = v, v, true, time.Unix(0, ns).UTC()
		return r, nil
	}
	if d.err != nil {
		return bad(d.err.Error())
	}
	obj, err := types.New(kind)
	if err != nil {
		return Record{}, fmt.Errorf("decode %s/%s: %w", kind, name, err)
	}
	if err := json.Unmarshal(d.b, obj); err != nil {
		return bad("object: " + err.Error())
	}
	if u, ok := obj.(interface{ Upgrade() }); ok {
		u.Upgrade()
	}
	fs, err := splitFacets(obj)
	if err != nil {
		return Record{}, fmt.Errorf("decode %s/%s: %w", kind, name, err)
	}
	for i := range fs {
		fs[i].Version = v
	}
	r.Facets, r.Version = fs, v
	return r, nil
}

// getRecord reads kind/name inside txn; ok is false when there is no record
// (live or tombstone).
func getRecord(txn *badger.Txn, kind, name string) (Record, bool, error) {
	item, err := txn.Get(objectKey(kind, name))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return Record{}, false, nil
	}
	if err != nil {
		return Record{}, false, err
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return Record{}, false, err
	}
	r, err := decodeRecord(kind, name, v)
	return r, err == nil, err
}

// scanPrefix calls fn for every record whose key starts with prefix, in key order.
func scanPrefix(txn *badger.Txn, prefix []byte, fn func(Record) error) error {
	return scanAfter(txn, prefix, "", fn)
}

// scanAfter is scanPrefix from the first key after prefix+after on ("":
// from the first): a page of a list seeks to where the last one ended
// instead of reading the kind from its start.
func scanAfter(txn *badger.Txn, prefix []byte, after string, fn func(Record) error) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 100})
	defer it.Close()
	start := prefix
	if after != "" {
		// No key holds a 0 byte after its name's: this is the first key
		// past prefix+after.
		start = append(append(slices.Clip(prefix), after...), 0)
	}
	for it.Seek(start); it.Valid(); it.Next() {
		item := it.Item()
		kind, name, err := parseObjectKey(item.Key())
		if err != nil {
			return err
		}
		v, err := item.ValueCopy(nil)
		if err != nil {
			return err
		}
		r, err := decodeRecord(kind, name, v)
		if err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}

// scanRecords calls fn for every record of every kind.
func scanRecords(txn *badger.Txn, fn func(Record) error) error {
	return scanPrefix(txn, prefixObject, fn)
}

// checkKey refuses a kind or name that cannot be stored.
func checkKey(kind, name string) error {
	switch {
	case kind == "":
		return types.Invalid("kind", "is required")
	case strings.Contains(kind, "/"):
		return types.Invalid("kind", "must not contain '/'")
	case name == "":
		return types.Invalid("metadata.name", "is required")
	}
	return nil
}

// Pack returns rec in the store's binary form (facets with their versions,
// the deletion; not Data), in a buffer of its exact size: for holding many
// records in little memory. Unpack reverses it.
func Pack(rec Record) []byte {
	b := encodeRecord(&rec)
	return append(make([]byte, 0, len(b)), b...)
}

// Unpack decodes what Pack returned for kind/name. The record's facets
// alias b: b must not change while the record is in use.
func Unpack(kind, name string, b []byte) (Record, error) { return decodeRecord(kind, name, b) }
