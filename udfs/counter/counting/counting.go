// Package counting is the algorithm of the "counter" example operator: a
// running count of records per key, kept in keyed state. For every record
// it emits
//
//	{"key":"<the record's key>","count":N}
//
// with the record's key and timestamp, N being the number of records of
// that key so far, this one included.
//
// It is pure Go with no SDK import, so the same code runs inside the Wasm
// guest (udfs/counter/go) and natively (tests). udfs/counter/c/counter.c is
// the same algorithm in C, mirroring this file; change both together. The
// state encoding is shared too, so a module swapped for the other language
// keeps the counts.
//
// The configuration must be a JSON object without members ({}).
package counting

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/eddy-stream/eddy/abi/jsonscan"
)

// StateName is the name of the value state holding a key's count.
const StateName = "count"

// Parse checks the configuration. Its error messages are the ones the C
// version reports too.
func Parse(config []byte) error {
	it, ok := jsonscan.Objects(config)
	if !ok {
		return errors.New("counter: config is not a JSON object")
	}
	key, _, st := it.Next()
	switch st {
	case jsonscan.End:
		return nil
	case jsonscan.Malformed:
		return errors.New("counter: config is not valid JSON")
	}
	return fmt.Errorf("counter: config: unknown key %s", key)
}

// Decode returns the count stored as b (ok false: none yet).
func Decode(b []byte, ok bool) (uint64, error) {
	if !ok {
		return 0, nil
	}
	if len(b) != 8 {
		return 0, fmt.Errorf("counter: the stored count has %d bytes, want 8", len(b))
	}
	return binary.LittleEndian.Uint64(b), nil
}

// Append appends the stored form of n: 8 bytes, little endian.
func Append(dst []byte, n uint64) []byte { return binary.LittleEndian.AppendUint64(dst, n) }

// AppendJSON appends the output value for key at count n.
func AppendJSON(dst, key []byte, n uint64) []byte {
	dst = append(dst, `{"key":`...)
	dst = jsonscan.AppendQuote(dst, key)
	dst = append(dst, `,"count":`...)
	dst = strconv.AppendUint(dst, n, 10)
	return append(dst, '}')
}
