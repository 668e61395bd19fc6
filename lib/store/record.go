package store

import (
	"encoding/binary"
	"errors"
	"fmt"
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
	keySeq       = []byte("m/seq")
	keyHLC       = []byte("m/hlc")
	keyGCSeq     = []byte("m/gcseq")
)

// recordFormat is the first byte of every stored record, so the encoding can change.
const recordFormat byte = 1

const flagDeleted byte = 1

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

func seqKey(seq uint64) []byte {
	k := make([]byte, 0, len(prefixSeq)+8)
	k = append(k, prefixSeq...)
	return binary.BigEndian.AppendUint64(k, seq)
}

// parseObjectKey splits o/<kind>/<name>.
func parseObjectKey(key []byte) (kind, name string, err error) {
	rest, ok := strings.CutPrefix(string(key), string(prefixObject))
	if ok {
		kind, name, ok = strings.Cut(rest, "/")
	}
	if !ok {
		return "", "", fmt.Errorf("bad object key %q", key)
	}
	return kind, name, nil
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
//	format(1) flags(1) uvarint(seq) uvarint(hlc) uvarint(len node) node
//	[varint(deletedAt unix ns) when deleted] data...
func encodeRecord(r *Record) []byte {
	b := make([]byte, 0, 2+3*binary.MaxVarintLen64+len(r.Version.Node)+len(r.Data))
	var flags byte
	if r.Deleted {
		flags |= flagDeleted
	}
	b = append(b, recordFormat, flags)
	b = binary.AppendUvarint(b, r.Seq)
	b = binary.AppendUvarint(b, r.Version.HLC)
	b = binary.AppendUvarint(b, uint64(len(r.Version.Node)))
	b = append(b, r.Version.Node...)
	if r.Deleted {
		return binary.AppendVarint(b, r.DeletedAt.UnixNano())
	}
	return append(b, r.Data...)
}

// decodeRecord is the inverse of encodeRecord. The record's Data aliases b.
func decodeRecord(kind, name string, b []byte) (Record, error) {
	r := Record{Kind: kind, Name: name}
	bad := func(what string) (Record, error) {
		return Record{}, fmt.Errorf("decode %s/%s: bad %s", kind, name, what)
	}
	if len(b) < 2 || b[0] != recordFormat {
		return bad("format")
	}
	r.Deleted = b[1]&flagDeleted != 0
	b = b[2:]
	var n int
	if r.Seq, n = binary.Uvarint(b); n <= 0 {
		return bad("seq")
	}
	b = b[n:]
	if r.Version.HLC, n = binary.Uvarint(b); n <= 0 {
		return bad("hlc")
	}
	b = b[n:]
	l, n := binary.Uvarint(b)
	if n <= 0 || uint64(len(b)-n) < l {
		return bad("node")
	}
	r.Version.Node = string(b[n : n+int(l)])
	b = b[n+int(l):]
	if r.Deleted {
		ns, n := binary.Varint(b)
		if n <= 0 {
			return bad("deletedAt")
		}
		r.DeletedAt = time.Unix(0, ns).UTC()
		return r, nil
	}
	if len(b) > 0 {
		r.Data = b
	}
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
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, PrefetchValues: true, PrefetchSize: 100})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
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
