// Command project is the "project" example operator as a Go Wasm guest: a
// JSON field projector and filter (see package projection for the
// configuration and the exact rules).
//
// When the configuration names fields or a where clause, it declares them
// (package fields: ABI version 6's spans and version 7's number paths),
// filters on the number the host parsed and emits the output value as
// parts (the record's spans and its configuration's member names) that
// the host gathers, without scanning or copying anything; otherwise it
// has nothing to declare and scans each value with Apply.
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
	p       *projection.Projector
	spans   [][]byte // the current record's spans, one per declared span path; nil: scan instead
	numbers bool     // the where field is a number path, row entry len(spans)
	parts   [][]byte // reused for every output value's parts
	out     []byte   // reused for every output value Apply builds: Emit copies it
}

func (o *projector) Open(config []byte) error {
	p, err := projection.Parse(config)
	if err != nil {
		return err
	}
	o.p = p
	if spans, numbers := p.Declared(); len(spans)+len(numbers) > 0 {
		if err := fields.DeclareWithNumbers(spans, numbers); err != nil {
			return err
		}
		o.spans = make([][]byte, len(spans))
		o.numbers = len(numbers) > 0
		o.parts = make([][]byte, 0, 2*len(spans)+2)
	}
	return nil
}

func (o *projector) Process(r *eddy.Record) error {
	if o.spans == nil {
		out, keep := o.p.Apply(o.out[:0], r.Value)
		o.out = out
		if keep {
			eddy.Emit(eddy.Record{Key: r.Key, Value: out, Timestamp: r.Timestamp, Headers: r.Headers})
		}
		return nil
	}
	valid := fields.Spans(o.spans)
	x := math.NaN()
	if o.numbers {
		x, _ = fields.Number(len(o.spans))
	}
	// The parts are the record's spans and the projector's prefixes: both
	// outlive Process, as EmitParts needs.
	parts, keep := o.p.ApplyParts(o.parts[:0], r.Value, valid, o.spans, x)
	if keep {
		fields.EmitParts(r, parts...)
	}
	return nil
}

func (o *projector) Close() error { return nil }

func init() { eddy.Register(&projector{}) }

// main never runs in a c-shared module; the host calls the exports instead.
func main() {}
