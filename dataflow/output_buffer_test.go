package dataflow_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/internal/testkit"
	"github.com/eddy-stream/eddy/state"
)

// trickleSource produces one record per Next, n in all. Then it ends with
// io.EOF or, with hold set, blocks in Next until its context is done: a
// source with nothing more to read.
type trickleSource struct {
	n, next  int
	hold     bool
	produced *atomic.Int64
}

func (s *trickleSource) Open(context.Context, stream.TaskInfo) error { return nil }
func (s *trickleSource) Next(ctx context.Context, b *stream.Batch, _ int) error {
	if s.next == s.n {
		if !s.hold {
			return io.EOF
		}
		<-ctx.Done()
		return ctx.Err()
	}
	b.Add(nil, fmt.Appendf(nil, `{"seq":%d}`, s.next), int64(s.next))
	s.next++
	s.produced.Add(1)
	return nil
}
func (s *trickleSource) Close() error { return nil }

// batchRecorder collects the records and batch sizes the sinks of a test
// job got.
type batchRecorder struct {
	mu      sync.Mutex
	records int
	sizes   []int
}

func (r *batchRecorder) got() (records int, sizes []int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.records, slices.Clone(r.sizes)
}

type batchSink struct{ r *batchRecorder }

func (s batchSink) Open(context.Context, stream.TaskInfo) error { return nil }
func (s batchSink) Write(_ context.Context, b *stream.Batch) error {
	s.r.mu.Lock()
	s.r.records += b.Len()
	s.r.sizes = append(s.r.sizes, b.Len())
	s.r.mu.Unlock()
	return nil
}
func (batchSink) Finish(context.Context) error { return nil }
func (batchSink) Close() error                 { return nil }

// passOperator forwards its input.
type passOperator struct{}

func (passOperator) Open(context.Context, stream.TaskInfo) error { return nil }
func (passOperator) Process(_ context.Context, in, out *stream.Batch) error {
	out.AddRecords(in.Records)
	return nil
}
func (passOperator) Finish(context.Context, *stream.Batch) error { return nil }
func (passOperator) Close() error                                { return nil }

// A source of one subtask spreading over two sink subtasks: the source
// task's output buffers the records.
const trickleFanOut = `name: trickle
buffer_timeout: %s
nodes:
  - name: src
    source: {generator: {kind: sequence}}
  - name: out
    input: src
    parallelism: 2
    sink: {discard: {}}
`

// The same through a task between them, whose output buffers too.
const trickleThrough = `name: trickle-through
buffer_timeout: %s
nodes:
  - name: src
    source: {generator: {kind: sequence}}
  - name: pass
    input: src
    parallelism: 2
    wasm: {module: "native:pass"}
  - name: out
    input: pass
    parallelism: 1
    sink: {discard: {}}
`

func newTrickleJob(t *testing.T, text string, src func() stream.Source, r *batchRecorder) *dataflow.Job {
	t.Helper()
	job, err := dataflow.NewJob(context.Background(), parse(t, text), dataflow.Options{
		Connectors:      testConnectors{src: src, sink: func() stream.Sink { return batchSink{r} }},
		NativeOperators: map[string]func() stream.Operator{"native:pass": func() stream.Operator { return passOperator{} }},
	})
	if err != nil {
		t.Fatal(err)
	}
	return job
}

// TestBufferTimeoutFlushesLowRate: a source that produced three records,
// far from a full batch (256), and then waits in Next for more gets them
// to the sinks anyway — after buffer_timeout, from the output buffers of
// the source task while its Next blocks, of a task in between while it
// waits for input, and over an Exchange stream to another worker.
func TestBufferTimeoutFlushesLowRate(t *testing.T) {
	const n = 3
	for _, tc := range []struct {
		name   string
		spec   string
		remote bool
	}{
		{"source task", trickleFanOut, false},
		{"task in between", trickleThrough, false},
		{"to another worker", trickleFanOut, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var produced atomic.Int64
			src := func() stream.Source { return &trickleSource{n: n, hold: true, produced: &produced} }
			r := &batchRecorder{}
			text := fmt.Sprintf(tc.spec, "20ms")
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var runs []<-chan runResult
			if tc.remote {
				a, b := startWorker(t), startWorker(t)
				jobA, jobB := newTrickleJob(t, text, src, r), newTrickleJob(t, text, src, r)
				da, db := split(t, jobA.Spec(), a, b, 1, sourceOnA)
				runs = append(runs, runDeployment(ctx, jobB, db, b.ex), runDeployment(ctx, jobA, da, a.ex))
			} else {
				job := newTrickleJob(t, text, src, r)
				done := make(chan runResult, 1)
				go func() {
					sum, err := job.Run(ctx)
					done <- runResult{sum, err}
				}()
				runs = append(runs, done)
			}
			testkit.Eventually(t, 30*time.Second, "the sinks get the source's records", func() bool {
				got, _ := r.got()
				return got == n
			})
			if p := produced.Load(); p != n {
				t.Fatalf("the source produced %d records, want %d: it must still be waiting for more", p, n)
			}
			cancel()
			for i, done := range runs {
				if res := await(t, fmt.Sprintf("run %d", i), done, 10*time.Second); !errors.Is(res.err, context.Canceled) {
					t.Fatalf("run %d: err = %v, want context.Canceled", i, res.err)
				}
			}
		})
	}
}

// TestBufferTimeoutBatches: with a timeout that never passes, records
// produced one at a time reach the sinks in full batches (batch_size 4),
// the rest at the end of the stream; with 0 each goes on at once, alone.
func TestBufferTimeoutBatches(t *testing.T) {
	const n = 10
	for _, tc := range []struct {
		timeout string
		want    []int // batch sizes at the sinks, sorted
	}{
		{"1h", []int{2, 4, 4}},
		{"0", []int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
	} {
		t.Run(tc.timeout, func(t *testing.T) {
			var produced atomic.Int64
			r := &batchRecorder{}
			text := strings.Replace(fmt.Sprintf(trickleFanOut, tc.timeout), "nodes:", "batch_size: 4\nnodes:", 1)
			job := newTrickleJob(t, text, func() stream.Source { return &trickleSource{n: n, produced: &produced} }, r)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if _, err := job.Run(ctx); err != nil {
				t.Fatal(err)
			}
			records, sizes := r.got()
			slices.Sort(sizes)
			if records != n || !slices.Equal(sizes, tc.want) {
				t.Fatalf("sinks got %d records in batches of %v, want %d in %v", records, sizes, n, tc.want)
			}
		})
	}
}

// countSource produces records {"seq":0} … {"seq":n-1}, as many per Next as
// the task asks for.
type countSource struct{ n, next int }

func (s *countSource) Open(context.Context, stream.TaskInfo) error { return nil }
func (s *countSource) Next(_ context.Context, b *stream.Batch, limit int) error {
	for range limit {
		if s.next == s.n {
			return io.EOF
		}
		b.Add(nil, fmt.Appendf(nil, `{"seq":%d}`, s.next), int64(s.next))
		s.next++
	}
	return nil
}
func (s *countSource) Close() error { return nil }

// dropThirds forwards its input but every record whose timestamp is a
// multiple of 3: its output batches are never full.
type dropThirds struct{}

func (dropThirds) Open(context.Context, stream.TaskInfo) error { return nil }
func (dropThirds) Process(_ context.Context, in, out *stream.Batch) error {
	for i := range in.Records {
		if in.Records[i].Timestamp%3 != 0 {
			out.AddRecord(&in.Records[i])
		}
	}
	return nil
}
func (dropThirds) Finish(context.Context, *stream.Batch) error { return nil }
func (dropThirds) Close() error                                { return nil }

// valueSink keeps every record value and batch size it gets.
type valueSink struct {
	mu     *sync.Mutex
	values *[]string
	sizes  *[]int
}

func (s valueSink) Open(context.Context, stream.TaskInfo) error { return nil }
func (s valueSink) Write(_ context.Context, b *stream.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range b.Records {
		*s.values = append(*s.values, string(r.Value))
	}
	*s.sizes = append(*s.sizes, b.Len())
	return nil
}
func (valueSink) Finish(context.Context) error { return nil }
func (valueSink) Close() error                 { return nil }

// TestBufferTakesOverStageBatch: an operator's output batches, never full,
// wait in the output buffer of its task — the first of each buffer is
// the operator's own batch, taken over rather than copied, the next ones
// are added to it — and every record reaches the sink once, with its
// bytes, in full batches but for the last of each task.
func TestBufferTakesOverStageBatch(t *testing.T) {
	const n = 5000
	spec := parse(t, `name: take-over
batch_size: 16
buffer_timeout: 1h
nodes:
  - name: src
    source: {generator: {kind: sequence}}
  - name: drop
    input: src
    parallelism: 2
    wasm: {module: "native:drop"}
  - name: out
    input: drop
    parallelism: 1
    sink: {discard: {}}
`)
	var mu sync.Mutex
	var values []string
	var sizes []int
	job, err := dataflow.NewJob(context.Background(), spec, dataflow.Options{
		Connectors:      testConnectors{src: func() stream.Source { return &countSource{n: n} }, sink: func() stream.Sink { return valueSink{&mu, &values, &sizes} }},
		NativeOperators: map[string]func() stream.Operator{"native:drop": func() stream.Operator { return dropThirds{} }},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := job.Run(ctx); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range n {
		if i%3 != 0 {
			want = append(want, fmt.Sprintf(`{"seq":%d}`, i))
		}
	}
	slices.Sort(want)
	slices.Sort(values)
	if !slices.Equal(values, want) {
		t.Fatalf("the sink got %d values, want the %d the operator passed (first %q)", len(values), len(want), values[:min(3, len(values))])
	}
	partial := 0
	for _, s := range sizes {
		if s != 16 {
			partial++
		}
	}
	if partial > 2 {
		t.Fatalf("%d of %d batches at the sink are not full (sizes %v), want at most the last of each of the 2 tasks", partial, len(sizes), sizes)
	}
}

// keepSink keeps the batches it is given, as a sink that does not
// implement stream.InputReleaser may: the runtime must not reuse them.
type keepSink struct {
	mu   *sync.Mutex
	kept *[]*stream.Batch
}

func (s keepSink) Open(context.Context, stream.TaskInfo) error { return nil }
func (s keepSink) Write(_ context.Context, b *stream.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	*s.kept = append(*s.kept, b)
	return nil
}
func (keepSink) Finish(context.Context) error { return nil }
func (keepSink) Close() error                 { return nil }

// releasingSink is a valueSink that says it keeps nothing of a batch.
type releasingSink struct{ valueSink }

func (releasingSink) ReleasesInput() bool { return true }

// TestBatchOwnership: batches that leave a task are recycled by a
// consumer that releases them, and only by one: two jobs run side by side
// in one process over rebalance and keyed edges and a fan-out (where
// batches are copied; a forward edge chains the sink), one into a sink
// that keeps every batch it gets, the other into one that releases them
// (so batches go round the pool while the first job's are held). Every
// value the keeping sink holds at the end is still the one sent, and the
// releasing sink saw every value once: a batch reused while something
// still read it would show up as a wrong or missing value (with -tags
// invariants, recycled bytes are overwritten at once).
func TestBatchOwnership(t *testing.T) {
	const n = 20000
	edges := map[string]string{
		"rebalance": "parallelism: 2",
		"keyed":     "parallelism: 2\n    key_by: seq",
		"fan-out":   "parallelism: 1",
	}
	for name, edge := range edges {
		copies := 1
		if name == "fan-out" {
			copies = 2
		}
		t.Run(name, func(t *testing.T) {
			spec := fmt.Sprintf(`name: own
batch_size: 16
buffer_timeout: 1h
parallelism: 1
nodes:
  - name: src
    source: {generator: {kind: sequence}}
  - name: drop
    input: src
    %s
    wasm: {module: "native:drop"}
  - name: out
    input: drop
    parallelism: 1
    sink: {discard: {}}
`, edge)
			if name == "fan-out" {
				spec += "  - name: out2\n    input: drop\n    parallelism: 1\n    sink: {discard: {}}\n"
			}
			var mu sync.Mutex
			var kept []*stream.Batch
			var values []string
			var sizes []int
			sinks := []func() stream.Sink{
				func() stream.Sink { return keepSink{&mu, &kept} },
				func() stream.Sink { return releasingSink{valueSink{&mu, &values, &sizes}} },
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			backend := openBackend(t, jobspec.BackendMemory)
			errs := make(chan error, len(sinks))
			for _, sink := range sinks {
				job, err := dataflow.NewJob(ctx, parse(t, spec), dataflow.Options{
					Connectors:      testConnectors{src: func() stream.Source { return &countSource{n: n} }, sink: sink},
					NativeOperators: map[string]func() stream.Operator{"native:drop": func() stream.Operator { return dropThirds{} }},
					StateBackends:   func(string) (state.Backend, error) { return backend, nil },
				})
				if err != nil {
					t.Fatal(err)
				}
				go func() {
					_, err := job.Run(ctx)
					errs <- err
				}()
			}
			for range sinks {
				if err := <-errs; err != nil {
					t.Fatal(err)
				}
			}
			var want []string
			for i := range n {
				for range copies {
					if i%3 != 0 {
						want = append(want, fmt.Sprintf(`{"seq":%d}`, i))
					}
				}
			}
			slices.Sort(want)
			var held []string
			for _, b := range kept {
				for _, r := range b.Records {
					held = append(held, string(r.Value))
				}
			}
			for _, got := range [][]string{held, values} {
				slices.Sort(got)
				if !slices.Equal(got, want) {
					i := 0
					for i < min(len(got), len(want)) && got[i] == want[i] {
						i++
					}
					t.Fatalf("a sink holds %d values, want %d; first difference at %d: %q", len(got), len(want), i, got[i:min(i+3, len(got))])
				}
			}
		})
	}
}
