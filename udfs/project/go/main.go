// Command project is the "project" example operator as a Go Wasm guest: a
// JSON field projector and filter (see package projection for the
// configuration and the exact rules).
//
// When the configuration names fields or a where clause, it declares them
// (package fields: ABI version 6's spans and version 7's number paths),
// filters on the number the host parsed and emits the output value as a
// part list (the record's spans and its configuration's member names)
// that the host gathers, without scanning or copying anything; otherwise
// it has nothing to declare and scans each value with Apply.
//
// The part list is built from fields.Parts, not slices: the constant
// pieces are made Parts once, in Open, and SpanParts gives each span as
// a Part, so a record's output is a handful of 8-byte words (in Go's Wasm
// backend every slice written costs write barriers and bounds checks).
// What goes where is package projection's (Filter, Pieces), as in its
// ApplyParts.
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o project-go.wasm ./udfs/project/go
package main

import (
	"math"

	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/fields"
	"github.com/eddy-stream/eddy/udfs/project/projection"
)

type projector struct {
	p      *projection.Projector
	out    []byte // reused for every output value Apply builds: Emit copies it
	fields bool   // declared fields: the part list path below

	spans   []fields.Part // the current record's spans, one per declared span path
	numbers bool          // the where field is a number path, row entry len(spans)
	where   int           // the where field's span for Filter, or -1
	compare bool          // the where clause compares numbers: Compare, not Filter
	whole   bool          // no "fields": the value goes out whole

	// The pieces of an output value (projection.Pieces) as Parts, and the
	// list reused for every output value.
	nfields        int
	first, next    []fields.Part
	closing, empty fields.Part
	list           []fields.Part
}

func (o *projector) Open(config []byte) error {
	p, err := projection.Parse(config)
	if err != nil {
		return err
	}
	o.p = p
	spans, numbers := p.Declared()
	if len(spans)+len(numbers) == 0 {
		return nil
	}
	if err := fields.DeclareWithNumbers(spans, numbers); err != nil {
		return err
	}
	o.fields = true
	o.spans = make([]fields.Part, len(spans))
	o.numbers = len(numbers) > 0
	o.where = p.WhereSpan()
	o.compare = p.ComparesNumbers()
	whole, first, next, closing, empty := p.Pieces()
	o.whole, o.nfields = whole, len(first)
	for i := range first {
		o.first = append(o.first, fields.PartOf(first[i]))
		o.next = append(o.next, fields.PartOf(next[i]))
	}
	o.closing, o.empty = fields.PartOf(closing), fields.PartOf(empty)
	o.list = make([]fields.Part, 0, 2*len(first)+1)
	return nil
}

func (o *projector) Process(r *eddy.Record) error {
	if !o.fields {
		out, keep := o.p.Apply(o.out[:0], r.Value)
		o.out = out
		if keep {
			eddy.Emit(eddy.Record{Key: r.Key, Value: out, Timestamp: r.Timestamp, Headers: r.Headers})
		}
		return nil
	}
	if !fields.SpanParts(o.spans) {
		return nil // not a JSON object
	}
	x := math.NaN()
	if o.numbers {
		x, _ = fields.Number(len(o.spans))
	}
	if o.compare {
		if !o.p.Compare(x) {
			return nil
		}
	} else {
		var where []byte
		if o.where >= 0 {
			where, _ = fields.Get(o.where)
		}
		if !o.p.Filter(where, x) {
			return nil
		}
	}
	list := o.list[:0]
	if o.whole {
		list = append(list, fields.PartOf(r.Value))
	} else {
		// Both kinds of part outlive Process, as EmitPartList needs: the
		// spans are the input batch's bytes, the pieces the projector's.
		prefix := o.first
		for i, s := range o.spans[:o.nfields] {
			if s == fields.NoPart {
				continue
			}
			list = append(list, prefix[i], s)
			prefix = o.next
		}
		if len(list) == 0 {
			list = append(list, o.empty)
		} else {
			list = append(list, o.closing)
		}
	}
	o.list = list
	fields.EmitPartList(r, list)
	return nil
}

func (o *projector) Close() error { return nil }

func init() { eddy.Register(&projector{}) }

// main never runs in a c-shared module; the host calls the exports instead.
func main() {}
