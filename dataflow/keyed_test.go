package dataflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/dataflow/window"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/internal/testkit"
	"github.com/eddy-stream/eddy/state"
	"github.com/eddy-stream/eddy/udfs/counter/counting"
	"github.com/eddy-stream/eddy/udfs/countrychange/detector"
)

// Keyed Wasm operators end to end: generator → key_by card → the
// country-change detector (keyed state and event-time timers) and the
// counter (keyed state) → file sinks, on both state backends, checked
// against an independent replay of the same records through the
// detector's and the counter's reference logic.
//
// The source runs as one subtask, so each keyed subtask receives one
// deterministic sequence of batches and watermarks (a key's records keep
// the generator's order), which is what the detector's results depend on.

const (
	keyedWindowMs = 300_000
	keyedOOOMs    = 5_000
)

func keyedSpec(t *testing.T, dir, lang, backend string, parallelism int) *jobspec.Spec {
	t.Helper()
	root, _ := filepath.Abs("..")
	text := fmt.Sprintf(`name: keyed-e2e
parallelism: %d
state_backend: %s
nodes:
  - name: txns
    parallelism: 1
    source: {generator: {kind: transactions, count: 20000, seed: 7, disorder: 5s}}
    event_time: {max_out_of_orderness: %dms}
  - name: alerts
    input: txns
    key_by: card
    wasm: {module: %q, config: {window_ms: %d}}
  - name: alerts_out
    input: alerts
    sink: {file: {path: %q}}
  - name: counts
    input: txns
    key_by: card
    wasm: {module: %q}
  - name: counts_out
    input: counts
    sink: {file: {path: %q}}
`, parallelism, backend, keyedOOOMs,
		filepath.Join(root, "udfs/build/country-change-"+lang+".wasm"), keyedWindowMs, filepath.Join(dir, "alerts.jsonl"),
		filepath.Join(root, "udfs/build/counter-"+lang+".wasm"), filepath.Join(dir, "counts.jsonl"))
	spec, err := jobspec.Parse([]byte(text), "")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return spec
}

// openBackend opens a fresh backend of the kind the spec names.
func openBackend(t *testing.T, kind string) state.Backend {
	t.Helper()
	var b state.Backend
	var err error
	switch kind {
	case jobspec.BackendMemory:
		b, err = state.NewMemory(state.DefaultMemoryConfig())
	case jobspec.BackendPebble:
		b, err = state.OpenPebble(state.DefaultPebbleConfig(filepath.Join(t.TempDir(), "state")))
	default:
		t.Fatalf("unknown backend %q", kind)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// txnBatch is what one Next call of the source returned and the watermark
// the source task sends after it (math.MinInt64 when it did not advance).
type txnBatch struct {
	recs []txnRecord
	wm   int64
}

type txnRecord struct {
	card, country string
	ts            int64
}

// regenerateTxns runs the job's source alone, as its one task does (Next
// with the batch size), and computes the watermark after each batch as the
// source task does: the largest timestamp so far - out-of-orderness - 1.
func regenerateTxns(t *testing.T, spec *jobspec.Spec) []txnBatch {
	t.Helper()
	src, err := connectors.Registry{}.NewSource(spec.Nodes[0].Source, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := src.Open(ctx, stream.TaskInfo{Subtask: 0, Parallelism: 1}); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var out []txnBatch
	maxTs, wm := int64(math.MinInt64), int64(math.MinInt64)
	for {
		b := stream.NewBatch(spec.BatchSize)
		err := src.Next(ctx, b, spec.BatchSize)
		if b.Len() > 0 {
			tb := txnBatch{wm: math.MinInt64}
			for _, r := range b.Records {
				var v struct{ Card, Country string }
				if err := json.Unmarshal(r.Value, &v); err != nil {
					t.Fatal(err)
				}
				tb.recs = append(tb.recs, txnRecord{card: v.Card, country: v.Country, ts: r.Timestamp})
				maxTs = max(maxTs, r.Timestamp)
			}
			if w := maxTs - keyedOOOMs - 1; w > wm {
				wm, tb.wm = w, w
			}
			out = append(out, tb)
		}
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// detectorModel replays the country-change operator with maps for its
// state and timers, and records each card's alerts in order.
type detectorModel struct {
	cfg    detector.Config
	last   map[string]detector.Last
	timers map[string]map[int64]bool
	alerts map[string][]string
	// cleared counts cards whose state a timer removed and which were used
	// again later: the timers must have changed the outcome somewhere.
	cleared, clearedThenUsed int
	wasCleared               map[string]bool
	fired                    int
}

func newDetectorModel() *detectorModel {
	return &detectorModel{
		cfg:        detector.Config{WindowMs: keyedWindowMs},
		last:       map[string]detector.Last{},
		timers:     map[string]map[int64]bool{},
		alerts:     map[string][]string{},
		wasCleared: map[string]bool{},
	}
}

func (m *detectorModel) add(r txnRecord) {
	if m.wasCleared[r.card] {
		m.clearedThenUsed++
		delete(m.wasCleared, r.card)
	}
	last, have := m.last[r.card]
	step := m.cfg.Decide(last, have, []byte(r.country), r.ts)
	if step.Alert {
		m.alerts[r.card] = append(m.alerts[r.card], string(detector.AppendAlert(nil, []byte(r.card), step, r.ts)))
	}
	if step.Replace {
		m.last[r.card] = detector.Last{Ts: r.ts, Country: []byte(r.country)}
		if m.timers[r.card] == nil {
			m.timers[r.card] = map[int64]bool{}
		}
		if step.HasOld {
			delete(m.timers[r.card], step.OldTimer)
		}
		m.timers[r.card][step.NewTimer] = true
	}
}

// advance fires the timers at or before wm.
func (m *detectorModel) advance(wm int64) {
	for card, ts := range m.timers {
		for at := range ts {
			if at > wm {
				continue
			}
			delete(ts, at)
			m.fired++
			if last, ok := m.last[card]; ok && m.cfg.Expired(last, at) {
				delete(m.last, card)
				m.cleared++
				m.wasCleared[card] = true
			}
		}
	}
}

func TestKeyedWasmEndToEnd(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	for _, backend := range []string{jobspec.BackendMemory, jobspec.BackendPebble} {
		for _, lang := range []string{"c", "go"} {
			for _, parallelism := range []int{1, 3} {
				t.Run(fmt.Sprintf("%s/%s/p%d", backend, lang, parallelism), func(t *testing.T) {
					dir := t.TempDir()
					spec := keyedSpec(t, dir, lang, backend, parallelism)
					b := &countingBackend{Backend: openBackend(t, backend)}
					job, err := dataflow.NewJob(context.Background(), spec, dataflow.Options{
						Connectors:     connectors.Registry{},
						Engine:         engine,
						StateBackends:  func(string) (state.Backend, error) { return b, nil },
						WindowOperator: window.New,
					})
					if err != nil {
						t.Fatal(err)
					}
					if _, err := job.Run(context.Background()); err != nil {
						t.Fatal(err)
					}
					checkAlerts(t, spec, testkit.ReadLines(t, filepath.Join(dir, "alerts.jsonl")), b)
					checkCounts(t, testkit.ReadLines(t, filepath.Join(dir, "counts.jsonl")))
				})
			}
		}
	}
}

func checkAlerts(t *testing.T, spec *jobspec.Spec, lines []string, b *countingBackend) {
	t.Helper()
	// A card's alerts come from one subtask, in order.
	got := map[string][]string{}
	for _, line := range lines {
		var a struct{ Card string }
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("alert %s: %v", line, err)
		}
		got[a.Card] = append(got[a.Card], line)
	}
	m := newDetectorModel()
	total := 0
	for _, b := range regenerateTxns(t, spec) {
		for _, r := range b.recs {
			m.add(r)
		}
		m.advance(b.wm)
	}
	bad := 0
	for card, want := range m.alerts {
		total += len(want)
		if !slices.Equal(got[card], want) && bad < 5 {
			bad++
			t.Errorf("card %s: alerts\n\t%s\nwant\n\t%s", card, strings.Join(got[card], "\n\t"), strings.Join(want, "\n\t"))
		}
	}
	for card, g := range got {
		if _, ok := m.alerts[card]; !ok && bad < 5 {
			bad++
			t.Errorf("card %s: alerts %v, want none", card, g)
		}
	}
	if len(lines) != total {
		t.Errorf("%d alerts, want %d", len(lines), total)
	}
	// The data must exercise the timers: some cards' state was cleaned up
	// and the card was used again afterwards.
	if total == 0 || m.clearedThenUsed == 0 {
		t.Errorf("the generated data does not exercise the detector: %d alerts, %d cards used after their state was cleared", total, m.clearedThenUsed)
	}
	t.Logf("%d alerts over %d cards; %d cleanups, %d cards used again after one", total, len(m.alerts), m.cleared, m.clearedThenUsed)
	// The alerts cannot tell whether cleanup timers fired (a card quiet
	// for a window would raise no alert either way), so count them: at the
	// end of input every timer fires and every card's state goes.
	m.advance(math.MaxInt64)
	if fired, deletes := b.fired.Load(), b.deletes.Load(); fired != int64(m.fired) || deletes != int64(m.cleared) || len(m.last) != 0 {
		t.Errorf("%d timers fired and %d states cleared, want %d and %d", fired, deletes, m.fired, m.cleared)
	}
}

// countingBackend counts the timers its stores fire and the values they
// delete.
type countingBackend struct {
	state.Backend
	fired, deletes atomic.Int64
}

func (b *countingBackend) OpenTask(scope state.Scope, maxParallelism int, groups state.Range) (state.Store, error) {
	st, err := b.Backend.OpenTask(scope, maxParallelism, groups)
	if err != nil {
		return nil, err
	}
	return &countingStore{Store: st, b: b}, nil
}

type countingStore struct {
	state.Store
	b *countingBackend
}

func (s *countingStore) ValueDelete(name string, key, ns []byte) error {
	s.b.deletes.Add(1)
	return s.Store.ValueDelete(name, key, ns)
}

func (s *countingStore) PopTimers(kind state.TimerKind, upTo int64, fn func(state.Timer) error) error {
	return s.Store.PopTimers(kind, upTo, func(tm state.Timer) error {
		s.b.fired.Add(1)
		return fn(tm)
	})
}

// checkCounts: each card's running counts are 1, 2, …, its total, in
// order, and the totals add up to every record.
func checkCounts(t *testing.T, lines []string) {
	t.Helper()
	next := map[string]uint64{}
	for _, line := range lines {
		var c struct {
			Key   string
			Count uint64
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("count %s: %v", line, err)
		}
		next[c.Key]++
		if want := string(counting.AppendJSON(nil, []byte(c.Key), next[c.Key])); line != want {
			t.Fatalf("count line %s, want %s", line, want)
		}
	}
	total := uint64(0)
	for _, n := range next {
		total += n
	}
	if total != 20000 || len(next) < 900 {
		t.Errorf("counted %d records over %d cards, want 20000 over about 1000", total, len(next))
	}
}

// scriptSource hands out one prepared batch per Next call; before ending
// it waits for done (closed by the test's sink), so that a processing-time
// timer gets the chance to fire while the job runs.
type scriptSource struct {
	batches [][]stream.Record
	done    <-chan struct{}
}

func (s *scriptSource) Open(context.Context, stream.TaskInfo) error { return nil }
func (s *scriptSource) Next(ctx context.Context, b *stream.Batch, _ int) error {
	if len(s.batches) > 0 {
		for i := range s.batches[0] {
			b.AddRecord(&s.batches[0][i])
		}
		s.batches = s.batches[1:]
		return nil
	}
	select {
	case <-s.done:
		return io.EOF
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(10 * time.Second):
		return errors.New("the processing-time timer did not fire within 10s")
	}
}
func (s *scriptSource) Close() error { return nil }

// collectSink keeps "key:value" of every record and closes done once it
// sees a fired processing-time timer.
type collectSink struct {
	mu   *sync.Mutex
	got  *[]string
	done chan struct{}
}

func (s *collectSink) Open(context.Context, stream.TaskInfo) error { return nil }
func (s *collectSink) Write(_ context.Context, b *stream.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range b.Records {
		*s.got = append(*s.got, string(r.Key)+":"+string(r.Value))
		if strings.HasPrefix(string(r.Value), "fired p ") {
			close(s.done)
		}
	}
	return nil
}
func (s *collectSink) Finish(context.Context) error { return nil }
func (s *collectSink) Close() error                 { return nil }

// TestKeyedWasmTimers drives host/testdata/keyed.wasm through a job: more
// due timers than one eddy_on_timer batch holds, timers that set timers
// already due (fired in the same watermark), current_watermark, and a
// processing-time timer fired by the task's clock.
func TestKeyedWasmTimers(t *testing.T) {
	rec := func(key, cmd string, ts int64) stream.Record {
		return stream.Record{Key: []byte(key), Value: []byte(cmd), Timestamp: ts}
	}
	first := []stream.Record{rec("c", "p 300", 0), rec("c", "r e 1000", 0)}
	for ts := 600; ts >= 1; ts-- {
		first = append(first, rec("m", fmt.Sprintf("r e %d", ts), 0))
	}
	now := time.Now().UnixMilli()
	done := make(chan struct{})
	src := &scriptSource{batches: [][]stream.Record{
		first,
		{rec("z", "w", 5000)}, // the watermark is -1 after the first batch
		{rec("p", fmt.Sprintf("r p %d", now), 5000)}, // due at once, fired by the next tick
	}, done: done}
	var mu sync.Mutex
	var got []string
	spec := parse(t, `name: timers
parallelism: 1
batch_size: 1000
state_backend: memory
nodes:
  - name: src
    source: {generator: {kind: sequence}}
    event_time: {max_out_of_orderness: 0ms}
  - name: op
    input: src
    key_by: record_key
    wasm: {module: $ROOT/host/testdata/keyed.wasm}
  - name: out
    input: op
    sink: {discard: {}}
`)
	b := openBackend(t, jobspec.BackendMemory)
	job, err := dataflow.NewJob(context.Background(), spec, dataflow.Options{
		Connectors: testConnectors{
			src:  func() stream.Source { return src },
			sink: func() stream.Sink { return &collectSink{mu: &mu, got: &got, done: done} },
		},
		Engine:        newEngine(t, host.DefaultConfig()),
		StateBackends: func(string) (state.Backend, error) { return b, nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"z:-1"}
	for ts := 1; ts <= 600; ts++ {
		want = append(want, fmt.Sprintf("m:fired e %d", ts))
	}
	for ts := 1000; ts <= 1300; ts++ {
		want = append(want, fmt.Sprintf("c:fired e %d", ts))
	}
	want = append(want, fmt.Sprintf("p:fired p %d", now))
	if !slices.Equal(got, want) {
		t.Fatalf("got %d records:\n%s\nwant %d:\n%s", len(got), strings.Join(got, "\n"), len(want), strings.Join(want, "\n"))
	}
}
