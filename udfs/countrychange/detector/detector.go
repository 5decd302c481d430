// Package detector is the algorithm of the "country-change" example
// operator, a card-fraud rule: alert when a card is used in two different
// countries within a short time (in event time).
//
// It is pure Go with no SDK import: it decides, and the caller keeps the
// state and sets the timers, so the same code runs inside the Wasm guest
// (udfs/countrychange/go, with keyed state) and natively (tests, against
// the guests). udfs/countrychange/c/countrychange.c is the same algorithm
// in C, written to mirror this file; change both together. The state
// encoding (see AppendLast) is shared too, so a module swapped for the
// other language keeps the job's state.
//
// Configuration (JSON; every key optional):
//
//	{"window_ms": 300000}
//
// Input values are transactions keyed by card:
//
//	{"card": "card-0042", "amount": 12.5, "country": "DE", "merchant": "m-017", "ts": 1767225600000}
//
// Only "card" and "country" are read, and must be strings; the time is the
// record's timestamp. Records without a timestamp, and values that are not
// a JSON object with those two strings, are ignored.
//
// Per card the operator keeps the country and time of its latest
// transaction (by event time). A transaction in another country than the
// latest one, at most window_ms before or after it, raises an alert:
//
//	{"card":"card-0042","from":"DE","to":"FR","gap_ms":120000,"ts":1767225720000}
//
// "from" is the earlier of the two countries, "to" the later, gap_ms the
// distance in time and ts the time of the transaction that raised it. A
// transaction at or after the latest one replaces it and moves the card's
// cleanup timer to its time + window_ms; an older one (out of order) only
// compares. When the cleanup timer fires and the stored transaction is
// still the one that set it, the card's state is cleared: a card quiet for
// a window holds no state.
package detector

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/eddy-stream/eddy/abi/jsonscan"
)

// StateName is the name of the value state the operator keeps per card.
const StateName = "last"

// DefaultWindowMs is the window without configuration: five minutes.
const DefaultWindowMs = 300_000

// maxWindowMs keeps window_ms exact as a float64 and ts + window_ms far
// from overflowing.
const maxWindowMs = 1 << 53

// Config is a parsed configuration.
type Config struct {
	WindowMs int64
}

// Parse reads a configuration. Its error messages are the ones the C
// version reports too.
func Parse(config []byte) (Config, error) {
	c := Config{WindowMs: DefaultWindowMs}
	it, ok := jsonscan.Objects(config)
	if !ok {
		return c, errors.New("country-change: config is not a JSON object")
	}
	seenWindow := false
	for {
		key, value, st := it.Next()
		if st == jsonscan.Malformed {
			return c, errors.New("country-change: config is not valid JSON")
		}
		if st == jsonscan.End {
			return c, nil
		}
		if !jsonscan.Equal(key, []byte("window_ms")) || seenWindow {
			return c, fmt.Errorf("country-change: config: unknown or repeated key %s", key)
		}
		seenWindow = true
		d, ok := jsonscan.ParseNumber(value)
		if !ok || d != math.Trunc(d) || d < 1 || d > maxWindowMs {
			return c, errors.New("country-change: config: window_ms must be a whole number of milliseconds from 1 to 2^53")
		}
		c.WindowMs = int64(d)
	}
}

// Txn is what the detector reads of a transaction.
type Txn struct {
	Card    []byte // unescaped
	Country []byte // unescaped
}

// ParseTxn reads the card and country of value, unescaping them into
// scratch (which it returns, grown, for reuse). ok is false for a value
// the operator ignores.
func ParseTxn(value, scratch []byte) (t Txn, grown []byte, ok bool) {
	card, st := jsonscan.Lookup(value, []byte("card"))
	if st != jsonscan.Field || jsonscan.KindOf(card) != jsonscan.String {
		return t, scratch, false
	}
	country, st := jsonscan.Lookup(value, []byte("country"))
	if st != jsonscan.Field || jsonscan.KindOf(country) != jsonscan.String {
		return t, scratch, false
	}
	scratch = jsonscan.AppendUnquote(scratch[:0], card)
	n := len(scratch)
	scratch = jsonscan.AppendUnquote(scratch, country)
	return Txn{Card: scratch[:n:n], Country: scratch[n:]}, scratch, true
}

// Last is the state kept per card: its latest transaction.
type Last struct {
	Ts      int64
	Country []byte
}

// AppendLast appends the encoding of the state: the time as 8 bytes little
// endian, then the country's bytes.
func AppendLast(dst []byte, l Last) []byte {
	dst = binary.LittleEndian.AppendUint64(dst, uint64(l.Ts))
	return append(dst, l.Country...)
}

// DecodeLast reads what AppendLast wrote; Country aliases b.
func DecodeLast(b []byte) (Last, bool) {
	if len(b) < 8 {
		return Last{}, false
	}
	return Last{Ts: int64(binary.LittleEndian.Uint64(b)), Country: b[8:]}, true
}

// Step is the decision for one transaction.
type Step struct {
	// Alert is set when the transaction raises an alert, described by
	// From, To (which alias the inputs) and GapMs.
	Alert    bool
	From, To []byte
	GapMs    int64
	// Replace is set when the transaction becomes the card's latest: store
	// it, delete the timer at OldTimer if HasOld, and set one at NewTimer.
	Replace  bool
	HasOld   bool
	OldTimer int64
	NewTimer int64
}

// Decide compares a transaction in country at ts with the card's latest
// one (have is false when there is none).
func (c Config) Decide(last Last, have bool, country []byte, ts int64) Step {
	var s Step
	if have {
		// In uint64 the difference cannot overflow, however far apart the
		// two times are.
		gap, later := uint64(ts)-uint64(last.Ts), true
		if ts < last.Ts {
			gap, later = uint64(last.Ts)-uint64(ts), false
		}
		if gap <= uint64(c.WindowMs) && string(country) != string(last.Country) {
			s.Alert, s.GapMs = true, int64(gap)
			s.From, s.To = last.Country, country
			if !later {
				s.From, s.To = country, last.Country
			}
		}
		if !later {
			return s
		}
		s.HasOld, s.OldTimer = true, c.timerFor(last.Ts)
	}
	s.Replace, s.NewTimer = true, c.timerFor(ts)
	return s
}

// timerFor is when the cleanup timer of a transaction at ts fires.
func (c Config) timerFor(ts int64) int64 {
	if ts > math.MaxInt64-c.WindowMs {
		return math.MaxInt64
	}
	return ts + c.WindowMs
}

// Expired reports whether the cleanup timer firing at timerTs should clear
// a card whose latest transaction is last: only if no later transaction
// has replaced the one that set it.
func (c Config) Expired(last Last, timerTs int64) bool { return c.timerFor(last.Ts) <= timerTs }

// AppendAlert appends the alert's JSON value.
func AppendAlert(dst []byte, card []byte, s Step, ts int64) []byte {
	dst = append(dst, `{"card":`...)
	dst = jsonscan.AppendQuote(dst, card)
	dst = append(dst, `,"from":`...)
	dst = jsonscan.AppendQuote(dst, s.From)
	dst = append(dst, `,"to":`...)
	dst = jsonscan.AppendQuote(dst, s.To)
	dst = append(dst, `,"gap_ms":`...)
	dst = strconv.AppendInt(dst, s.GapMs, 10)
	dst = append(dst, `,"ts":`...)
	dst = strconv.AppendInt(dst, ts, 10)
	return append(dst, '}')
}

// ErrBadState is the failure for a stored state that DecodeLast cannot
// read (another operator's state under the same name).
func ErrBadState(b []byte) error {
	return fmt.Errorf("country-change: the stored state has %d bytes, want at least 8", len(b))
}
