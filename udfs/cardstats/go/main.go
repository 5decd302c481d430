// Command cardstats is the "card-stats" example aggregate as a Go Wasm
// guest: an aggregate module (ABI version 3) for a window node that sums
// up each window's card transactions (see package stats for the result
// and the accumulator). It keeps no state of its own: the window operator
// stores the accumulators.
//
// Build it with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o card-stats-go.wasm ./udfs/cardstats/go
package main

import (
	eddy "github.com/eddy-stream/eddy/sdk/go"
	"github.com/eddy-stream/eddy/sdk/go/aggregate"
	"github.com/eddy-stream/eddy/udfs/cardstats/stats"
)

type cardStats struct {
	scratch []byte // reused: the transaction's unescaped country
}

func (a *cardStats) Open(config []byte) error { return stats.Parse(config) }

func (a *cardStats) Create(dst []byte) []byte { return stats.AppendEmpty(dst) }

func (a *cardStats) Add(dst, acc []byte, r *eddy.Record) ([]byte, error) {
	out, scratch, err := stats.AddValue(dst, acc, r.Value, a.scratch)
	a.scratch = scratch
	return out, err
}

func (a *cardStats) Merge(dst, x, y []byte) ([]byte, error) { return stats.Merge(dst, x, y) }

func (a *cardStats) Result(dst, acc []byte) ([]byte, error) { return stats.AppendResult(dst, acc) }

func init() { aggregate.Register(&cardStats{}) }

// main never runs in a c-shared module; the host calls the exports instead.
func main() {}
