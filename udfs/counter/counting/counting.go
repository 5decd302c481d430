// Package counting is the algorithm of the "counter" example operator: a
// running count of records per key, kept in keyed state. For every record
// it emits
//
//	{"key":"<the record's key>","count":N}
//
// with the record's key and timestamp, N being the number of records of
// that key so far, this one included.
//
// With {"idle_ms": D} it also reports keys that went quiet, on processing
// time (Flink's CountWithTimeoutFunction): each record sets the key's
// processing-time timer to now + D (deleting the one before), and when a
// timer fires that no later record replaced, it emits
//
//	{"key":"<the key>","count":N,"idle":true}
//
// without a timestamp, and forgets the deadline (the count stays). The
// deadline is a second value state, "idle" (8 bytes little endian),
// declared only with idle_ms, so that a counter without it keeps the
// states of the versions before.
//
// It is pure Go with no SDK import, so the same code runs inside the Wasm
// guest (udfs/counter/go) and natively (tests). udfs/counter/c/counter.c is
// the same algorithm in C, mirroring this file; change both together. The
// state encoding is shared too, so a module swapped for the other language
// keeps the counts.
//
// The configuration is a JSON object: {} or {"idle_ms": D}, D a whole
// number of milliseconds from 1 to 2^53.
package counting

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/eddy-stream/eddy/abi/jsonscan"
)

// StateName is the name of the value state holding a key's count.
const StateName = "count"

// IdleStateName is the name of the value state holding a key's idle
// deadline (with idle_ms).
const IdleStateName = "idle"

// maxIdleMs is the largest idle_ms, 2^53: every whole number up to it is
// exact in a JSON number read as a float64.
const maxIdleMs = 1 << 53

// Config is the counter's configuration.
type Config struct {
	// IdleMs, when above 0, is the processing time after a key's last
	// record at which it is reported idle.
	IdleMs int64
}

// Parse checks the configuration. Its error messages are the ones the
// other languages' versions report too.
func Parse(config []byte) error {
	_, err := ParseConfig(config)
	return err
}

// ParseConfig reads the configuration.
func ParseConfig(config []byte) (Config, error) {
	var c Config
	it, ok := jsonscan.Objects(config)
	if !ok {
		return c, errors.New("counter: config is not a JSON object")
	}
	for {
		key, value, st := it.Next()
		switch st {
		case jsonscan.End:
			return c, nil
		case jsonscan.Malformed:
			return c, errors.New("counter: config is not valid JSON")
		}
		if !jsonscan.Equal(key, []byte("idle_ms")) {
			return c, fmt.Errorf("counter: config: unknown key %s", key)
		}
		if c.IdleMs != 0 {
			return c, errors.New("counter: config: repeated key idle_ms")
		}
		d, ok := jsonscan.ParseNumber(value)
		if !ok || d != math.Trunc(d) || d < 1 || d > maxIdleMs {
			return c, errors.New("counter: config: idle_ms must be a whole number of milliseconds from 1 to 2^53")
		}
		c.IdleMs = int64(d)
	}
}

// Deadline is when a key whose last record came at processing time now is
// idle (saturating at the largest time).
func (c Config) Deadline(now int64) int64 {
	if now > math.MaxInt64-c.IdleMs {
		return math.MaxInt64
	}
	return now + c.IdleMs
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

// AppendIdleJSON appends the value reporting key idle at count n.
func AppendIdleJSON(dst, key []byte, n uint64) []byte {
	dst = AppendJSON(dst, key, n)
	return append(dst[:len(dst)-1], `,"idle":true}`...)
}

// AppendJSON appends the output value for key at count n.
func AppendJSON(dst, key []byte, n uint64) []byte {
	dst = append(dst, `{"key":`...)
	dst = jsonscan.AppendQuote(dst, key)
	dst = append(dst, `,"count":`...)
	dst = strconv.AppendUint(dst, n, 10)
	return append(dst, '}')
}
