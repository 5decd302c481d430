package dataflow_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/internal/testkit"
)

// splitRec is a record of a fake split source: its split and event time,
// and a value the sink can recognise (default {}).
type splitRec struct {
	split int32
	ts    int64
	mark  string
}

// fakeSplitSource is a SplitSource of n splits whose Next returns what
// emit, which the test swaps, returns; it paces itself at one batch per
// few ms, as an unbounded source waiting for records does.
type fakeSplitSource struct {
	n    int
	mu   sync.Mutex
	emit func() []splitRec
	last []int32
}

func (s *fakeSplitSource) set(emit func() []splitRec) {
	s.mu.Lock()
	s.emit = emit
	s.mu.Unlock()
}

func (s *fakeSplitSource) Open(context.Context, stream.TaskInfo) error { return nil }
func (s *fakeSplitSource) Close() error                                { return nil }

func (s *fakeSplitSource) Next(ctx context.Context, b *stream.Batch, max int) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(3 * time.Millisecond):
	}
	s.mu.Lock()
	emit := s.emit
	s.mu.Unlock()
	s.last = s.last[:0]
	if emit == nil {
		return nil
	}
	for _, r := range emit() {
		value := "{}"
		if r.mark != "" {
			value = r.mark
		}
		b.Add(nil, []byte(value), r.ts)
		s.last = append(s.last, r.split)
	}
	return nil
}

func (s *fakeSplitSource) Splits() (int, []int32) { return s.n, s.last }

// once returns recs on its first call and the repeat after.
func once(recs []splitRec, repeat []splitRec) func() []splitRec {
	first := true
	return func() []splitRec {
		if first {
			first = false
			return recs
		}
		return repeat
	}
}

// sourcesByNode builds each source node's source from its own factory.
type sourcesByNode struct {
	spec    *jobspec.Spec
	sources map[string]stream.Source
	sink    *collectSink // what every sink node gets, when set
}

func (c sourcesByNode) NewSource(s *jobspec.SourceSpec, _ string) (stream.Source, error) {
	for _, n := range c.spec.Nodes {
		if n.Source == s {
			return c.sources[n.Name], nil
		}
	}
	return nil, errors.New("unknown source")
}

func (c sourcesByNode) NewSink(*jobspec.SinkSpec, string) (stream.Sink, error) {
	if c.sink != nil {
		return c.sink, nil
	}
	return &collectSink{mu: &sync.Mutex{}, got: new([]string)}, nil
}

// TestSplitWatermarks runs a SplitSource of two splits, a (idle_timeout
// 300ms), and a plain source b into one sink task, whose watermark is the
// lower of theirs unless a is idle: a lagging split holds a's watermark
// back, a split idle for the timeout does not, a with every split idle is
// idle downstream, and a split that produces again makes a count again at
// once, before its watermark moves.
func TestSplitWatermarks(t *testing.T) {
	const idle = 300 * time.Millisecond
	spec := parse(t, `name: splits
parallelism: 1
nodes:
  - name: a
    source: {generator: {kind: sequence}}
    event_time: {max_out_of_orderness: 0ms, idle_timeout: 300ms}
  - name: b
    source: {generator: {kind: sequence}}
    event_time: {max_out_of_orderness: 0ms}
  - name: out
    input: [a, b]
    sink: {discard: {}}
`)
	a := &fakeSplitSource{n: 2}
	b := &fakeSplitSource{n: 1}
	// b's splits never go idle (no idle_timeout): its watermark is
	// 99_999 until the test moves it.
	b.set(once([]splitRec{{0, 100_000, ""}}, nil))
	phase := time.Now()
	a.set(once([]splitRec{{0, 1000, ""}, {1, 500, ""}}, []splitRec{{0, 1000, ""}}))

	sink := &collectSink{mu: &sync.Mutex{}, got: new([]string)}
	// received waits until the sink has a record of value mark. Records and
	// watermarks of one input channel arrive in order, so out has then
	// processed everything its source sent before that record.
	received := func(mark string) {
		t.Helper()
		testkit.Eventually(t, 20*time.Second, "out to receive "+mark, func() bool {
			sink.mu.Lock()
			defer sink.mu.Unlock()
			return slices.Contains(*sink.got, ":"+mark)
		})
	}
	job, err := dataflow.NewJob(context.Background(), spec, dataflow.Options{Connectors: sourcesByNode{spec: spec, sources: map[string]stream.Source{"a": a, "b": b}, sink: sink}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := job.Run(ctx); done <- err }()
	defer func() {
		cancel()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("run: %v", err)
		}
	}()

	wm := func(task string) int64 {
		for _, st := range job.TaskStats() {
			if st.ID == task {
				return st.Watermark
			}
		}
		return math.MinInt64
	}
	ids := map[string]string{}
	for _, ts := range job.Tasks() {
		ids[ts.Chain[0]] = ts.ID
	}
	// waitWM waits for task's watermark to reach want, returning the
	// distinct values it saw on the way.
	waitWM := func(node string, want int64) []int64 {
		t.Helper()
		var seen []int64
		deadline := time.Now().Add(20 * time.Second)
		for {
			w := wm(ids[node])
			if len(seen) == 0 || seen[len(seen)-1] != w {
				seen = append(seen, w)
			}
			if w == want {
				return seen
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: watermark %d, want %d (saw %v)", node, w, want, seen)
			}
			time.Sleep(time.Millisecond)
		}
	}

	// Split 1 lags at 500: a's watermark is 499 until split 1 is idle,
	// though split 0 keeps producing at 1000.
	seen := waitWM("a", 999)
	// The split's last record came a little before phase: half the idle
	// timeout is the bound that cannot be missed by scheduling.
	if d := time.Since(phase); d < idle/2 {
		t.Fatalf("a's watermark reached 999 after %v, before split 1 was idle", d)
	}
	if !slices.Contains(seen, 499) {
		t.Fatalf("a's watermarks %v: never held at 499 by the lagging split", seen)
	}
	waitWM("out", 999)

	// Every split of a idle: a is idle, out follows b alone.
	phase = time.Now()
	a.set(nil)
	waitWM("out", 99_999)
	if d := time.Since(phase); d < idle/2 {
		t.Fatalf("out ignored a after %v, before a was idle", d)
	}

	// Split 0 produces again with records that do not move a's watermark
	// (999): a is active again at once, so b moving on cannot carry out
	// past a's records (out stays where it is: watermarks do not go back).
	a.set(func() []splitRec { return []splitRec{{0, 1000, `"a again"`}} })
	received(`"a again"`)
	b.set(once([]splitRec{{0, 300_000, ""}}, []splitRec{{0, 300_000, `"after b's watermark"`}}))
	waitWM("b", 299_999)
	received(`"after b's watermark"`)
	if w := wm(ids["out"]); w != 99_999 {
		t.Fatalf("out's watermark went to %d while a was active again at 999", w)
	}

	// Split 0 produces again, split 1 stays idle: a's watermark moves
	// on split 0 alone and a counts again at out, which b, now ahead,
	// shows: out goes from 99_999 to 199_999, min(a, b), where it would
	// jump to b's 499_999 if a were still idle (waitWM fails then, as
	// watermarks never go back).
	a.set(once(nil, []splitRec{{0, 200_000, ""}}))
	waitWM("a", 199_999)
	b.set(once([]splitRec{{0, 500_000, ""}}, nil))
	waitWM("b", 499_999)
	waitWM("out", 199_999)
}
