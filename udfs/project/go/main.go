// Command project is the "project" example operator as a Go Wasm guest: a
// JSON field projector and filter (see package projection for the
// configuration and the exact rules).
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o project-go.wasm ./udfs/project/go
package main

import (
	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/udfs/project/projection"
)

type projector struct {
	p   *projection.Projector
	out []byte // reused for every output value: Emit copies it
}

func (o *projector) Open(config []byte) error {
	p, err := projection.Parse(config)
	o.p = p
	return err
}

func (o *projector) Process(r *eddy.Record) error {
	out, keep := o.p.Apply(o.out[:0], r.Value)
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
