// Command topn is the "top-n" example window function as a Go Wasm guest:
// when a window fires, it emits the window's n elements with the largest
// value of a numeric field, best first (see package ranking for the
// configuration and the output). It is an ordinary operator module (ABI
// version 1) for a window node's apply.
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o top-n-go.wasm ./udfs/topn/go
package main

import (
	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/window"
	"github.com/eddy-stream/eddy/udfs/topn/ranking"
)

type topN struct {
	ranker *ranking.Ranker
	out    []byte // reused: the output value (Emit copies it)
}

func (t *topN) Open(config []byte) error {
	c, err := ranking.Parse(config)
	if err != nil {
		return err
	}
	t.ranker = ranking.New(c)
	return nil
}

func (t *topN) Apply(w window.Window, elems []eddy.Record) error {
	for rank, i := range t.ranker.Top(elems) {
		t.out = ranking.AppendOutput(t.out[:0], w.Key, w.Start, w.End, rank+1, elems[i].Value)
		eddy.EmitKV(w.Key, t.out, w.MaxTimestamp())
	}
	return nil
}

func init() { window.Register(&topN{}) }

// main never runs in a c-shared module; the host calls the exports instead.
func main() {}
