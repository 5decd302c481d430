// Package projection is the algorithm of the "project" example operator: it
// keeps the records whose JSON value passes a predicate on one top-level
// field, and rewrites their value to a chosen subset of top-level fields.
//
// It is pure Go with no SDK import so that the very same code runs inside
// the Wasm guest (udfs/project/go) and natively (tests, benchmarks against
// the guests). udfs/project/c/project.c is the same algorithm in C, written
// to mirror this file; change both together.
//
// Configuration (JSON):
//
//	{"fields": ["card", "amount"], "where": {"field": "amount", "op": ">", "value": 100}}
//
// "fields" is optional: without it the value is kept whole. "where" is
// optional: without it every JSON object passes. The ops are ==, !=, <, <=,
// >, >= when "value" is a number (compared as float64), == and != when it is
// a string (compared after unescaping), and "exists" (no "value"). A record
// passes only if the where field is present and of the value's type, so
// != does not match a missing field or a string compared to a number.
//
// Records whose value is not a valid JSON object are dropped. Output members
// are in configuration order with their raw value bytes; missing fields are
// left out; when a field occurs twice in a value, the first one counts.
//
// # Fields the host extracts
//
// Apply scans the value itself. A module of ABI version 6 (abi/ABI.md,
// "Version 6: fields the host extracts") can instead have the host find
// the fields, and call ApplySpans with what it found:
//
//   - Paths gives the paths to declare, each of one key: the "fields"
//     names in configuration order, then the where field if there is a
//     where clause and its name (after unescaping) is not one of the
//     "fields" names. It is empty when there are neither "fields" names
//     nor a where clause: then there is nothing to declare, and the
//     module calls Apply (which still drops values that are not JSON
//     objects).
//   - ApplySpans(dst, value, valid, spans) takes the record's status
//     (valid: the value is one valid JSON object) and spans[j], the raw
//     bytes of path j's value (the first member of that name, as the host
//     finds it), nil when absent; len(spans) == len(Paths()). The where
//     field's span is spans[i] when it is "fields" name i, else the last.
//     It returns exactly what Apply(dst, value) returns: the same bytes,
//     the same drops.
//
// # Numbers the host parses, values in parts
//
// A module of ABI version 7 can also have the host parse the where field
// when the clause compares numbers, and gather the output value from
// parts instead of building it:
//
//   - Declared gives the span paths and the number paths to declare (row
//     entry j is spans[j], then the numbers): the "fields" names; then
//     the where field, among the spans if the clause compares strings or
//     tests existence (and the name is not one of the "fields"), as the
//     only number path if it compares numbers.
//   - ApplyParts(parts, value, valid, spans, x) takes the status, the
//     spans of Declared's span paths and x, the where field's number
//     (NaN when there is none or it is absent or not a number; any value
//     when the clause does not compare numbers), and appends to parts the
//     pieces whose concatenation is what Apply(nil, value) returns: parts
//     of value and of the Projector's own memory, so they stay valid as
//     long as both do.
package projection

import (
	"errors"
	"fmt"

	"github.com/eddy-stream/eddy/abi/jsonscan"
)

// Op is a comparison of the where clause.
type Op uint8

// The ops.
const (
	OpNone Op = iota // no where clause
	OpEq
	OpNe
	OpLt
	OpLe
	OpGt
	OpGe
	OpExists
)

// Projector applies one configuration. It keeps scratch space between calls
// to Apply, so it is not safe for concurrent use: use one per task.
type Projector struct {
	all      bool     // no "fields": keep the whole value
	fields   [][]byte // field names, unescaped
	prefixes [][]byte // `"name":` for each field, as written to the output
	first    [][]byte // `{"name":` for each field: the prefix when no field came before
	next     [][]byte // `,"name":` for each field: the prefix after another
	spans    [][]byte // scratch: each field's value in the current record

	op      Op
	where   []byte // where field name, unescaped
	whereAt int    // the where field's index in Paths: a field's, or len(fields)
	numeric bool   // compare as numbers (else as strings)
	number  float64
	text    []byte
}

// Parse reads a configuration. Its error messages are the ones the C
// version reports too.
func Parse(config []byte) (*Projector, error) {
	p := &Projector{all: true}
	it, ok := jsonscan.Objects(config)
	if !ok {
		return nil, errors.New("project: config is not a JSON object")
	}
	seenFields, seenWhere := false, false
	for {
		key, value, st := it.Next()
		if st == jsonscan.Malformed {
			return nil, errors.New("project: config is not valid JSON")
		}
		if st == jsonscan.End {
			break
		}
		switch {
		case jsonscan.Equal(key, []byte("fields")) && !seenFields:
			seenFields = true
			if err := p.parseFields(value); err != nil {
				return nil, err
			}
		case jsonscan.Equal(key, []byte("where")) && !seenWhere:
			seenWhere = true
			if err := p.parseWhere(value); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("project: config: unknown or repeated key %s", key)
		}
	}
	p.whereAt = len(p.fields)
	for i, f := range p.fields {
		if p.op != OpNone && string(f) == string(p.where) {
			p.whereAt = i
		}
	}
	return p, nil
}

// Paths returns the JSON paths ApplySpans needs, in the order of its
// spans: see the package documentation.
func (p *Projector) Paths() [][]string {
	var paths [][]string
	for _, f := range p.fields {
		paths = append(paths, []string{string(f)})
	}
	if p.op != OpNone && p.whereAt == len(p.fields) {
		paths = append(paths, []string{string(p.where)})
	}
	return paths
}

// Declared returns the paths ApplyParts needs: see the package
// documentation.
func (p *Projector) Declared() (spans, numbers [][]string) {
	for _, f := range p.fields {
		spans = append(spans, []string{string(f)})
	}
	if p.numberWhere() {
		return spans, [][]string{{string(p.where)}}
	}
	if p.op != OpNone && p.whereAt == len(p.fields) {
		spans = append(spans, []string{string(p.where)})
	}
	return spans, nil
}

// numberWhere reports whether the where clause compares numbers, which
// version 7 hands over parsed.
func (p *Projector) numberWhere() bool { return p.numeric && p.op != OpNone && p.op != OpExists }

// The constant parts of an output value.
var (
	closeBrace  = []byte("}")
	emptyObject = []byte("{}")
)

// ApplyParts is ApplySpans with the where field's number parsed and the
// output value left in parts: see the package documentation. When the
// record is dropped, parts is returned unchanged.
func (p *Projector) ApplyParts(parts [][]byte, value []byte, valid bool, spans [][]byte, x float64) ([][]byte, bool) {
	if !valid {
		return parts, false
	}
	var where []byte
	if w := p.WhereSpan(); w >= 0 {
		where = spans[w]
	}
	if !p.Filter(where, x) {
		return parts, false
	}
	if p.all {
		return append(parts, value), true
	}
	n := len(parts)
	for i, v := range spans[:len(p.fields)] {
		if v == nil {
			continue
		}
		if len(parts) == n {
			parts = append(parts, p.first[i], v)
		} else {
			parts = append(parts, p.next[i], v)
		}
	}
	if len(parts) == n {
		return append(parts, emptyObject), true
	}
	return append(parts, closeBrace), true
}

// WhereSpan is the index among Declared's span paths of the where field
// when Filter needs its raw value, -1 when it does not (no where clause,
// or one that compares numbers).
func (p *Projector) WhereSpan() int {
	if p.op == OpNone || p.numberWhere() {
		return -1
	}
	return p.whereAt
}

// Filter reports whether a record whose value is a valid JSON object
// passes the where clause, given the where field's raw value (nil when
// absent; only used when WhereSpan is not -1) and its number x (NaN when
// there is none; only used when the clause compares numbers): the filter
// of ApplyParts, for a module that assembles the output itself from
// Pieces.
func (p *Projector) Filter(where []byte, x float64) bool {
	switch {
	case p.op == OpNone:
		return true
	case p.numberWhere():
		return p.compare(x)
	}
	return p.match(where)
}

// ComparesNumbers reports whether the where clause compares the where
// field's number with a constant: then Filter(where, x) is Compare(x).
func (p *Projector) ComparesNumbers() bool { return p.numberWhere() }

// Compare is Filter for a where clause that compares numbers
// (ComparesNumbers), given the where field's number x (NaN when there is
// none). It is small enough for Go to inline into a module's record loop,
// which Filter is not.
func (p *Projector) Compare(x float64) bool { return p.compare(x) }

// Pieces returns what ApplyParts builds an output value from, for a
// module that assembles it itself: whole is true when the value is kept
// as it is (no "fields"); otherwise the value is first[i] and field i's
// span for the first "fields" name present, next[i] and the span for each
// further one, then closing, or empty when none is present. The slices
// are the Projector's own, valid as long as it is.
func (p *Projector) Pieces() (whole bool, first, next [][]byte, closing, empty []byte) {
	return p.all, p.first, p.next, closeBrace, emptyObject
}

func (p *Projector) parseFields(value []byte) error {
	it, ok := jsonscan.Elements(value)
	if !ok {
		return errors.New("project: config: fields must be an array of strings")
	}
	p.all = false
	for {
		_, elem, st := it.Next()
		if st == jsonscan.End {
			return nil
		}
		if st == jsonscan.Malformed || jsonscan.KindOf(elem) != jsonscan.String {
			return errors.New("project: config: fields must be an array of strings")
		}
		name := jsonscan.AppendUnquote(nil, elem)
		for _, f := range p.fields {
			if string(f) == string(name) {
				return fmt.Errorf("project: config: field %s is listed twice", elem)
			}
		}
		prefix := append(jsonscan.AppendQuote(nil, name), ':')
		p.fields = append(p.fields, name)
		p.prefixes = append(p.prefixes, prefix)
		p.first = append(p.first, append([]byte{'{'}, prefix...))
		p.next = append(p.next, append([]byte{','}, prefix...))
		p.spans = append(p.spans, nil)
	}
}

func (p *Projector) parseWhere(value []byte) error {
	it, ok := jsonscan.Objects(value)
	if !ok {
		return errors.New("project: config: where must be an object")
	}
	var field, op, operand []byte
	for {
		key, v, st := it.Next()
		if st == jsonscan.Malformed {
			return errors.New("project: config: where must be an object")
		}
		if st == jsonscan.End {
			break
		}
		switch {
		case jsonscan.Equal(key, []byte("field")) && field == nil:
			field = v
		case jsonscan.Equal(key, []byte("op")) && op == nil:
			op = v
		case jsonscan.Equal(key, []byte("value")) && operand == nil:
			operand = v
		default:
			return fmt.Errorf("project: config: where: unknown or repeated key %s", key)
		}
	}
	if jsonscan.KindOf(field) != jsonscan.String {
		return errors.New("project: config: where.field must be a string")
	}
	p.where = jsonscan.AppendUnquote(nil, field)
	if jsonscan.KindOf(op) != jsonscan.String {
		return errors.New("project: config: where.op must be a string")
	}
	switch {
	case jsonscan.Equal(op, []byte("==")):
		p.op = OpEq
	case jsonscan.Equal(op, []byte("!=")):
		p.op = OpNe
	case jsonscan.Equal(op, []byte("<")):
		p.op = OpLt
	case jsonscan.Equal(op, []byte("<=")):
		p.op = OpLe
	case jsonscan.Equal(op, []byte(">")):
		p.op = OpGt
	case jsonscan.Equal(op, []byte(">=")):
		p.op = OpGe
	case jsonscan.Equal(op, []byte("exists")):
		p.op = OpExists
	default:
		return fmt.Errorf("project: config: where.op %s is not one of ==, !=, <, <=, >, >=, exists", op)
	}
	if p.op == OpExists {
		if operand != nil {
			return errors.New("project: config: where.value is not allowed with exists")
		}
		return nil
	}
	switch jsonscan.KindOf(operand) {
	case jsonscan.Number:
		p.numeric = true
		p.number, _ = jsonscan.ParseNumber(operand)
	case jsonscan.String:
		if p.op != OpEq && p.op != OpNe {
			return errors.New("project: config: strings compare only with == and !=")
		}
		p.text = jsonscan.AppendUnquote(nil, operand)
	default:
		return errors.New("project: config: where.value must be a number or a string")
	}
	return nil
}

// Apply reports whether the record with this value is kept and returns its
// new value: dst with the projection appended, or, when the configuration
// has no "fields", value itself (the caller copies it anyway, so copying it
// here would be wasted). When the record is dropped, dst is returned
// unchanged. value is untrusted: any bytes are handled without panicking.
func (p *Projector) Apply(dst, value []byte) (out []byte, keep bool) {
	it, ok := jsonscan.Objects(value)
	if !ok {
		return dst, false
	}
	for i := range p.spans {
		p.spans[i] = nil
	}
	var cond []byte
	for {
		key, v, st := it.Next()
		if st == jsonscan.Malformed {
			return dst, false
		}
		if st == jsonscan.End {
			break
		}
		if p.op != OpNone && cond == nil && jsonscan.Equal(key, p.where) {
			cond = v
		}
		for i, f := range p.fields {
			if p.spans[i] == nil && jsonscan.Equal(key, f) {
				p.spans[i] = v
				break // field names are distinct: no other can match
			}
		}
	}
	return p.project(dst, value, cond, p.spans)
}

// ApplySpans is Apply on what the host found in value instead of a scan:
// valid is the record's status and spans the values of Paths, nil when
// absent (see the package documentation). It gives the same result as
// Apply(dst, value).
func (p *Projector) ApplySpans(dst, value []byte, valid bool, spans [][]byte) (out []byte, keep bool) {
	if !valid {
		return dst, false
	}
	var cond []byte
	if p.op != OpNone {
		cond = spans[p.whereAt]
	}
	return p.project(dst, value, cond, spans[:len(p.fields)])
}

// project is the end of Apply and ApplySpans, once the value is known to
// be an object: it filters on the where field's value cond and appends the
// fields' values spans (nil when missing) to dst.
func (p *Projector) project(dst, value, cond []byte, spans [][]byte) (out []byte, keep bool) {
	if p.op != OpNone && !p.match(cond) {
		return dst, false
	}
	if p.all {
		return value, true
	}
	dst = append(dst, '{')
	n := 0
	for i, v := range spans {
		if v == nil {
			continue
		}
		if n > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, p.prefixes[i]...)
		dst = append(dst, v...)
		n++
	}
	return append(dst, '}'), true
}

// match evaluates the where clause on the where field's raw value (nil when
// the field is missing).
func (p *Projector) match(v []byte) bool {
	if v == nil {
		return false
	}
	if p.op == OpExists {
		return true
	}
	if !p.numeric {
		if jsonscan.KindOf(v) != jsonscan.String {
			return false
		}
		return jsonscan.Equal(v, p.text) == (p.op == OpEq)
	}
	if jsonscan.KindOf(v) != jsonscan.Number {
		return false
	}
	x, ok := jsonscan.ParseNumber(v)
	if !ok {
		return false
	}
	return p.compare(x)
}

// compare evaluates a where clause that compares numbers on x; NaN (no
// number) never passes.
func (p *Projector) compare(x float64) bool {
	if x != x {
		return false
	}
	switch p.op {
	case OpEq:
		return x == p.number
	case OpNe:
		return x != p.number
	case OpLt:
		return x < p.number
	case OpLe:
		return x <= p.number
	case OpGt:
		return x > p.number
	case OpGe:
		return x >= p.number
	}
	return false
}
