// Command counter is the "counter" example operator as a Go Wasm guest: a
// running count of records per key in keyed state (see package counting
// for the output and the state encoding). It needs a keyed node.
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o counter-go.wasm ./udfs/counter/go
package main

import (
	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/keyed"
	"github.com/eddy-stream/eddy/udfs/counter/counting"
)

type counter struct {
	count *keyed.Value
	state []byte // reused: the stored count
	out   []byte // reused: the output value (Emit copies it)
}

func (c *counter) Open(config []byte) error {
	if err := counting.Parse(config); err != nil {
		return err
	}
	c.count = keyed.ValueState(counting.StateName)
	return nil
}

func (c *counter) Process(r *eddy.Record) error {
	n, err := counting.Decode(c.count.Get())
	if err != nil {
		return err
	}
	n++
	c.state = counting.Append(c.state[:0], n)
	c.count.Put(c.state)
	c.out = counting.AppendJSON(c.out[:0], r.Key, n)
	eddy.Emit(eddy.Record{Key: r.Key, Value: c.out, Timestamp: r.Timestamp})
	return nil
}

func (c *counter) Close() error { return nil }

func init() { eddy.Register(&counter{}) }

// main never runs in a c-shared module; the host calls the exports instead.
func main() {}
