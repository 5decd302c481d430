// Package stats is the algorithm of the "card-stats" example aggregate
// (an aggregate module, ABI version 3): per window, the number of
// transactions, their total and largest amount, and how many distinct
// countries they come from.
//
// It is pure Go with no SDK import, so the same code runs inside the Wasm
// guest (udfs/cardstats/go) and natively (tests, against the guests).
// udfs/cardstats/c/cardstats.c is the same algorithm in C, written to
// mirror this file: the two must produce the same bytes, accumulators
// included, so that a job can swap one module for the other and keep its
// window state. Change both together.
//
// Configuration: none; the only valid config is an empty JSON object.
//
// Input values are the generator's transactions:
//
//	{"card":"card-0042","amount":12.34,"country":"DE","merchant":"m-017","ts":1767225600000}
//
// A record counts when its value is a JSON object with a numeric "amount"
// and a string "country" of at most MaxCountryLen bytes (unescaped);
// others are ignored. Amounts are rounded to whole cents (half away from
// zero, as math.Round does on amount × 100 in float64, which C's round
// does identically) and must be at most 2^53 cents in magnitude, so that
// everything after parsing is exact integer arithmetic and Go and C
// agree to the byte.
//
// The result of a window is
//
//	{"n":3,"total":"58.49","max":"40.00","countries":2}
//
// with "max" null for a window without counted records. The total wraps
// around beyond ±2^63 cents, about 92 trillion, which keeps the sum
// associative however the host splits a window.
//
// # Accumulator
//
// An accumulator is
//
//	byte     format, 1
//	uvarint  n, the records counted
//	varint   the sum of their amounts in cents (zig-zag, as encoding/binary)
//	varint   the largest amount in cents; 0 when n = 0
//	then the distinct countries in strictly increasing byte order, each
//	as one length byte and the country's bytes
//
// The empty accumulator is the 4 bytes 01 00 00 00. Every varint is
// minimal, so an accumulator has exactly one encoding: merging with the
// empty one gives it back byte for byte. Decode refuses anything else.
package stats

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/eddy-stream/eddy/abi/jsonscan"
)

// Format is the first byte of every accumulator.
const Format = 1

// MaxCountryLen is the longest country, in bytes, that a record may have
// to count: the accumulator stores the length in one byte.
const MaxCountryLen = 255

// maxCents bounds an amount's magnitude in cents: below it every integer
// is exact in a float64.
const maxCents = 1 << 53

// Parse checks a configuration. Its error messages are the ones the C
// version reports too.
func Parse(config []byte) error {
	it, ok := jsonscan.Objects(config)
	if !ok {
		return errors.New("card-stats: config is not a JSON object")
	}
	switch key, _, st := it.Next(); st {
	case jsonscan.Malformed:
		return errors.New("card-stats: config is not valid JSON")
	case jsonscan.Field:
		return fmt.Errorf("card-stats: config: unknown key %s (card-stats takes no configuration)", key)
	}
	return nil
}

var (
	amountName  = []byte("amount")
	countryName = []byte("country")
)

// ParseTxn reads the amount in cents and the country of a transaction,
// unescaping the country into scratch, which it returns (grown) for reuse.
// ok is false for a value that does not count. It reads the object once,
// to its end, and takes the first "amount" and the first "country", as
// jsonscan.Lookup would.
func ParseTxn(value, scratch []byte) (cents int64, country, grown []byte, ok bool) {
	it, ok := jsonscan.Objects(value)
	if !ok {
		return 0, nil, scratch, false
	}
	var amount, c []byte
	for {
		key, v, st := it.Next()
		if st == jsonscan.Malformed {
			return 0, nil, scratch, false
		}
		if st == jsonscan.End {
			break
		}
		if amount == nil && jsonscan.Equal(key, amountName) {
			amount = v
		} else if c == nil && jsonscan.Equal(key, countryName) {
			c = v
		}
	}
	if amount == nil || jsonscan.KindOf(amount) != jsonscan.Number || c == nil || jsonscan.KindOf(c) != jsonscan.String {
		return 0, nil, scratch, false
	}
	d, ok := jsonscan.ParseNumber(amount)
	if !ok {
		return 0, nil, scratch, false
	}
	x := math.Round(d * 100)
	if !(math.Abs(x) <= maxCents) {
		return 0, nil, scratch, false
	}
	scratch = jsonscan.AppendUnquote(scratch[:0], c)
	if len(scratch) > MaxCountryLen {
		return 0, nil, scratch, false
	}
	return int64(x), scratch, scratch, true
}

// Acc is a decoded accumulator. Its countries alias the bytes it was
// decoded from.
type Acc struct {
	N         uint64 // records counted
	Sum       int64  // cents, wrapping
	Max       int64  // cents; 0 when N = 0
	Countries int    // distinct countries
	list      []byte // the encoded country list, checked
}

// AppendEmpty appends the empty accumulator to dst.
func AppendEmpty(dst []byte) []byte { return appendHeader(dst, 0, 0, 0) }

func appendHeader(dst []byte, n uint64, sum, top int64) []byte {
	dst = append(dst, Format)
	dst = binary.AppendUvarint(dst, n)
	dst = binary.AppendVarint(dst, sum)
	return binary.AppendVarint(dst, top)
}

// ErrMalformed marks the error of an accumulator that does not decode.
var ErrMalformed = errors.New("card-stats: malformed accumulator")

func malformed(b []byte, why string) error {
	return fmt.Errorf("%w (%d bytes): %s", ErrMalformed, len(b), why)
}

// Decode reads an accumulator, checking all of it.
func Decode(b []byte) (Acc, error) {
	var a Acc
	if len(b) == 0 {
		return a, malformed(b, "empty")
	}
	if b[0] != Format {
		return a, malformed(b, "format "+strconv.Itoa(int(b[0]))+", want 1")
	}
	at := 1
	var fields [3]uint64
	for i := range fields {
		x, k := uvarint(b[at:])
		if k <= 0 {
			return a, malformed(b, "bad varint")
		}
		fields[i], at = x, at+k
	}
	a.N, a.Sum, a.Max = fields[0], unzigzag(fields[1]), unzigzag(fields[2])
	a.list = b[at:]
	var prev []byte
	for i := 0; i < len(a.list); {
		end := i + 1 + int(a.list[i])
		if end > len(a.list) {
			return a, malformed(b, "truncated country")
		}
		c := a.list[i+1 : end]
		if a.Countries > 0 && bytes.Compare(prev, c) >= 0 {
			return a, malformed(b, "countries out of order")
		}
		prev, i = c, end
		a.Countries++
	}
	if a.N == 0 && (a.Sum != 0 || a.Max != 0 || a.Countries != 0) || a.N != 0 && (a.Countries == 0 || uint64(a.Countries) > a.N) {
		return a, malformed(b, "inconsistent counts")
	}
	return a, nil
}

// uvarint reads a minimal unsigned varint: binary.Uvarint's rules, and
// refusing a longer encoding than necessary, which keeps accumulators
// canonical. It returns the number of bytes read, or 0 when there is none.
func uvarint(b []byte) (uint64, int) {
	var x uint64
	for i := 0; i < len(b) && i < binary.MaxVarintLen64; i++ {
		c := b[i]
		if c < 0x80 {
			if i == binary.MaxVarintLen64-1 && c > 1 || i > 0 && c == 0 {
				return 0, 0
			}
			return x | uint64(c)<<(7*i), i + 1
		}
		x |= uint64(c&0x7f) << (7 * i)
	}
	return 0, 0
}

func unzigzag(u uint64) int64 { return int64(u>>1) ^ -int64(u&1) }

// Add appends to dst the accumulator acc with a transaction of cents in
// country added.
func Add(dst, acc []byte, cents int64, country []byte) ([]byte, error) {
	a, err := Decode(acc)
	if err != nil {
		return dst, err
	}
	top := cents
	if a.N > 0 && a.Max > cents {
		top = a.Max
	}
	dst = appendHeader(dst, a.N+1, a.Sum+cents, top)
	pos := 0
	for pos < len(a.list) {
		end := pos + 1 + int(a.list[pos])
		switch bytes.Compare(a.list[pos+1:end], country) {
		case 0:
			return append(dst, a.list...), nil
		case 1:
			return appendCountries(dst, a.list, pos, country), nil
		}
		pos = end
	}
	return appendCountries(dst, a.list, pos, country), nil
}

// appendCountries appends list with country inserted at pos.
func appendCountries(dst, list []byte, pos int, country []byte) []byte {
	dst = append(dst, list[:pos]...)
	dst = append(dst, byte(len(country)))
	dst = append(dst, country...)
	return append(dst, list[pos:]...)
}

// AddValue appends to dst the accumulator acc with the record value
// added, or acc unchanged when the value does not count; see ParseTxn for
// scratch. It checks acc either way.
func AddValue(dst, acc, value, scratch []byte) (out, grown []byte, err error) {
	cents, country, scratch, ok := ParseTxn(value, scratch)
	if !ok {
		if _, err := Decode(acc); err != nil {
			return dst, scratch, err
		}
		return append(dst, acc...), scratch, nil
	}
	out, err = Add(dst, acc, cents, country)
	return out, scratch, err
}

// Merge appends to dst the merge of the accumulators a and b: the counts
// and sums add up, the maximum is the larger one, and the countries are
// the union. It is associative and commutative, and the empty
// accumulator is its identity.
func Merge(dst, a, b []byte) ([]byte, error) {
	x, err := Decode(a)
	if err != nil {
		return dst, err
	}
	y, err := Decode(b)
	if err != nil {
		return dst, err
	}
	top := x.Max
	if x.N == 0 || y.N > 0 && y.Max > x.Max {
		top = y.Max
	}
	dst = appendHeader(dst, x.N+y.N, x.Sum+y.Sum, top)
	i, j := 0, 0
	for i < len(x.list) && j < len(y.list) {
		ie, je := i+1+int(x.list[i]), j+1+int(y.list[j])
		switch bytes.Compare(x.list[i+1:ie], y.list[j+1:je]) {
		case -1:
			dst, i = append(dst, x.list[i:ie]...), ie
		case 1:
			dst, j = append(dst, y.list[j:je]...), je
		default:
			dst, i, j = append(dst, x.list[i:ie]...), ie, je
		}
	}
	dst = append(dst, x.list[i:]...)
	return append(dst, y.list[j:]...), nil
}

// AppendResult appends the window's result for acc, a JSON object.
func AppendResult(dst, acc []byte) ([]byte, error) {
	a, err := Decode(acc)
	if err != nil {
		return dst, err
	}
	dst = append(dst, `{"n":`...)
	dst = strconv.AppendUint(dst, a.N, 10)
	dst = append(dst, `,"total":"`...)
	dst = appendCents(dst, a.Sum)
	if a.N == 0 {
		dst = append(dst, `","max":null,"countries":`...)
	} else {
		dst = append(dst, `","max":"`...)
		dst = appendCents(dst, a.Max)
		dst = append(dst, `","countries":`...)
	}
	dst = strconv.AppendInt(dst, int64(a.Countries), 10)
	return append(dst, '}'), nil
}

// appendCents appends c/100 with exactly two decimals.
func appendCents(dst []byte, c int64) []byte {
	u := uint64(c)
	if c < 0 {
		dst, u = append(dst, '-'), -u
	}
	dst = strconv.AppendUint(dst, u/100, 10)
	return append(dst, '.', byte('0'+u/10%10), byte('0'+u%10))
}
