package dataflow_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/internal/testkit"
)

func newEngine(t *testing.T, cfg host.Config) *host.Engine {
	t.Helper()
	// A cache shared by the test runs: Go-built modules take seconds to compile cold.
	cfg.CacheDir = filepath.Join(os.TempDir(), "eddy-test-wasm-cache")
	e, err := host.NewEngine(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

func parse(t *testing.T, text string) *jobspec.Spec {
	t.Helper()
	root, _ := filepath.Abs("..")
	s, err := jobspec.Parse([]byte(strings.ReplaceAll(text, "$ROOT", root)), "")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestHostileJobDoesNotAffectOthers runs a good job and hostile ones in one
// process, on one engine, at the same time: each hostile job fails with its
// own clear error, the good one completes with every record.
func TestHostileJobDoesNotAffectOthers(t *testing.T) {
	cfg := host.DefaultConfig()
	cfg.CallTimeout = 5 * time.Second // generous: the grow bomb must reach its memory limit first, even on a loaded machine
	cfg.MemoryLimit = 16 << 20
	engine := newEngine(t, cfg)
	const goodSpec = `name: good
parallelism: 2
nodes:
  - name: gen
    source: {generator: {kind: transactions, count: 50000, seed: 3}}
  - name: proj
    input: gen
    wasm: {module: $ROOT/udfs/build/project-go.wasm, config: {fields: [card]}}
  - name: out
    input: proj
    sink: {discard: {}}
`
	hostile := map[string]error{
		"loop.wasm":      host.ErrDeadline,
		"trap.wasm":      host.ErrTrap,
		"oob_emit.wasm":  host.ErrBadPointer,
		"grow_bomb.wasm": host.ErrMemoryLimit,
		"fail.wasm":      host.ErrOperatorFailed,
	}
	var wg sync.WaitGroup
	errs := map[string]error{}
	var mu sync.Mutex
	run := func(name, text string) {
		defer wg.Done()
		job, err := dataflow.NewJob(context.Background(), parse(t, text), dataflow.Options{Connectors: connectors.Registry{}, Engine: engine})
		if err == nil {
			var sum *dataflow.Summary
			sum, err = job.Run(context.Background())
			if err == nil && name == "good" && sum.Nodes[2].In != 50000 {
				err = fmt.Errorf("good job: sink got %d records, want 50000", sum.Nodes[2].In)
			}
		}
		mu.Lock()
		errs[name] = err
		mu.Unlock()
	}
	wg.Add(1)
	go run("good", goodSpec)
	for mod := range hostile {
		wg.Add(1)
		go run(mod, strings.Replace(strings.Replace(strings.Replace(goodSpec, "name: good", "name: hostile-"+mod, 1), "project-go.wasm", "../host/testdata/"+mod, 1), "udfs/build/../", "", 1))
	}
	wg.Wait()
	if errs["good"] != nil {
		t.Fatalf("good job: %v", errs["good"])
	}
	for mod, want := range hostile {
		err := errs[mod]
		if !errors.Is(err, want) || !errors.Is(err, dataflow.ErrJobFailed) {
			t.Errorf("%s: err = %v, want %v", mod, err, want)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error is not one line: %q", mod, err)
		}
	}
}

// slowSink sleeps per batch and records how far the source ran ahead.
type slowSink struct {
	produced *atomic.Int64
	consumed *atomic.Int64
	maxAhead *atomic.Int64
}

func (s *slowSink) Open(context.Context, stream.TaskInfo) error { return nil }
func (s *slowSink) Write(_ context.Context, b *stream.Batch) error {
	time.Sleep(2 * time.Millisecond)
	c := s.consumed.Add(int64(b.Len()))
	if ahead := s.produced.Load() - c; ahead > s.maxAhead.Load() {
		s.maxAhead.Store(ahead)
	}
	return nil
}
func (s *slowSink) Finish(context.Context) error { return nil }
func (s *slowSink) Close() error                 { return nil }

// countingSource produces n sequence records as fast as it is allowed to.
type countingSource struct {
	n, next  int64
	produced *atomic.Int64
}

func (c *countingSource) Open(context.Context, stream.TaskInfo) error { return nil }
func (c *countingSource) Next(_ context.Context, b *stream.Batch, max int) error {
	for i := 0; i < max && c.next < c.n; i++ {
		b.Add(nil, []byte(fmt.Sprintf(`{"seq":%d}`, c.next)), c.next)
		c.next++
	}
	c.produced.Add(int64(b.Len()))
	if c.next == c.n {
		return io.EOF
	}
	return nil
}
func (c *countingSource) Close() error { return nil }

type testConnectors struct {
	src  func() stream.Source
	sink func() stream.Sink
}

func (tc testConnectors) NewSource(*jobspec.SourceSpec, string) (stream.Source, error) {
	return tc.src(), nil
}
func (tc testConnectors) NewSink(*jobspec.SinkSpec, string) (stream.Sink, error) {
	return tc.sink(), nil
}

// TestBackpressure: a slow sink behind a queue holds the source back to a
// bounded distance, and every record arrives.
func TestBackpressure(t *testing.T) {
	var produced, consumed, maxAhead atomic.Int64
	const n = 40000
	spec := parse(t, `name: bp
batch_size: 100
nodes:
  - name: src
    source: {generator: {kind: sequence}}
  - name: proj
    input: src
    parallelism: 2
    wasm: {module: $ROOT/udfs/build/project-c.wasm}
  - name: out
    input: proj
    parallelism: 1
    sink: {discard: {}}
`)
	job, err := dataflow.NewJob(context.Background(), spec, dataflow.Options{
		Connectors:    testConnectors{src: func() stream.Source { return &countingSource{n: n, produced: &produced} }, sink: func() stream.Sink { return &slowSink{&produced, &consumed, &maxAhead} }},
		Engine:        newEngine(t, host.DefaultConfig()),
		QueueCapacity: 4,
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if consumed.Load() != n {
		t.Fatalf("sink got %d records, want %d", consumed.Load(), n)
	}
	// Two queues of 4 batches of 100, plus a batch in hand per task.
	const bound = (4*2 + 4 + 4) * 100
	if maxAhead.Load() > bound {
		t.Fatalf("source ran %d records ahead of the sink; queues bound it to %d", maxAhead.Load(), bound)
	}
	if maxAhead.Load() < 400 {
		t.Fatalf("source was only %d records ahead: the test did not exercise the queues", maxAhead.Load())
	}
}

// TestCancelUnbounded: an unbounded job stops promptly when its context is
// cancelled and reports the records that ran.
func TestCancelUnbounded(t *testing.T) {
	spec := parse(t, `name: forever
nodes:
  - name: gen
    source: {generator: {kind: sequence, rate: 20000}}
  - name: proj
    input: gen
    wasm: {module: $ROOT/udfs/build/project-c.wasm}
  - name: out
    input: proj
    sink: {discard: {}}
`)
	job, err := dataflow.NewJob(context.Background(), spec, dataflow.Options{Connectors: connectors.Registry{}, Engine: newEngine(t, host.DefaultConfig())})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var sum *dataflow.Summary
	go func() {
		sum, err = job.Run(ctx)
		close(done)
	}()
	testkit.Eventually(t, 10*time.Second, "1000 records at the sink", func() bool { return job.Stats()[2].In >= 1000 })
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("job did not stop within 5s of cancel")
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if sum.Nodes[2].In < 1000 {
		t.Fatalf("summary says %d records reached the sink", sum.Nodes[2].In)
	}
}
