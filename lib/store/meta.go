package store

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// prefixMeta holds what components keep about this node next to its records:
// never replicated, never watched, not in Scan.
var prefixMeta = []byte("m/x/")

// PutMeta stores value under name, for this node only.
func (s *Store) PutMeta(name string, value []byte) error {
	if err := s.enter(); err != nil {
		return err
	}
	defer s.leave()
	err := s.db.Update(func(txn *badger.Txn) error {
		return txn.Set(append(append([]byte(nil), prefixMeta...), name...), value)
	})
	if err != nil {
		return fmt.Errorf("put meta %s: %w", name, err)
	}
	return nil
}

// Meta returns the value PutMeta stored under name; ErrNotFound when none.
func (s *Store) Meta(name string) ([]byte, error) {
	if err := s.enter(); err != nil {
		return nil, err
	}
	defer s.leave()
	var out []byte
	err := s.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(append(append([]byte(nil), prefixMeta...), name...))
		if errors.Is(err, badger.ErrKeyNotFound) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		out, err = it.ValueCopy(nil)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("meta %s: %w", name, err)
	}
	return out, nil
}
