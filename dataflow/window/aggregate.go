package window

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"github.com/eddy-stream/eddy/abi/jsonscan"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

type aggKind uint8

const (
	aggCount aggKind = iota
	aggSum
	aggMin
	aggMax
	aggAvg
)

var aggKinds = map[string]aggKind{
	jobspec.AggCount: aggCount,
	jobspec.AggSum:   aggSum,
	jobspec.AggMin:   aggMin,
	jobspec.AggMax:   aggMax,
	jobspec.AggAvg:   aggAvg,
}

// aggregate is one built-in aggregate of a node.
type aggregate struct {
	kind  aggKind
	field int    // index into aggregates.fields; -1 for count
	label []byte // `,"name":`, ready to append to a result
}

// aggregates is the parsed aggregate list of a node: the aggregates, the
// distinct fields they read (each looked up once per record, however many
// aggregates and windows use it) and the scratch values of the current
// record.
type aggregates struct {
	list   []aggregate
	fields [][]byte
	// Values of the current record's fields; ok false when absent or not
	// a number.
	val []float64
	ok  []bool
	// cur is the record being added (read sets it).
	cur *stream.Record

	// At most one of udf and apply is set, and then list is empty: a Wasm
	// aggregate folds records into an accumulator of its own, a window
	// function is given all of a window's elements (wasm.go).
	udf   *udfAggregate
	apply *windowFunction
}

func parseAggregates(builtins []string) (*aggregates, error) {
	type parsed struct{ kind, field string }
	ps := make([]parsed, 0, len(builtins))
	kindUses := map[string]int{}
	seen := map[parsed]string{}
	for _, b := range builtins {
		kind, field, err := jobspec.ParseBuiltin(b)
		if err != nil {
			return nil, err
		}
		p := parsed{kind, field}
		if prev, dup := seen[p]; dup {
			return nil, fmt.Errorf("aggregate %q is listed twice (also as %q)", b, prev)
		}
		seen[p] = b
		kindUses[kind]++
		ps = append(ps, p)
	}
	a := &aggregates{}
	fieldIdx := map[string]int{}
	names := map[string]bool{"key": true, "window_start": true, "window_end": true}
	for _, p := range ps {
		ag := aggregate{kind: aggKinds[p.kind], field: -1}
		if p.field != "" {
			i, ok := fieldIdx[p.field]
			if !ok {
				i = len(a.fields)
				fieldIdx[p.field] = i
				a.fields = append(a.fields, []byte(p.field))
			}
			ag.field = i
		}
		name := p.kind
		if kindUses[p.kind] > 1 {
			name = p.kind + "_" + p.field
		}
		if names[name] {
			return nil, fmt.Errorf("aggregate %s(%s): its result name %q is already used", p.kind, p.field, name)
		}
		names[name] = true
		ag.label = append(jsonscan.AppendQuote([]byte{','}, []byte(name)), ':')
		a.list = append(a.list, ag)
	}
	a.val = make([]float64, len(a.fields))
	a.ok = make([]bool, len(a.fields))
	return a, nil
}

// read looks up the fields of a record's value. jsonscan rather than
// encoding/json: this runs once per record and must not allocate.
func (a *aggregates) read(r *stream.Record) {
	a.cur = r
	for i, f := range a.fields {
		raw, st := jsonscan.Lookup(r.Value, f)
		ok := st == jsonscan.Field && jsonscan.KindOf(raw) == jsonscan.Number
		var x float64
		if ok {
			x, ok = jsonscan.ParseNumber(raw)
		}
		a.val[i], a.ok[i] = x, ok
	}
}

// slot is the running state of one non-count aggregate: how many numbers
// it saw and their sum (sum, avg), minimum or maximum.
type slot struct {
	n uint64
	v float64
}

// accum is the accumulator of one window pane. minTs and maxTs (the span
// of event time seen) are kept for global windows only, which report them
// as their bounds. slots has one entry per aggregate; count's is unused.
// blob is a Wasm aggregate's accumulator, when hasBlob; without, the
// accumulator is the module's empty one (eddy_agg_create's), which is not
// stored.
type accum struct {
	count        uint64
	minTs, maxTs int64
	slots        []slot
	blob         []byte
	hasBlob      bool
}

func (a *accum) reset() {
	a.count = 0
	a.minTs, a.maxTs = math.MaxInt64, math.MinInt64
	clear(a.slots)
	a.blob, a.hasBlob = a.blob[:0], false
}

// add folds in the current record (the one aggs.read has read).
func (a *accum) add(aggs *aggregates, ts int64) error {
	a.note(ts)
	if aggs.udf != nil {
		return aggs.udf.add(a, aggs.cur)
	}
	for i := range aggs.list {
		ag := &aggs.list[i]
		if ag.field < 0 || !aggs.ok[ag.field] {
			continue
		}
		x := aggs.val[ag.field]
		s := &a.slots[i]
		switch ag.kind {
		case aggSum, aggAvg:
			s.v += x
		case aggMin:
			if s.n == 0 || x < s.v {
				s.v = x
			}
		case aggMax:
			if s.n == 0 || x > s.v {
				s.v = x
			}
		}
		s.n++
	}
	return nil
}

// note counts a record at ts, which is all add does of it besides the
// aggregates.
func (a *accum) note(ts int64) {
	a.count++
	a.minTs, a.maxTs = min(a.minTs, ts), max(a.maxTs, ts)
}

// merge folds b into a: every built-in is mergeable, which is what session
// windows need, and so is a Wasm aggregate (eddy_agg_merge).
func (a *accum) merge(aggs *aggregates, b *accum) error {
	a.count += b.count
	a.minTs, a.maxTs = min(a.minTs, b.minTs), max(a.maxTs, b.maxTs)
	if aggs.udf != nil {
		return aggs.udf.merge(a, b)
	}
	for i := range aggs.list {
		s, o := &a.slots[i], &b.slots[i]
		if o.n == 0 {
			continue
		}
		switch aggs.list[i].kind {
		case aggSum, aggAvg:
			s.v += o.v
		case aggMin:
			if s.n == 0 || o.v < s.v {
				s.v = o.v
			}
		case aggMax:
			if s.n == 0 || o.v > s.v {
				s.v = o.v
			}
		}
		s.n += o.n
	}
	return nil
}

// The encoding of an accumulator in state: uvarint count, for global
// windows zigzag-varint minTs and maxTs, then per non-count aggregate a
// uvarint n followed, when n > 0, by the value as 8 little-endian bytes;
// with a Wasm aggregate, a uvarint 0 for the empty accumulator or its
// length + 1 followed by its bytes. It is self-delimiting, so a session
// list can concatenate several.

func (a *accum) encode(dst []byte, aggs *aggregates, spans bool) []byte {
	dst = binary.AppendUvarint(dst, a.count)
	if spans {
		dst = binary.AppendVarint(dst, a.minTs)
		dst = binary.AppendVarint(dst, a.maxTs)
	}
	for i := range aggs.list {
		if aggs.list[i].kind == aggCount {
			continue
		}
		s := &a.slots[i]
		dst = binary.AppendUvarint(dst, s.n)
		if s.n > 0 {
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(s.v))
		}
	}
	if aggs.udf != nil {
		if !a.hasBlob {
			return append(dst, 0)
		}
		dst = binary.AppendUvarint(dst, uint64(len(a.blob))+1)
		dst = append(dst, a.blob...)
	}
	return dst
}

// decode reads an accumulator written by encode and returns the rest of b.
func (a *accum) decode(b []byte, aggs *aggregates, spans bool) ([]byte, error) {
	a.reset()
	var n int
	if a.count, n = binary.Uvarint(b); n <= 0 {
		return nil, errCorrupt
	}
	b = b[n:]
	if spans {
		if a.minTs, n = binary.Varint(b); n <= 0 {
			return nil, errCorrupt
		}
		b = b[n:]
		if a.maxTs, n = binary.Varint(b); n <= 0 {
			return nil, errCorrupt
		}
		b = b[n:]
	}
	for i := range aggs.list {
		if aggs.list[i].kind == aggCount {
			continue
		}
		s := &a.slots[i]
		if s.n, n = binary.Uvarint(b); n <= 0 {
			return nil, errCorrupt
		}
		b = b[n:]
		if s.n > 0 {
			if len(b) < 8 {
				return nil, errCorrupt
			}
			s.v = math.Float64frombits(binary.LittleEndian.Uint64(b))
			b = b[8:]
		}
	}
	if aggs.udf != nil {
		l, n := binary.Uvarint(b)
		if n <= 0 || l > uint64(len(b)-n)+1 {
			return nil, errCorrupt
		}
		b = b[n:]
		if l > 0 {
			a.blob, a.hasBlob = append(a.blob[:0], b[:l-1]...), true
			b = b[l-1:]
		}
	}
	return b, nil
}

// appendResult appends the JSON result of a window.
func appendResult(dst, key []byte, start, end int64, a *accum, aggs *aggregates) ([]byte, error) {
	dst = append(dst, `{"key":`...)
	dst = jsonscan.AppendQuote(dst, key)
	dst = append(dst, `,"window_start":`...)
	dst = strconv.AppendInt(dst, start, 10)
	dst = append(dst, `,"window_end":`...)
	dst = strconv.AppendInt(dst, end, 10)
	for i := range aggs.list {
		ag := &aggs.list[i]
		dst = append(dst, ag.label...)
		s := &a.slots[i]
		switch {
		case ag.kind == aggCount:
			dst = strconv.AppendUint(dst, a.count, 10)
		case ag.kind == aggSum:
			dst = appendNumber(dst, s.v)
		case s.n == 0:
			dst = append(dst, "null"...)
		case ag.kind == aggAvg:
			dst = appendNumber(dst, s.v/float64(s.n))
		default:
			dst = appendNumber(dst, s.v)
		}
	}
	if aggs.udf != nil {
		var err error
		if dst, err = aggs.udf.appendResult(dst, key, end-1, a); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendNumber writes x as a JSON number; JSON has no infinities or NaN, so
// those become null.
func appendNumber(dst []byte, x float64) []byte {
	if math.IsInf(x, 0) || math.IsNaN(x) {
		return append(dst, "null"...)
	}
	return strconv.AppendFloat(dst, x, 'f', -1, 64)
}
