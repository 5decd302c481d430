// Package jsonscan is a small, allocation-free JSON scanner for operators
// that look at a few fields of each record: iterate the members of an object
// or the elements of an array, find a member by name, compare or unquote a
// string, read a number. Values come back as raw spans of the input, so a
// projection can copy them without decoding and re-encoding.
//
// It validates what it scans (strings, numbers, literals and nesting are
// checked against RFC 8259, except that bytes are not checked for valid
// UTF-8) and never panics on untrusted input. It does not build trees or
// decode into Go values: use encoding/json where allocation does not matter.
//
// The C SDK (sdk/c/eddy_json.c) implements the same rules with the same
// structure, so that an operator written in both languages keeps and drops
// exactly the same records; change both together.
//
// It is the one JSON field reader of the project: the host reads key_by,
// event_time, the file source's key_field and timestamp_field and the
// built-in aggregates' fields with it, and the Go SDK reads records with
// it, so that a field means the same member everywhere — the first of
// duplicate members. It lives beside the ABI, not in the SDK, because
// both sides of the boundary depend on it.
//
// The package is pure Go and does not import the guest runtime, so the same
// code runs natively (tests, benchmarks) and inside a Wasm guest.
package jsonscan

import (
	"errors"
	"strconv"
)

// MaxDepth is the deepest nesting of arrays and objects inside a value.
// Deeper values are malformed: the limit lets the scanner keep its container
// stack in a fixed array, without recursion or allocation.
const MaxDepth = 512

// Kind is the type of a JSON value, from its first byte.
type Kind uint8

// The kinds of JSON values.
const (
	Invalid Kind = iota
	Object
	Array
	String
	Number
	True
	False
	Null
)

// Step is the result of one iteration step or lookup.
type Step int8

// Steps.
const (
	Malformed Step = -1 // the input is not valid JSON (or not of the expected kind)
	End       Step = 0  // no more members (Next), or no such member (Lookup)
	Field     Step = 1  // a member or element was returned (Next), or found (Lookup)
)

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func hexVal(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// hex4 decodes the four hex digits at b[i:], or returns -1.
func hex4(b []byte, i int) int {
	if i+4 > len(b) {
		return -1
	}
	r := 0
	for k := i; k < i+4; k++ {
		h := hexVal(b[k])
		if h < 0 {
			return -1
		}
		r = r<<4 | h
	}
	return r
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}

// special8 is nonzero if one of the 8 bytes of x may be '"', '\\' or
// below 0x20 (SWAR: (v - 0x01..) &^ v & 0x80.. flags a zero byte of v, and
// (x - 0x20..) &^ x & 0x80.. a byte of x below 0x20; neither misses one,
// and a false alarm only ever comes above a true one: the lowest flagged
// byte is exact).
func special8(x uint64) uint64 {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	q, bs := x^(ones*'"'), x^(ones*'\\')
	return ((x-ones*0x20)&^x | (q-ones)&^q | (bs-ones)&^bs) & highs
}

// load8 is the little-endian uint64 of b[0:8] (one load: the compiler
// merges the bytes; encoding/binary would pull reflect into Go guests).
func load8(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

// stringEnd returns the index after the string whose opening quote is at
// b[i], or -1.
func stringEnd(b []byte, i int) int {
	i++
	for {
		if i = plainEnd(b, i); i >= len(b) {
			return -1
		}
		switch b[i] {
		case '"':
			return i + 1
		case '\\':
			if i+1 >= len(b) {
				return -1
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if hex4(b, i+2) < 0 {
					return -1
				}
				i += 6
			default:
				return -1
			}
		default: // below 0x20
			return -1
		}
	}
}

// numberEnd returns the index after the number starting at b[i], or -1.
func numberEnd(b []byte, i int) int {
	if i < len(b) && b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return -1
	}
	if b[i] == '0' {
		i++
	} else if isDigit(b[i]) {
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	} else {
		return -1
	}
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		if i == start {
			return -1
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		for i < len(b) && isDigit(b[i]) {
			i++
		}
		if i == start {
			return -1
		}
	}
	return i
}

// literalEnd returns the index after the literal lit at b[i], or -1.
func literalEnd(b []byte, i int, lit string) int {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}

// memberValue parses `"name" : ` at b[i] and returns the index of the
// member's value, or -1.
func memberValue(b []byte, i int) int {
	if i >= len(b) || b[i] != '"' {
		return -1
	}
	i = stringEnd(b, i)
	if i < 0 {
		return -1
	}
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != ':' {
		return -1
	}
	return skipSpace(b, i+1)
}

// ValueEnd returns the index just after the JSON value that starts at b[i]
// (no leading whitespace), or -1 if there is no valid value there. Nested
// containers are checked iteratively against a fixed stack of MaxDepth
// levels, so hostile nesting costs neither stack nor heap.
func ValueEnd(b []byte, i int) int {
	var objects [MaxDepth / 8]byte // bit d set: level d is an object
	depth := 0
	for {
		// A value starts at b[i].
		if i < 0 || i >= len(b) {
			return -1
		}
		c := b[i]
		switch {
		case c == '{' || c == '[':
			if depth == MaxDepth {
				return -1
			}
			if c == '{' {
				objects[depth/8] |= 1 << (depth % 8)
			} else {
				objects[depth/8] &^= 1 << (depth % 8)
			}
			depth++
			i = skipSpace(b, i+1)
			if i < len(b) && (b[i] == '}' && c == '{' || b[i] == ']' && c == '[') {
				depth--
				i++
				break // an empty container is a complete value
			}
			if c == '{' {
				i = memberValue(b, i)
			}
			continue
		case c == '"':
			i = stringEnd(b, i)
		case c == '-' || isDigit(c):
			i = numberEnd(b, i)
		case c == 't':
			i = literalEnd(b, i, "true")
		case c == 'f':
			i = literalEnd(b, i, "false")
		case c == 'n':
			i = literalEnd(b, i, "null")
		default:
			return -1
		}
		if i < 0 {
			return -1
		}
		// A value ended at b[i]: close containers until one continues.
	after:
		for {
			if depth == 0 {
				return i
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return -1
			}
			object := objects[(depth-1)/8]&(1<<((depth-1)%8)) != 0
			switch {
			case b[i] == ',':
				i = skipSpace(b, i+1)
				if object {
					i = memberValue(b, i)
				}
				break after
			case object && b[i] == '}' || !object && b[i] == ']':
				depth--
				i++
			default:
				return -1
			}
		}
	}
}

// Valid reports whether b is exactly one JSON value, optionally surrounded
// by whitespace.
func Valid(b []byte) bool {
	i := skipSpace(b, 0)
	end := ValueEnd(b, i)
	return end >= 0 && skipSpace(b, end) == len(b)
}

// KindOf returns the kind of the value v, judged by its first byte; v should
// be a span returned by this package (it has no leading whitespace).
func KindOf(v []byte) Kind {
	if len(v) == 0 {
		return Invalid
	}
	switch c := v[0]; {
	case c == '{':
		return Object
	case c == '[':
		return Array
	case c == '"':
		return String
	case c == '-' || isDigit(c):
		return Number
	case c == 't':
		return True
	case c == 'f':
		return False
	case c == 'n':
		return Null
	}
	return Invalid
}

// Iter walks the members of an object or the elements of an array. The
// container must be the whole input, optionally surrounded by whitespace
// (or, for an iterator from Enter, a value inside another); anything else
// is reported as Malformed once the iteration reaches it.
type Iter struct {
	buf    []byte
	pos    int
	object bool
	nested bool
	state  int8
}

const (
	iterFirst int8 = iota // before the first member
	iterMore              // after a member
	iterDone              // the container was closed (and, at the top, only whitespace followed)
	iterBad               // malformed
	iterValue             // after a key (NextKey): at the member's value
	iterInner             // an inner iterator (Enter) is on the pending value
)

// Objects returns an iterator over the members of the object in b and
// whether b starts (after whitespace) with '{'.
func Objects(b []byte) (Iter, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return Iter{state: iterBad}, false
	}
	return Iter{buf: b, pos: i + 1, object: true}, true
}

// Elements returns an iterator over the elements of the array in b and
// whether b starts (after whitespace) with '['.
func Elements(b []byte) (Iter, bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '[' {
		return Iter{state: iterBad}, false
	}
	return Iter{buf: b, pos: i + 1}, true
}

// Next returns the next member: its name as a raw string span (quotes and
// escapes included; nil for array elements) and its raw value span. It
// returns End after the last member once the whole input has been checked,
// and Malformed (then forever) when the input is not valid.
func (it *Iter) Next() (key, value []byte, st Step) {
	if key, st = it.NextKey(); st != Field {
		return nil, nil, st
	}
	value, st = it.Value()
	return key, value, st
}

// NextKey is Next without the value: it returns the next member's name
// and leaves the iterator at its value, which the caller takes with Value
// (scanned to its end, as Next does) or, when it is an object or an array,
// iterates in place with Enter, so that a nested container is read once;
// or skips, by calling NextKey or Next again.
func (it *Iter) NextKey() (key []byte, st Step) {
	if it.state == iterValue {
		if _, st = it.Value(); st != Field {
			return nil, st
		}
	}
	switch it.state {
	case iterDone:
		return nil, End
	case iterBad, iterInner:
		return it.failKey()
	}
	b := it.buf
	i := skipSpace(b, it.pos)
	closer := byte(']')
	if it.object {
		closer = '}'
	}
	if i < len(b) && b[i] == closer {
		if !it.nested && skipSpace(b, i+1) != len(b) {
			return it.failKey()
		}
		it.pos, it.state = i+1, iterDone
		return nil, End
	}
	if it.state == iterMore {
		if i >= len(b) || b[i] != ',' {
			return it.failKey()
		}
		i = skipSpace(b, i+1)
	}
	if it.object {
		if i >= len(b) || b[i] != '"' {
			return it.failKey()
		}
		keyEnd := stringEnd(b, i)
		if keyEnd < 0 {
			return it.failKey()
		}
		key = b[i:keyEnd:keyEnd]
		i = skipSpace(b, keyEnd)
		if i >= len(b) || b[i] != ':' {
			return it.failKey()
		}
		i = skipSpace(b, i+1)
	}
	it.pos, it.state = i, iterValue
	return key, Field
}

// Value returns the pending value of NextKey.
func (it *Iter) Value() ([]byte, Step) {
	if it.state != iterValue {
		_, st := it.failKey()
		return nil, st
	}
	b, i := it.buf, it.pos
	end := ValueEnd(b, i)
	if end < 0 {
		_, st := it.failKey()
		return nil, st
	}
	it.pos, it.state = end, iterMore
	return b[i:end:end], Field
}

// Offset is the index in the input where the iterator stands: after
// NextKey, the first byte of the pending value; after Value, Leave or
// Next, just after the value read. With the slices Value returns it gives
// their position in the input without pointer arithmetic.
func (it *Iter) Offset() int { return it.pos }

// PendingIsObject reports whether the pending value of NextKey is an
// object (judged by its first byte, as Enter does).
func (it *Iter) PendingIsObject() bool {
	return it.state == iterValue && it.pos < len(it.buf) && it.buf[it.pos] == '{'
}

// Enter returns an iterator over the pending value of NextKey when it is
// an object or an array, without scanning it; it reports false (and it is
// unchanged) otherwise. it goes on only after Leave. A caller that has
// what it needs may stop at any point instead: what it has not read is
// then not checked.
func (it *Iter) Enter() (Iter, bool) {
	if it.state != iterValue || it.pos >= len(it.buf) || (it.buf[it.pos] != '{' && it.buf[it.pos] != '[') {
		return Iter{state: iterBad}, false
	}
	inner := Iter{buf: it.buf, pos: it.pos + 1, object: it.buf[it.pos] == '{', nested: true}
	it.state = iterInner
	return inner, true
}

// Leave continues it after the value inner iterates, finishing inner
// first if it has not ended; false when that value is malformed.
func (it *Iter) Leave(inner *Iter) bool {
	if it.state != iterInner || !inner.nested {
		it.state = iterBad
		return false
	}
	for {
		_, st := inner.NextKey()
		if st == Malformed {
			it.state = iterBad
			return false
		}
		if st == End {
			break
		}
	}
	it.pos, it.state = inner.pos, iterMore
	return true
}

func (it *Iter) failKey() ([]byte, Step) {
	it.state = iterBad
	return nil, Malformed
}

// Lookup returns the value of the first member called name (compared after
// unescaping) of the object in b. It checks the whole object: Field when
// found, End when absent, Malformed when b is not a valid JSON object.
func Lookup(b, name []byte) ([]byte, Step) {
	it, ok := Objects(b)
	if !ok {
		return nil, Malformed
	}
	var found []byte
	for {
		key, value, st := it.Next()
		switch st {
		case Malformed:
			return nil, Malformed
		case End:
			if found == nil {
				return nil, End
			}
			return found, Field
		}
		if found == nil && Equal(key, name) {
			found = value
		}
	}
}

// content returns the bytes between the quotes of a raw string span.
func content(raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return nil, false
	}
	return raw[1 : len(raw)-1], true
}

// unescape decodes the escape sequence at c[i] (c[i] == '\\') into buf and
// returns the number of bytes written and the index after the sequence.
// Lone surrogates become U+FFFD, as encoding/json does. A sequence the
// scanner would have rejected is taken literally (one backslash byte), so
// the functions below are total on any input.
func unescape(c []byte, i int, buf *[4]byte) (n, next int) {
	if i+1 >= len(c) {
		buf[0] = '\\'
		return 1, i + 1
	}
	switch c[i+1] {
	case '"', '\\', '/':
		buf[0] = c[i+1]
	case 'b':
		buf[0] = '\b'
	case 'f':
		buf[0] = '\f'
	case 'n':
		buf[0] = '\n'
	case 'r':
		buf[0] = '\r'
	case 't':
		buf[0] = '\t'
	case 'u':
		r := hex4(c, i+2)
		if r < 0 {
			buf[0] = '\\'
			return 1, i + 1
		}
		next = i + 6
		if r >= 0xD800 && r < 0xDC00 {
			if next+1 < len(c) && c[next] == '\\' && c[next+1] == 'u' {
				if lo := hex4(c, next+2); lo >= 0xDC00 && lo < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					next += 6
				} else {
					r = 0xFFFD
				}
			} else {
				r = 0xFFFD
			}
		} else if r >= 0xDC00 && r < 0xE000 {
			r = 0xFFFD
		}
		return encodeRune(buf, r), next
	default:
		buf[0] = '\\'
		return 1, i + 1
	}
	return 1, i + 2
}

// encodeRune writes r (a valid scalar value) as UTF-8.
func encodeRune(buf *[4]byte, r int) int {
	switch {
	case r < 0x80:
		buf[0] = byte(r)
		return 1
	case r < 0x800:
		buf[0] = byte(0xC0 | r>>6)
		buf[1] = byte(0x80 | r&0x3F)
		return 2
	case r < 0x10000:
		buf[0] = byte(0xE0 | r>>12)
		buf[1] = byte(0x80 | r>>6&0x3F)
		buf[2] = byte(0x80 | r&0x3F)
		return 3
	}
	buf[0] = byte(0xF0 | r>>18)
	buf[1] = byte(0x80 | r>>12&0x3F)
	buf[2] = byte(0x80 | r>>6&0x3F)
	buf[3] = byte(0x80 | r&0x3F)
	return 4
}

// Equal reports whether the raw string span raw, once unescaped, equals s.
// It decodes on the fly and stops at the first difference, so comparing a
// member name costs no more than a byte comparison when it has no escapes.
func Equal(raw, s []byte) bool {
	c, ok := content(raw)
	if !ok || len(s) > len(c) { // unescaping never makes a string longer
		return false
	}
	var buf [4]byte
	k := 0
	for i := 0; i < len(c); {
		if c[i] != '\\' {
			if k >= len(s) || s[k] != c[i] {
				return false
			}
			k++
			i++
			continue
		}
		n, next := unescape(c, i, &buf)
		if len(s)-k < n || string(s[k:k+n]) != string(buf[:n]) {
			return false
		}
		k += n
		i = next
	}
	return k == len(s)
}

// AppendUnquote appends the unescaped content of the raw string span raw
// to dst. The result is never longer than len(raw)-2 bytes. A span that is
// not a quoted string appends nothing.
func AppendUnquote(dst, raw []byte) []byte {
	c, ok := content(raw)
	if !ok {
		return dst
	}
	var buf [4]byte
	for i := 0; i < len(c); {
		if c[i] != '\\' {
			start := i
			for i < len(c) && c[i] != '\\' {
				i++
			}
			dst = append(dst, c[start:i]...)
			continue
		}
		n, next := unescape(c, i, &buf)
		dst = append(dst, buf[:n]...)
		i = next
	}
	return dst
}

// AppendQuote appends s as a JSON string: '"' and '\\' are escaped, control
// characters use their short escape or \u00XX, every other byte is copied.
func AppendQuote(dst, s []byte) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\b':
			dst = append(dst, '\\', 'b')
		case c == '\f':
			dst = append(dst, '\\', 'f')
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
		default:
			dst = append(dst, c)
		}
	}
	return append(dst, '"')
}

// ParseNumber returns the value of the raw number span raw as the nearest
// float64 (±Inf beyond the float64 range, as strtod does), and false when
// raw is not exactly one JSON number.
func ParseNumber(raw []byte) (float64, bool) {
	// Each digit costs one range check: Go's wasm backend pays for every
	// taken branch, so the JSON grammar's finer points (a leading zero,
	// "1.") are left to the general path.
	s, neg := raw, false
	if len(s) > 0 && s[0] == '-' {
		s, neg = s[1:], true
	}
	var m uint64
	i := 0
	for i < len(s) && s[i]-'0' <= 9 {
		m = m*10 + uint64(s[i]-'0')
		i++
	}
	whole, frac := i, 0
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i]-'0' <= 9 {
			m = m*10 + uint64(s[i]-'0')
			i++
		}
		frac = i - whole - 1
	}
	if i == len(s) && whole > 0 && (i == whole || frac > 0) && whole+frac <= 15 && (s[0] != '0' || whole == 1) {
		// At most 15 digits, no exponent: m and 10^frac are exact in
		// float64, so one division rounds correctly, as strconv does
		// (Clinger's fast path, which strconv takes too, but only after
		// work that costs Go's wasm backend about a microsecond).
		x := float64(m) / pow10[frac]
		if neg {
			x = -x
		}
		return x, true
	}
	return parseNumber(raw)
}

// pow10 are the powers of ten that float64 represents exactly.
var pow10 = [...]float64{1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10,
	1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22}

// parseNumber is ParseNumber without the fast path.
func parseNumber(raw []byte) (float64, bool) {
	if len(raw) == 0 || numberEnd(raw, 0) != len(raw) {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return 0, false
	}
	return f, true
}
