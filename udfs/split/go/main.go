// Command split is the "split" example operator as a Go Wasm guest: one
// record per word of a text (see package splitter for the configuration and
// the exact rules).
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o split-go.wasm ./udfs/split/go
package main

import (
	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/udfs/split/splitter"
)

type split struct {
	s *splitter.Splitter
}

func (o *split) Open(config []byte) error {
	s, err := splitter.Parse(config)
	o.s = s
	return err
}

func (o *split) Process(r *eddy.Record) error {
	ts := r.Timestamp
	o.s.Split(r.Value, func(key, value []byte) { eddy.EmitKV(key, value, ts) })
	return nil
}

func (o *split) Close() error { return nil }

func init() { eddy.Register(&split{}) }

// main never runs in a c-shared module; the host calls the exports instead.
func main() {}
