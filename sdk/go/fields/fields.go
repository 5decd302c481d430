// Package fields lets an Eddy operator read a few JSON members of each
// record without scanning its value: the operator declares, in Open, the
// paths it reads, and the host validates every value and finds those paths
// natively while it writes the batch (abi/ABI.md, "Version 6: fields the
// host extracts"). For each record, Valid says whether the value is one
// valid JSON object and Get gives the raw bytes of path j's value.
//
//	func (o *op) Open(config []byte) error {
//		return fields.Declare([]string{"card"}, []string{"bid", "price"})
//	}
//
//	func (o *op) Process(r *eddy.Record) error {
//		if !fields.Valid() {
//			return nil // not a JSON object
//		}
//		price, ok := fields.Get(1) // `12.5`, `"12.5"`, `{…}`: raw JSON
//		…
//	}
//
// Spans reads all of them in one call (o.spans is a [][]byte of the
// paths' number, made in Open):
//
//	if !fields.Spans(o.spans) { return nil }
//	card, price := o.spans[0], o.spans[1] // nil when absent
//
// Importing this package makes the module declare ABI version 6 (its init
// raises the version eddy_abi_version reports, and never lowers it: a
// keyed module still uses keyed state, a package co module still has two
// inputs). It is a package of its own for the reason package keyed is one:
// the version must be known before eddy_open.
//
// The spans follow the host's rules (for a one-key path, what
// abi/jsonscan's Lookup finds): keys are compared after unescaping, at
// each level the first member of a name counts, and a path through a value that is
// not an object is absent. A record whose value is not a valid JSON object
// has every path absent.
//
// Fields are read in Process (and package co's ProcessLeft and
// ProcessRight), for the record being processed; timer batches, window
// functions and aggregates have no field table, so Valid and Get panic
// there. Nothing on the per-record path allocates.
//
// Like package eddy, this package only works inside a Wasm guest; on other
// platforms Declare panics.
package fields

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"github.com/eddy-stream/eddy/abi"
	"github.com/eddy-stream/eddy/sdk/go/internal/guest"
)

func init() { guest.NeedVersion(abi.PartsVersion) }

// spanPaths is how many of the declared paths are span paths: row entries
// 0 to spanPaths-1; the number paths follow.
var spanPaths int

// list is the encoded field list while the host reads it, held by a
// package-level variable as every buffer handed to the host is.
var list []byte

// Errors of Declare, returned before anything reaches the host.
var (
	ErrNotOpening = errors.New("fields: Declare called outside Open: the host takes a module's fields only during eddy_open")
	ErrTwice      = errors.New("fields: Declare called twice: a module declares its fields once, all in one call")
)

// Declare declares the paths this instance reads, in the order Get numbers
// them: path ["bid", "price"] is the member price of the object that is
// the member bid of the value. It may be called once, from Open. The host
// checks the list (1 to 64 paths of 1 to 8 keys, no path twice) and fails
// Open with a message naming what is wrong.
func Declare(paths ...[]string) error {
	if !guest.Opening() {
		return ErrNotOpening
	}
	if guest.FieldPaths() > 0 {
		return ErrTwice
	}
	return declare(paths, nil)
}

// DeclareWithNumbers is Declare with number paths too (ABI version 7):
// Get and Spans number the span paths from 0 as Declare does, and Number
// the number paths from len(spans) on. A path may be in both lists (the
// host finds it once); a record whose value is not a valid JSON object
// has no numbers.
func DeclareWithNumbers(spans, numbers [][]string) error {
	if !guest.Opening() {
		return ErrNotOpening
	}
	if guest.FieldPaths() > 0 {
		return ErrTwice
	}
	return declare(spans, numbers)
}

func declare(spans, numbers [][]string) error {
	list = abi.EncodeFields(spans, numbers)
	hostFields(list)
	list = nil
	spanPaths = len(spans)
	guest.SetFieldPaths(len(spans) + len(numbers))
	return nil
}

// Number returns the value of number path j (DeclareWithNumbers: j at
// least the number of span paths) in the record being processed, parsed
// by the host as the nearest float64 (±Inf beyond its range), and false
// when the path is absent, its value is not a JSON number, or the
// record's value is not a valid JSON object. It panics where Get does and
// when path j is not a number path.
func Number(j int) (float64, bool) {
	row := guest.Row()
	if row < 0 || j < spanPaths || j >= guest.FieldPaths() {
		panic(numberError{j, row})
	}
	x := math.Float64frombits(guest.RowWord(row + 4 + 8*j))
	return x, x == x
}

// EmitParts sends downstream a record like r whose value is the
// concatenation of parts, without copying them: the host gathers the
// parts when it takes the output (ABI version 7, values in parts). r.Value
// is not used. Each part must stay unchanged and reachable until the
// current Process (or OnTimer, or Close) returns: the bytes of the record
// being processed (its value, the spans of Get and Spans) and memory the
// operator keeps (say its configuration) do; a slice that Process builds
// and then overwrites or drops does not. For an operator that rewrites
// values out of their fields, it saves copying every field twice in
// Go-compiled Wasm.
func EmitParts(r *abi.Record, parts ...[]byte) { guest.EmitParts(r, parts) }

// A Part is one piece of a value emitted with EmitPartList: in a Wasm
// module, the piece's address in the module's memory and its length,
// which is what the ABI's part list holds, so that a list of Parts goes
// out as it is. Unlike a []byte a Part holds no pointer, so building a
// list of them costs Go's Wasm backend neither write barriers nor bounds
// checks on the way out; an operator that keeps its constant pieces as
// Parts (made once, in Open) and takes its spans with SpanParts emits a
// rewritten value without touching a slice. NoPart (the zero Part) is an
// empty piece; SpanParts gives it for an absent path.
type Part uint64

// NoPart is the empty Part.
const NoPart Part = 0

// Len is the length of the piece p names.
func (p Part) Len() int { return int(p >> 32) }

// PartOf returns b as a Part. The Part names b's bytes, not a copy: they
// must stay unchanged and reachable for as long as the Part is emitted,
// as with EmitParts. Parts of memory the operator keeps (its
// configuration, constants) are best made once, in Open; outside Wasm
// (the SDK's native tests) a Part made while processing is valid until
// the next batch.
func PartOf(b []byte) Part { return Part(guest.PartOf(b)) }

// SpanParts is Spans with Parts: it sets parts[j] to span path j's value
// in the record being processed, NoPart when absent, and reports whether
// the value is one valid JSON object. A span's Part is its row entry with
// the batch's address added, so the call reads no slices. It panics where
// Spans does.
func SpanParts(parts []Part) bool {
	valid, ok := guest.SpanParts(spanPaths, words(parts))
	if !ok {
		panic(spansError{len(parts), guest.Row()})
	}
	return valid
}

// EmitPartList sends downstream a record like r whose value is the
// concatenation of the pieces parts name, as EmitParts does (r.Value is
// not used; the host gathers the pieces). The list is copied, so parts
// may be reused at once; the pieces may not (see PartOf).
func EmitPartList(r *abi.Record, parts []Part) { guest.EmitPartList(r, words(parts)) }

// words is parts as the []uint64 it is.
func words(parts []Part) []uint64 {
	return unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(parts))), len(parts))
}

// numberError is the panic of a wrong Number(j), with its message made
// only when printed: a panic value costs Number nothing, so it stays small
// enough to be inlined into the operator's loop.
type numberError struct{ j, row int }

func (e numberError) Error() string {
	if e.row < 0 {
		return errNoRow
	}
	return fmt.Sprintf("fields: Number(%d): paths %d to %d are number paths", e.j, spanPaths, guest.FieldPaths()-1)
}

// Valid reports whether the value of the record being processed is one
// valid JSON object. It panics outside Process and in a module that did
// not Declare.
func Valid() bool {
	b, row := guest.FieldRow()
	if row < 0 {
		panic(errNoRow)
	}
	return binary.LittleEndian.Uint32(b[row:]) == 1
}

// Get returns the raw bytes of path j's value in the record being
// processed (a string with its quotes and escapes, an object or array
// whole), and false when the path is absent or the value is not a valid
// JSON object. The bytes alias the input batch, as the record does: they
// are valid until Process returns. It panics outside Process, in a module
// that did not Declare, and for j out of range.
func Get(j int) ([]byte, bool) {
	b, row := guest.FieldRow()
	if row < 0 || uint(j) >= uint(spanPaths) {
		badGet(j)
	}
	at := row + 4 + 8*j
	off := binary.LittleEndian.Uint32(b[at:])
	if off == abi.FieldAbsent {
		return nil, false
	}
	end := int(off) + int(binary.LittleEndian.Uint32(b[at+4:]))
	return b[off:end:end], true
}

// Spans is Valid and Get for the first len(spans) paths in one call: it
// sets spans[j] to path j's raw value in the record being processed, nil
// when absent, and reports whether the value is one valid JSON object. An
// operator that reads all its fields of every record calls it once per
// record instead of Get once per path: in Go's Wasm backend a call costs
// about as much as the work of a Get. It panics where Get does and when
// spans is longer than the paths declared.
func Spans(spans [][]byte) bool {
	b, row := guest.FieldRow()
	if row < 0 || len(spans) > spanPaths {
		badSpans(len(spans))
	}
	le := binary.LittleEndian
	r := b[row : row+4+8*len(spans)]
	for j := range spans {
		e := r[4+8*j : 12+8*j]
		off := le.Uint32(e)
		if off == abi.FieldAbsent {
			spans[j] = nil
			continue
		}
		end := int(off) + int(le.Uint32(e[4:]))
		spans[j] = b[off:end:end]
	}
	return le.Uint32(r) == 1
}

func badSpans(n int) {
	_, row := guest.FieldRow()
	panic(spansError{n, row})
}

// spansError is the panic of a wrong Spans or SpanParts of n paths, with
// its message made only when printed (see numberError).
type spansError struct{ n, row int }

func (e spansError) Error() string {
	if e.row < 0 {
		return errNoRow
	}
	return fmt.Sprintf("fields: Spans of %d paths, %d span paths declared", e.n, spanPaths)
}

// badGet panics with what is wrong with Get(j). It is apart from Get so
// that Get stays small enough to be inlined.
func badGet(j int) {
	if _, row := guest.FieldRow(); row < 0 {
		panic(errNoRow)
	}
	panic(fmt.Sprintf("fields: Get(%d) of %d declared span paths", j, spanPaths))
}

const errNoRow = "fields: no record with fields: Valid and Get are for Process (and ProcessLeft/ProcessRight) of a module that called Declare"
