package window_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/dataflow"
)

// BenchmarkSlidingCount is the throughput of the window operator alone on
// the design's example: count over sliding windows of 10 minutes every
// minute, so each record is in 10 windows. 10,000 keys, 100 records per
// event-time second, in order, the watermark 5 s behind after each batch
// of 256; firing is included. It starts from the steady state, where panes
// open and are dropped at the same rate.
//
// Each key gets a record every 100 s, so nearly every record opens a pane
// of its own and the cost is that of opening, firing and dropping.
func BenchmarkSlidingCount(b *testing.B) { benchSlidingCount(b, 10_000) }

// BenchmarkSlidingCountHotKeys is BenchmarkSlidingCount with 100 keys: 60
// records a pane of each key, where the cost is that of the records.
func BenchmarkSlidingCountHotKeys(b *testing.B) { benchSlidingCount(b, 100) }

func benchSlidingCount(b *testing.B, keys int) {
	const (
		batchSize = 256
		stepMs    = 10
		ooo       = 5_000
	)
	keyNames := make([][]byte, keys)
	values := make([][]byte, keys)
	for i := range keyNames {
		keyNames[i] = fmt.Appendf(nil, "card-%05d", i)
		values[i] = fmt.Appendf(nil, `{"card":"card-%05d","amount":12.5}`, i)
	}
	for _, bk := range backends {
		b.Run(bk.name, func(b *testing.B) {
			h := newHarness(b, bk.open(b), windowNode(sliding(10*60_000, 60_000), "count"))
			ctx := context.Background()
			in := dataflow.NewBatch(batchSize)
			ts, n, fired := int64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()), 0, 0
			batch := func() {
				in.Reset()
				for range batchSize {
					k := (n * 7919) % keys // spread consecutive records over keys
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
