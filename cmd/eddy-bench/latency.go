package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

// latencyRate is the generator's rate in the latency runs: a stream slow
// enough that batches do not fill (256 records take 256 ms), so that the
// buffer timeout, not the batch size, decides when records leave.
const latencyRate = 1000

// benchLatency runs a generator at latencyRate records/s for d, once per
// buffer_timeout, and prints the latency of its records from their
// creation (when the generator's Next returned them) to their arrival at
// a sink, through one queue (a source subtask spreading over two sink
// subtasks).
func benchLatency(d time.Duration) error {
	ctx := context.Background()
	count := int64(d.Seconds() * latencyRate)
	fmt.Printf("latency: generator(sequence, %d records/s) → discard at parallelism 2 (one queue), %d records, creation → sink\n", latencyRate, count)
	for _, v := range []struct{ label, field string }{
		{fmt.Sprintf("default (%v)", jobspec.DefaultBufferTimeout), ""},
		{"buffer_timeout: 5ms", "buffer_timeout: 5ms\n"},
		{"buffer_timeout: 0", "buffer_timeout: 0\n"},
	} {
		spec, err := jobspec.Parse([]byte(fmt.Sprintf(`name: bench-latency
%snodes:
  - name: gen
    source: {generator: {kind: sequence, rate: %d, count: %d}}
  - name: out
    input: gen
    parallelism: 2
    sink: {discard: {}}
`, v.field, latencyRate, count)), "")
		if err != nil {
			return err
		}
		lc := &latencyConnectors{}
		job, err := dataflow.NewJob(ctx, spec, dataflow.Options{Connectors: lc})
		if err != nil {
			return err
		}
		if _, err := job.Run(ctx); err != nil {
			return fmt.Errorf("%s: %w", v.label, err)
		}
		lat := lc.latencies()
		if int64(len(lat)) != count {
			return fmt.Errorf("%s: the sinks got %d records, want %d", v.label, len(lat), count)
		}
		fmt.Printf("  %-22s p50 %8.2f ms   p99 %8.2f ms   max %8.2f ms\n", v.label, ms(percentile(lat, 50)), ms(percentile(lat, 99)), ms(lat[len(lat)-1]))
	}
	return nil
}

// latencyConnectors builds the registry's sources with each record's
// timestamp replaced by its creation time (ns), and sinks that record how
// long ago that was.
type latencyConnectors struct {
	connectors.Registry
	mu      sync.Mutex
	samples []time.Duration
}

func (c *latencyConnectors) NewSource(spec *jobspec.SourceSpec, dir string) (stream.Source, error) {
	src, err := c.Registry.NewSource(spec, dir)
	if err != nil {
		return nil, err
	}
	return stampingSource{src}, nil
}

func (c *latencyConnectors) NewSink(*jobspec.SinkSpec, string) (stream.Sink, error) {
	return latencySink{c}, nil
}

// latencies returns the samples, sorted.
func (c *latencyConnectors) latencies() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := slices.Clone(c.samples)
	slices.Sort(s)
	return s
}

type stampingSource struct{ stream.Source }

func (s stampingSource) Next(ctx context.Context, b *stream.Batch, limit int) error {
	from := b.Len()
	err := s.Source.Next(ctx, b, limit)
	now := time.Now().UnixNano()
	for i := from; i < b.Len(); i++ {
		b.Records[i].Timestamp = now
	}
	return err
}

type latencySink struct{ c *latencyConnectors }

func (latencySink) Open(context.Context, stream.TaskInfo) error { return nil }
func (s latencySink) Write(_ context.Context, b *stream.Batch) error {
	now := time.Now().UnixNano()
	s.c.mu.Lock()
	for i := range b.Records {
		s.c.samples = append(s.c.samples, time.Duration(now-b.Records[i].Timestamp))
	}
	s.c.mu.Unlock()
	return nil
}
func (latencySink) Finish(context.Context) error { return nil }
func (latencySink) Close() error                 { return nil }

// percentile returns the p-th percentile of sorted samples (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p+99)/100 - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
