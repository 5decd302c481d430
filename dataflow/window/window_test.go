package window_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/state/statetest"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/dataflow/window"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/state"
)

// backend is a state backend the tests run against.
type backend struct {
	name string
	open func(t testing.TB) state.Backend
}

var backends = []backend{{"memory", statetest.Memory}, {"pebble", statetest.Pebble}}

func ms(n int64) jobspec.Duration { return jobspec.Duration(time.Duration(n) * time.Millisecond) }

func tumbling(size int64) *jobspec.WindowSpec {
	d := ms(size)
	return &jobspec.WindowSpec{Tumbling: &d}
}

func sliding(size, slide int64) *jobspec.WindowSpec {
	return &jobspec.WindowSpec{Sliding: &jobspec.SlidingSpec{Size: ms(size), Slide: ms(slide)}}
}

func sessionGap(gap int64) *jobspec.WindowSpec {
	return &jobspec.WindowSpec{Session: &jobspec.SessionSpec{Gap: ms(gap)}}
}

func globalCount(n int64) *jobspec.WindowSpec {
	w := &jobspec.WindowSpec{Global: &jobspec.GlobalSpec{}}
	w.Global.Trigger.Count = n
	return w
}

func withLateness(w *jobspec.WindowSpec, lateness int64, lateOutput string) *jobspec.WindowSpec {
	w.AllowedLateness = ms(lateness)
	w.LateOutput = lateOutput
	return w
}

func windowNode(w *jobspec.WindowSpec, aggs ...string) *jobspec.Node {
	return &jobspec.Node{Name: "per_key", KeyBy: jobspec.KeyFields{"k"}, Window: w, Aggregate: &jobspec.AggregateSpec{Builtins: aggs}}
}

// harness drives one operator directly, as a task would.
type harness struct {
	t     testing.TB
	op    *window.Operator
	out   *stream.Batch
	late  string
	store state.Store
	scope state.Scope
}

func newHarness(t testing.TB, b state.Backend, node *jobspec.Node) *harness {
	t.Helper()
	return newHarnessWith(t, b, node, nil)
}

// newHarnessWith is newHarness for a node aggregated by a Wasm module.
func newHarnessWith(t testing.TB, b state.Backend, node *jobspec.Node, modules map[string]*host.Module) *harness {
	t.Helper()
	spec := &jobspec.Spec{Name: "test", Parallelism: 1, MaxParallelism: 128, Nodes: []jobspec.Node{*node}}
	op, err := window.New(spec, node, modules)
	if err != nil {
		t.Fatal(err)
	}
	scope := state.Scope{Tenant: "default", Job: t.Name(), Operator: node.Name}
	st, err := b.OpenTask(scope, 128, state.Range{Start: 0, End: 128})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := op.Open(context.Background(), stream.TaskInfo{Job: "test", Node: node.Name, Parallelism: 1, MaxParallelism: 128, KeyGroups: stream.KeyGroupRange{Start: 0, End: 128}, State: st}); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, op: op.(*window.Operator), out: stream.NewBatch(16), store: st, scope: scope}
	if node.Window.LateOutput != "" {
		h.late = node.Window.LateOutput
	}
	return h
}

// in is a record: key, event time, value.
type in struct {
	key   string
	ts    int64
	value string
}

// step is either records or a watermark, with what it must emit.
type step struct {
	recs []in
	wm   int64 // used when recs is nil
	want []string
	late []string // records sent to the late output
}

// result renders an emitted record as "key@ts value".
func result(r *stream.Record) string { return fmt.Sprintf("%s@%d %s", r.Key, r.Timestamp, r.Value) }

func (h *harness) run(s step) (got, late []string, err error) {
	h.out.Reset()
	ctx := context.Background()
	if s.recs != nil {
		b := stream.NewBatch(len(s.recs))
		for _, r := range s.recs {
			b.Add([]byte(r.key), []byte(r.value), r.ts)
		}
		err = h.op.Process(ctx, b, h.out)
	} else {
		err = h.op.ProcessWatermark(ctx, s.wm, h.out)
	}
	for i := range h.out.Records {
		got = append(got, result(&h.out.Records[i]))
	}
	if h.late != "" {
		side := h.out.Side(h.late)
		for i := range side.Records {
			late = append(late, result(&side.Records[i]))
		}
	}
	return got, late, err
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestOperator(t *testing.T) {
	recs := func(rs ...in) []in { return rs }
	v := func(x string) string { return `{"k":"a","v":` + x + `}` }
	cases := []struct {
		name    string
		node    *jobspec.Node
		steps   []step
		dropped int64
	}{
		{
			name: "tumbling fires at end-1 with every aggregate",
			node: windowNode(tumbling(10), "count", "sum(v)", "min(v)", "max(v)", "avg(v)"),
			steps: []step{
				{recs: recs(in{"a", 1, v("2")}, in{"a", 5, v("-1.5")}, in{"a", 9, `{"x":1}`}, in{"a", 10, v("7")}, in{"a", 4, `{"v":"3"}`})},
				{wm: 8},
				{wm: 9, want: []string{`a@9 {"key":"a","window_start":0,"window_end":10,"count":4,"sum":0.5,"min":-1.5,"max":2,"avg":0.25}`}},
				{wm: math.MaxInt64, want: []string{`a@19 {"key":"a","window_start":10,"window_end":20,"count":1,"sum":7,"min":7,"max":7,"avg":7}`}},
			},
		},
		{
			name: "no numbers: sum 0, min max avg null",
			node: windowNode(tumbling(10), "count", "sum(v)", "min(v)", "max(v)", "avg(v)"),
			steps: []step{
				{recs: recs(in{"a", 3, `{"v":null}`}, in{"a", 4, `not json`}, in{"a", 5, `{"v":{"w":1}}`})},
				{wm: 100, want: []string{`a@9 {"key":"a","window_start":0,"window_end":10,"count":3,"sum":0,"min":null,"max":null,"avg":null}`}},
			},
		},
		{
			name: "negative times align to the epoch",
			node: windowNode(tumbling(10), "count"),
			steps: []step{
				{recs: recs(in{"a", -1, v("1")}, in{"a", -10, v("1")}, in{"a", -11, v("1")})},
				{wm: 0, want: []string{
					`a@-11 {"key":"a","window_start":-20,"window_end":-10,"count":1}`,
					`a@-1 {"key":"a","window_start":-10,"window_end":0,"count":2}`,
				}},
			},
		},
		{
			name: "windows fire in timer order, repeated kinds are named kind_field",
			node: windowNode(tumbling(10), "count", "sum(v)", "sum(w)", "max(v)"),
			steps: []step{
				{recs: recs(in{"a", 25, `{"v":1,"w":2}`}, in{"a", 3, `{"v":3}`}, in{"a", 14, `{"w":1e2}`})},
				{wm: 30, want: []string{
					`a@9 {"key":"a","window_start":0,"window_end":10,"count":1,"sum_v":3,"sum_w":0,"max":3}`,
					`a@19 {"key":"a","window_start":10,"window_end":20,"count":1,"sum_v":0,"sum_w":100,"max":null}`,
					`a@29 {"key":"a","window_start":20,"window_end":30,"count":1,"sum_v":1,"sum_w":2,"max":1}`,
				}},
			},
		},
		{
			name: "keys are quoted in results",
			node: windowNode(tumbling(10), "count"),
			steps: []step{
				{recs: recs(in{`a"b\`, 1, `{}`})},
				{wm: 9, want: []string{`a"b\@9 {"key":"a\"b\\","window_start":0,"window_end":10,"count":1}`}},
			},
		},
		{
			name: "sliding: a record is in size/slide windows",
			node: windowNode(sliding(10, 5), "count"),
			steps: []step{
				{recs: recs(in{"a", 7, v("1")}, in{"a", 12, v("1")})},
				{wm: 9, want: []string{`a@9 {"key":"a","window_start":0,"window_end":10,"count":1}`}},
				{wm: 20, want: []string{
					`a@14 {"key":"a","window_start":5,"window_end":15,"count":2}`,
					`a@19 {"key":"a","window_start":10,"window_end":20,"count":1}`,
				}},
			},
		},
		{
			name: "sliding: slide not dividing size, as SlidingEventTimeWindows",
			node: windowNode(sliding(10, 3), "count"),
			steps: []step{
				{recs: recs(in{"a", 0, v("1")})}, // in [-9,1) [-6,4) [-3,7) [0,10)
				{wm: 3, want: []string{
					`a@0 {"key":"a","window_start":-9,"window_end":1,"count":1}`,
					`a@3 {"key":"a","window_start":-6,"window_end":4,"count":1}`,
				}},
				{recs: recs(in{"a", 8, v("1")})}, // in [0,10) [3,13) [6,16): [-3,7) ends before 8
				{wm: 100, want: []string{
					`a@6 {"key":"a","window_start":-3,"window_end":7,"count":1}`,
					`a@9 {"key":"a","window_start":0,"window_end":10,"count":2}`,
					`a@12 {"key":"a","window_start":3,"window_end":13,"count":1}`,
					`a@15 {"key":"a","window_start":6,"window_end":16,"count":1}`,
				}},
			},
		},
		{
			name: "sliding: a record late for some windows only is kept in the others",
			node: windowNode(withLateness(sliding(10, 5), 0, "late"), "count"),
			steps: []step{
				{wm: 9},
				{recs: recs(in{"a", 7, v("1")})}, // [0,10) is gone, [5,15) is not
				{wm: 14, want: []string{`a@14 {"key":"a","window_start":5,"window_end":15,"count":1}`}},
			},
		},
		{
			name: "allowed lateness re-fires at once, then drops",
			node: windowNode(withLateness(tumbling(10), 5, ""), "count", "sum(v)"),
			steps: []step{
				{recs: recs(in{"a", 3, v("1")})},
				{wm: 9, want: []string{`a@9 {"key":"a","window_start":0,"window_end":10,"count":1,"sum":1}`}},
				{recs: recs(in{"a", 4, v("2")}), want: []string{`a@9 {"key":"a","window_start":0,"window_end":10,"count":2,"sum":3}`}},
				{wm: 13},
				{recs: recs(in{"a", 5, v("4")}, in{"a", 15, v("8")}), want: []string{`a@9 {"key":"a","window_start":0,"window_end":10,"count":3,"sum":7}`}},
				{wm: 14}, // cleanup of [0,10): nothing to emit
				{recs: recs(in{"a", 6, v("16")}, in{"a", 0, v("32")})},
				{wm: math.MaxInt64, want: []string{`a@19 {"key":"a","window_start":10,"window_end":20,"count":1,"sum":8}`}},
			},
			dropped: 2,
		},
		{
			name: "late records go to late_output unchanged",
			node: windowNode(withLateness(tumbling(10), 0, "late"), "count"),
			steps: []step{
				{recs: recs(in{"a", 3, v("1")})},
				{wm: 9, want: []string{`a@9 {"key":"a","window_start":0,"window_end":10,"count":1}`}},
				{recs: recs(in{"a", 4, v("2")}, in{"b", 12, `{"k":"b"}`}, in{"b", 9, `{"k":"b"}`}), late: []string{`a@4 ` + v("2"), `b@9 {"k":"b"}`}},
				{wm: 19, want: []string{`b@19 {"key":"b","window_start":10,"window_end":20,"count":1}`}},
			},
		},
		{
			name: "session: records within the gap merge, later ones open a new session",
			node: windowNode(sessionGap(10), "count", "max(v)"),
			steps: []step{
				{recs: recs(in{"a", 0, v("1")}, in{"a", 5, v("3")}, in{"a", 30, v("2")}, in{"a", 2, v("0")})},
				{wm: 13},
				{wm: 14, want: []string{`a@14 {"key":"a","window_start":0,"window_end":15,"count":3,"max":3}`}},
				{wm: 100, want: []string{`a@39 {"key":"a","window_start":30,"window_end":40,"count":1,"max":2}`}},
			},
		},
		{
			name: "session: adjacent sessions merge",
			node: windowNode(sessionGap(10), "count"),
			steps: []step{
				{recs: recs(in{"a", 10, v("1")}, in{"a", 0, v("1")}, in{"a", 21, v("1")})},
				{wm: math.MaxInt64, want: []string{
					`a@19 {"key":"a","window_start":0,"window_end":20,"count":2}`,
					`a@30 {"key":"a","window_start":21,"window_end":31,"count":1}`,
				}},
			},
		},
		{
			name: "session: a record bridging two sessions before they fire moves their timers",
			node: windowNode(sessionGap(10), "count", "sum(v)"),
			steps: []step{
				{recs: recs(in{"a", 0, v("1")}, in{"a", 15, v("2")})},
				{wm: 5},
				{recs: recs(in{"a", 7, v("4")})},
				{wm: 23}, // the timers of [0,10) and [15,25) are gone
				{wm: 24, want: []string{`a@24 {"key":"a","window_start":0,"window_end":25,"count":3,"sum":7}`}},
			},
		},
		{
			name: "session: a late record bridges two fired sessions and re-fires the merge",
			node: windowNode(withLateness(sessionGap(10), 100, "late"), "count", "sum(v)"),
			steps: []step{
				{recs: recs(in{"a", 0, v("1")}, in{"a", 15, v("2")})},
				{wm: 30, want: []string{
					`a@9 {"key":"a","window_start":0,"window_end":10,"count":1,"sum":1}`,
					`a@24 {"key":"a","window_start":15,"window_end":25,"count":1,"sum":2}`,
				}},
				{recs: recs(in{"a", 7, v("4")}), want: []string{`a@24 {"key":"a","window_start":0,"window_end":25,"count":3,"sum":7}`}},
				{wm: 123},
				{recs: recs(in{"a", 9, v("1")}), want: []string{`a@24 {"key":"a","window_start":0,"window_end":25,"count":4,"sum":8}`}},
				{wm: 124}, // cleanup of [0,25)
				{recs: recs(in{"a", 13, v("8")}), late: []string{`a@13 ` + v("8")}},
				// [16,26) is kept until 125 but already due: it fires at once.
				{recs: recs(in{"a", 16, v("8")}), want: []string{`a@25 {"key":"a","window_start":16,"window_end":26,"count":1,"sum":8}`}},
				{wm: 200},
			},
		},
		{
			name: "session: without lateness a record after cleanup opens a new session",
			node: windowNode(sessionGap(10), "count"),
			steps: []step{
				{recs: recs(in{"a", 0, v("1")})},
				{wm: 12, want: []string{`a@9 {"key":"a","window_start":0,"window_end":10,"count":1}`}},
				{recs: recs(in{"a", 5, v("1")}, in{"a", 2, v("1")})}, // [5,15) is not late; [2,12) merges into it
				{wm: 14, want: []string{`a@14 {"key":"a","window_start":2,"window_end":15,"count":2}`}},
				{recs: recs(in{"a", 1, v("1")})},
			},
			dropped: 1,
		},
		{
			name: "global count fires and purges every N, never on the watermark",
			node: windowNode(globalCount(3), "count", "sum(v)"),
			steps: []step{
				{recs: recs(in{"a", 5, v("1")}, in{"a", 2, v("2")}, in{"b", 1, `{"k":"b"}`}, in{"a", 9, v("4")}, in{"a", 1, v("8")}), want: []string{
					`a@9 {"key":"a","window_start":2,"window_end":10,"count":3,"sum":7}`,
				}},
				{wm: math.MaxInt64},
				{recs: recs(in{"a", 0, v("16")}, in{"a", 100, v("32")}), want: []string{
					`a@100 {"key":"a","window_start":0,"window_end":101,"count":3,"sum":56}`,
				}},
			},
		},
	}
	for _, bk := range backends {
		for _, tc := range cases {
			t.Run(bk.name+"/"+tc.name, func(t *testing.T) {
				h := newHarness(t, bk.open(t), tc.node)
				for i, s := range tc.steps {
					got, late, err := h.run(s)
					if err != nil {
						t.Fatalf("step %d: %v", i, err)
					}
					if !equal(got, s.want) {
						t.Errorf("step %d: emitted\n\t%s\nwant\n\t%s", i, strings.Join(got, "\n\t"), strings.Join(s.want, "\n\t"))
					}
					if !equal(late, s.late) {
						t.Errorf("step %d: late output\n\t%s\nwant\n\t%s", i, strings.Join(late, "\n\t"), strings.Join(s.late, "\n\t"))
					}
				}
				if got := h.op.Dropped(); got != tc.dropped {
					t.Errorf("dropped %d records, want %d", got, tc.dropped)
				}
				out := stream.NewBatch(1)
				if err := h.op.Finish(context.Background(), out); err != nil || out.Len() != 0 {
					t.Errorf("Finish: %d records, err %v; want none", out.Len(), err)
				}
			})
		}
	}
}

func TestNewErrors(t *testing.T) {
	wasm := windowNode(tumbling(10))
	wasm.Aggregate = &jobspec.AggregateSpec{Wasm: &jobspec.WasmSpec{Module: "stats.wasm"}}
	apply := windowNode(tumbling(10))
	apply.Aggregate = &jobspec.AggregateSpec{Apply: &jobspec.WasmSpec{Module: "fn.wasm"}}
	subMs := windowNode(&jobspec.WindowSpec{Session: &jobspec.SessionSpec{Gap: jobspec.Duration(time.Microsecond)}}, "count")
	cases := []struct {
		name string
		node *jobspec.Node
		want string
	}{
		{"wasm aggregate not loaded", wasm, "node per_key: module stats.wasm is not loaded"},
		{"wasm apply not loaded", apply, "node per_key: module fn.wasm is not loaded"},
		{"duplicate aggregate", windowNode(tumbling(10), "sum(v)", "count", "sum( v )"), `node per_key: aggregate "sum( v )" is listed twice`},
		{"unknown aggregate", windowNode(tumbling(10), "median(v)"), `unknown function "median"`},
		{"lateness on a global window", windowNode(withLateness(globalCount(5), 0, "late"), "count"), "node per_key: allowed_lateness and late_output do not apply to a global window"},
		{"sub-millisecond gap", subMs, "node per_key: session gap 1µs is below 1ms"},
		{"no window kind", windowNode(&jobspec.WindowSpec{}, "count"), "node per_key: window names no kind"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := window.New(&jobspec.Spec{Name: "test"}, tc.node, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestRecordWithoutEventTimeFails(t *testing.T) {
	for _, w := range []*jobspec.WindowSpec{tumbling(10), sessionGap(10), globalCount(2)} {
		h := newHarness(t, backends[0].open(t), windowNode(w, "count"))
		b := stream.NewBatch(1)
		b.Add([]byte("a"), []byte(`{}`), stream.NoTimestamp)
		err := h.op.Process(context.Background(), b, h.out)
		if err == nil || !strings.Contains(err.Error(), "node per_key: record with key \"a\" has no event time") {
			t.Errorf("err = %v, want one naming the node and saying the record has no event time", err)
		}
	}
}

func TestOpenWithoutStateFails(t *testing.T) {
	op, err := window.New(&jobspec.Spec{Name: "test"}, windowNode(tumbling(10), "count"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := op.Open(context.Background(), stream.TaskInfo{Node: "per_key"}); err == nil || !strings.Contains(err.Error(), "needs key_by") {
		t.Fatalf("err = %v, want one saying the window needs key_by", err)
	}
}

// TestProcessDoesNotAllocate checks the steady state of the per-record path:
// records of windows that exist already, including late records that re-fire
// a window, allocate nothing (Memory backend; Pebble's reads allocate inside
// Pebble).
func TestProcessDoesNotAllocate(t *testing.T) {
	cases := []struct {
		name string
		w    *jobspec.WindowSpec
	}{
		{"tumbling", tumbling(60_000)},
		{"sliding", sliding(600_000, 60_000)},
		{"session", sessionGap(30_000)},
		{"global", globalCount(1 << 40)},
		{"re-firing", withLateness(tumbling(1000), 1<<40, "")},
		{"sliding re-firing", withLateness(sliding(1000, 250), 1<<40, "")},
		{"sliding re-firing, slide not dividing size", withLateness(sliding(1000, 300), 1<<40, "")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, backends[0].open(t), windowNode(tc.w, "count", "sum(amount)", "min(amount)", "max(amount)", "avg(amount)"))
			b := stream.NewBatch(256)
			for i := range 256 {
				b.Add(fmt.Appendf(nil, "card-%d", i%16), fmt.Appendf(nil, `{"card":"card-%d","amount":%d.25}`, i%16, i), int64(i*100))
			}
			ctx := context.Background()
			if err := h.op.ProcessWatermark(ctx, 30_000, h.out); err != nil {
				t.Fatal(err)
			}
			process := func() {
				h.out.Reset()
				if err := h.op.Process(ctx, b, h.out); err != nil {
					t.Fatal(err)
				}
			}
			// Warm up past the first varint step of the counts (128), where
			// the stored values grow once.
			for range 10 {
				process()
			}
			if allocs := testing.AllocsPerRun(20, process); allocs != 0 {
				t.Errorf("%v allocations per batch of %d records, want 0", allocs, b.Len())
			}
		})
	}
}

func TestCorruptStateFails(t *testing.T) {
	cases := []struct {
		name  string
		w     *jobspec.WindowSpec
		state string
		value []byte
	}{
		{"accumulator", globalCount(3), "acc", []byte{1, 0x80}},
		{"format", globalCount(3), "acc", []byte{2, 1, 0, 0}},
		{"sessions", sessionGap(10), "sessions", []byte{1, 5, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, backends[0].open(t), windowNode(tc.w, "count", "sum(v)"))
			if err := h.store.ValuePut(tc.state, []byte("a"), nil, tc.value, 0); err != nil {
				t.Fatal(err)
			}
			b := stream.NewBatch(1)
			b.Add([]byte("a"), []byte(`{"v":1}`), 5)
			err := h.op.Process(context.Background(), b, h.out)
			if !errors.Is(err, state.ErrCorrupt) || !strings.Contains(err.Error(), `node per_key: key "a"`) {
				t.Fatalf("err = %v, want a state.ErrCorrupt naming the node and key", err)
			}
		})
	}
}

// TestNewWasmKinds: an aggregate module goes under wasm:, an operator
// module (a window function) under apply:, and each place says so of the
// other.
func TestNewWasmKinds(t *testing.T) {
	ctx := context.Background()
	e, err := host.NewEngine(ctx, host.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	modules := map[string]*host.Module{}
	for _, name := range []string{"agg", "echo"} {
		m, err := e.Load(ctx, "../../host/testdata/"+name+".wasm")
		if err != nil {
			t.Fatal(err)
		}
		modules[name] = m
	}
	node := func(a *jobspec.AggregateSpec) *jobspec.Node {
		n := windowNode(tumbling(10))
		n.Aggregate = a
		return n
	}
	cases := []struct {
		name string
		node *jobspec.Node
		want string // "" for success
	}{
		{"aggregate module", node(&jobspec.AggregateSpec{Wasm: &jobspec.WasmSpec{Module: "agg"}}), ""},
		{"window function", node(&jobspec.AggregateSpec{Apply: &jobspec.WasmSpec{Module: "echo"}}), ""},
		{"operator as aggregate", node(&jobspec.AggregateSpec{Wasm: &jobspec.WasmSpec{Module: "echo"}}), "module echo is not an aggregate module"},
		{"aggregate as window function", node(&jobspec.AggregateSpec{Apply: &jobspec.WasmSpec{Module: "agg"}}), "module agg is an aggregate module, not a window function"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := window.New(&jobspec.Spec{Name: "test"}, tc.node, modules)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// TestWasmAggregateFails: a module that breaks the aggregate contract
// fails the task with one line that names the window and the broken rule,
// and does not present it as a state error.
func TestWasmAggregateFails(t *testing.T) {
	ctx := context.Background()
	e, err := host.NewEngine(ctx, host.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	m, err := e.Load(ctx, "../../host/testdata/agg.wasm")
	if err != nil {
		t.Fatal(err)
	}
	for mode, want := range map[string]string{
		"short":   "eddy_agg_add emitted 0 records, want 1",
		"badjson": "is not one JSON value",
	} {
		t.Run(mode, func(t *testing.T) {
			n := windowNode(tumbling(10))
			n.Aggregate = &jobspec.AggregateSpec{Wasm: &jobspec.WasmSpec{Module: "agg", Config: map[string]any{"mode": mode}}}
			h := newHarnessWith(t, backends[0].open(t), n, map[string]*host.Module{"agg": m})
			in := stream.NewBatch(4)
			in.Add([]byte("a"), []byte("3"), 1)
			err := h.op.Process(ctx, in, h.out)
			if err == nil {
				err = h.op.ProcessWatermark(ctx, 100, h.out)
			}
			if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, host.ErrOperatorFailed) {
				t.Fatalf("error %v, want ErrOperatorFailed containing %q", err, want)
			}
			if strings.Contains(err.Error(), "state:") || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %q: want one line, not a state error", err)
			}
		})
	}
}
