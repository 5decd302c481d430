package window_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/host"
)

// BenchmarkSlidingCount is the throughput of the window operator alone on
// the design's example: count over sliding windows of 10 minutes every
// minute, so each record is in 10 windows. 10,000 keys, 100 records per
// event-time second, in order, the watermark 5 s behind after each batch
// of 256; firing is included. It starts from the steady state, where panes
// open and are dropped at the same rate.
//
// Each key gets a record every 100 s, so nearly every record opens a pane
// of its own and the cost is that of opening, firing and dropping: a get
// and a put of the key's panes per record and per firing.
func BenchmarkSlidingCount(b *testing.B) { benchSlidingCount(b, 10_000) }

// BenchmarkSlidingCountHotKeys is BenchmarkSlidingCount with 100 keys: 60
// records a pane of each key, where the cost is that of the records.
func BenchmarkSlidingCountHotKeys(b *testing.B) { benchSlidingCount(b, 100) }

// BenchmarkSlidingWasmAggregate is BenchmarkSlidingCountHotKeys with
// records, total and largest amount and distinct countries computed by the
// Wasm aggregate udfs/card-stats (in C and in Go), against the built-ins
// count, sum(amount) and max(amount): the cost of the Wasm boundary (one
// eddy_agg_add per input batch, a group per key and pane; one
// eddy_agg_merge per pane of a firing window).
func BenchmarkSlidingWasmAggregate(b *testing.B) {
	benchWasmAggregate(b, sliding(10*60_000, 60_000), 100, nil)
}

// BenchmarkSessionWasmAggregate is BenchmarkSlidingWasmAggregate over
// session windows with a 10 s gap: 200 keys, of which half are active in
// each 30 s of event time (a record of each every second), so that every
// key has sessions of about 30 records that close and fire while the other
// half's open. Records are in order: no session merges inside a batch.
func BenchmarkSessionWasmAggregate(b *testing.B) {
	benchWasmAggregate(b, sessionGap(10_000), 200, func(n int, ts int64) int {
		half := int(ts/30_000) % 2
		return half*100 + (n*7919)%100
	})
}

// BenchmarkGlobalWasmAggregate is BenchmarkSlidingWasmAggregate over
// global windows firing every 50 records of a key, 100 keys.
func BenchmarkGlobalWasmAggregate(b *testing.B) {
	benchWasmAggregate(b, globalCount(50), 100, nil)
}

// benchWasmAggregate runs the built-ins and the card-stats modules over
// window w, with keyOf picking the key of the n-th record at ts (nil: the
// records spread over the keys).
func benchWasmAggregate(b *testing.B, w *jobspec.WindowSpec, keys int, keyOf func(n int, ts int64) int) {
	ctx := context.Background()
	e, err := host.NewEngine(ctx, host.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close(ctx)
	for _, name := range []string{"builtin", "card-stats-c", "card-stats-go"} {
		b.Run(name, func(b *testing.B) {
			node := windowNode(w, "count", "sum(amount)", "max(amount)")
			var modules map[string]*host.Module
			if name != "builtin" {
				m, err := e.Load(ctx, "../../udfs/build/"+name+".wasm")
				if err != nil {
					b.Fatal(err)
				}
				modules = map[string]*host.Module{name: m}
				node.Aggregate = &jobspec.AggregateSpec{Wasm: &jobspec.WasmSpec{Module: name}, Name: "stats"}
			}
			benchWindow(b, keys, node, modules, keyOf)
		})
	}
}

func benchSlidingCount(b *testing.B, keys int) {
	benchWindow(b, keys, windowNode(sliding(10*60_000, 60_000), "count"), nil, nil)
}

// benchWindow feeds node batches of 256 records 10 ms of event time apart,
// the watermark 5 s behind after each batch, and reports events/s from the
// steady state on. keyOf picks the key of the n-th record at ts; nil
// spreads consecutive records over the keys.
func benchWindow(b *testing.B, keys int, node *jobspec.Node, modules map[string]*host.Module, keyOf func(n int, ts int64) int) {
	if keyOf == nil {
		keyOf = func(n int, _ int64) int { return (n * 7919) % keys }
	}
	const (
		batchSize = 256
		stepMs    = 10
		ooo       = 5_000
	)
	keyNames := make([][]byte, keys)
	values := make([][]byte, keys)
	for i := range keyNames {
		keyNames[i] = fmt.Appendf(nil, "card-%05d", i)
		values[i] = fmt.Appendf(nil, `{"card":"card-%05d","country":"%s","amount":%d.%02d}`, i, []string{"DE", "FR", "NL"}[i%3], 10+i%50, i%100)
	}
	for _, bk := range backends {
		b.Run(bk.name, func(b *testing.B) {
			h := newHarnessWith(b, bk.open(b), node, modules)
			ctx := context.Background()
			in := stream.NewBatch(batchSize)
			ts, n, fired := int64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()), 0, 0
			batch := func() {
				in.Reset()
				for range batchSize {
					k := keyOf(n, ts)
					in.Add(keyNames[k], values[k], ts)
					n++
					ts += stepMs
				}
				h.out.Reset()
				if err := h.op.Process(ctx, in, h.out); err != nil {
					b.Fatal(err)
				}
				if err := h.op.ProcessWatermark(ctx, ts-ooo-1, h.out); err != nil {
					b.Fatal(err)
				}
				fired += h.out.Len()
			}
			// Warm up to the steady state, where windows fire and are
			// dropped as fast as they open: 11 minutes of event time.
			for ts0 := ts; ts < ts0+11*60_000; {
				batch()
			}
			n0, fired0 := n, fired
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				batch()
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(n-n0)/elapsed.Seconds(), "events/s")
			b.ReportMetric(float64(fired-fired0)/float64(n-n0), "results/event")
		})
	}
}
