package cache

import (
	"fmt"

	"github.com/klauspost/compress/zstd"
)

// Squeezing. An idle node holds every claim, machine and template packed
// (store.Pack: their JSON facets), ~380 bytes a claim and ~770 a machine.
// Records of one kind are mostly the same words: zstd with a dictionary made
// of a few of the kind's own records (raw content, no training: making one
// costs nothing) takes a machine to ~115 bytes and a claim to ~90, and gives
// one back in ~0.4-1.6 µs. Squeezing costs ~9 µs a record, so records are
// squeezed only when the node goes idle (Cool), not as they are written: a
// burst's records are written about five times each.
const (
	// squeezeMin is how many records a kind holds before it is squeezed:
	// a dictionary needs a sample, and a few records are not worth one.
	squeezeMin = 32
	// squeezeSample and squeezeDict bound the dictionary: up to this many
	// records and bytes of the kind.
	squeezeSample = 16
	squeezeDict   = 16 << 10
	// squeezeDictID names the dictionary in the frames (one per kind, each
	// with its decoder).
	squeezeDictID = 1
)

// squeezer squeezes and restores the records of one packed kind. Its
// dictionary is fixed once made: records squeezed with it stay readable for
// as long as the cache lives.
type squeezer struct {
	dict []byte
	dec  *zstd.Decoder
}

// newSqueezer makes a squeezer whose dictionary is made of sample, records
// of its kind.
func newSqueezer(sample [][]byte) (*squeezer, error) {
	var dict []byte
	for _, b := range sample {
		if len(dict)+len(b) > squeezeDict {
			break
		}
		dict = append(dict, b...)
	}
	if len(dict) == 0 {
		return nil, fmt.Errorf("cache: no sample for a dictionary")
	}
	// DecodeAll starts no goroutine; concurrency bounds the decoders that
	// readers (under the cache's read lock) use side by side.
	dec, err := zstd.NewReader(nil, zstd.WithDecoderDictRaw(squeezeDictID, dict),
		zstd.WithDecoderConcurrency(0), zstd.WithDecoderLowmem(true))
	if err != nil {
		return nil, err
	}
	return &squeezer{dict: dict, dec: dec}, nil
}

// encoder returns an encoder for one round of squeezing: it is dropped
// after, an idle node need not keep its tables.
func (s *squeezer) encoder() (*zstd.Encoder, error) {
	return zstd.NewWriter(nil, zstd.WithEncoderDictRaw(squeezeDictID, s.dict),
		zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1),
		zstd.WithLowerEncoderMem(true), zstd.WithEncoderCRC(false))
}

// restore returns the record b squeezed, in a new buffer.
func (s *squeezer) restore(b []byte) ([]byte, error) {
	return s.dec.DecodeAll(b, nil)
}
