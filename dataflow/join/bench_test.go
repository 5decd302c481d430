package join_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

// BenchmarkIntervalJoin is the throughput of the interval join alone, in
// the shape of Nexmark's bid ⋈ auction: 1,000 keys, a record every 10ms of
// event time alternating between the sides, in order, the watermark 5s
// behind after each batch of 256, interval [-5s, +10s]. Each key gets a
// record of each side every 20s, so a record joins about one of the other
// side; cleanup timers are included. It starts from the steady state.
func BenchmarkIntervalJoin(b *testing.B) {
	benchJoin(b, intervalNode(-5_000, 10_000, true, true))
}

// BenchmarkWindowJoin is BenchmarkIntervalJoin's input through a tumbling
// window join of 10s: each window of a key holds a record or so of each
// side, joined and cleared when it fires.
func BenchmarkWindowJoin(b *testing.B) {
	benchJoin(b, windowNode(10_000, 10_000))
}

func benchJoin(b *testing.B, node *jobspec.Node) {
	const (
		keys      = 1_000
		batchSize = 256
		stepMs    = 10
		ooo       = 5_000
	)
	keyNames := make([][]byte, keys)
	values := make([][]byte, keys)
	for i := range keyNames {
		keyNames[i] = fmt.Appendf(nil, "auction-%05d", i)
		values[i] = fmt.Appendf(nil, `{"auction":"auction-%05d","bidder":%d,"price":%d}`, i, i*31, 100+i%900)
	}
	for _, bk := range backends {
		b.Run(bk.name, func(b *testing.B) {
			h := newHarness(b, node, openStore(b, bk.open(b), b.Name()))
			ctx := context.Background()
			ins := [2]*stream.Batch{stream.NewBatch(batchSize), stream.NewBatch(batchSize)}
			out := stream.NewBatch(1024)
			ts, n, joined := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), 0, 0
			batch := func() {
				ins[0].Reset()
				ins[1].Reset()
				for range batchSize {
					k := (n / 2 * 7919) % keys
					ins[n%2].Add(keyNames[k], values[k], ts)
					n++
					ts += stepMs
				}
				out.Reset()
				for side, in := range ins {
					if err := h.op.ProcessInput(ctx, side, in, out); err != nil {
						b.Fatal(err)
					}
				}
				if err := h.op.ProcessWatermark(ctx, ts-ooo-1, out); err != nil {
					b.Fatal(err)
				}
				joined += out.Len()
			}
			for ts0 := ts; ts < ts0+60_000; {
				batch()
			}
			n0, joined0 := n, joined
			b.ReportAllocs()
			start := time.Now()
			for b.Loop() {
				batch()
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(n-n0)/elapsed.Seconds(), "records/s")
			b.ReportMetric(float64(joined-joined0)/elapsed.Seconds(), "joined/s")
			if joined == joined0 {
				b.Fatal("nothing joined")
			}
		})
	}
}
