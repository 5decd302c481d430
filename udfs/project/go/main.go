// Command project is the "project" example operator as a Go Wasm guest: a
// JSON field projector and filter (see package projection for the
// configuration and the exact rules).
//
// When the configuration names fields or a where clause, it declares them
// (package fields, ABI version 6) and projects the spans the host found,
// without scanning the value; otherwise it has nothing to declare and
// scans each value with Apply.
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o project-go.wasm ./udfs/project/go
package main

import (
	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/fields"
	"github.com/eddy-stream/eddy/udfs/project/projection"
)

type projector struct {
	p     *projection.Projector
	spans [][]byte // the current record's spans, one per declared path; nil: scan instead
	out   []byte   // reused for every output value: Emit copies it
}

func (o *projector) Open(config []byte) error {
	p, err := projection.Parse(config)
	if err != nil {
		return err
	}
	o.p = p
	if paths := p.Paths(); len(paths) > 0 {
		if err := fields.Declare(paths...); err != nil {
			return err
		}
		o.spans = make([][]byte, len(paths))
	}
	return nil
}

func (o *projector) Process(r *eddy.Record) error {
	var out []byte
	var keep bool
	if o.spans != nil {
		out, keep = o.p.ApplySpans(o.out[:0], r.Value, fields.Spans(o.spans), o.spans)
	} else {
		out, keep = o.p.Apply(o.out[:0], r.Value)
	}
	o.out = out
	if keep {
		eddy.Emit(eddy.Record{Key: r.Key, Value: out, Timestamp: r.Timestamp, Headers: r.Headers})
	}
	return nil
}

func (o *projector) Close() error { return nil }

func init() { eddy.Register(&projector{}) }

// main never runs in a c-shared module; the host calls the exports instead.
func main() {}
