package window_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/dataflow/window"
	"github.com/eddy-stream/eddy/internal/testkit"
	"github.com/eddy-stream/eddy/state"
)

// The end-to-end tests run real jobs (generator → keyed window → file
// sinks) and check every result against a brute-force computation over the
// same generated records, written independently of the operator: windows
// are enumerated by definition (every window that contains a timestamp),
// panes keep their records and aggregates are computed from scratch.

const (
	e2eCount     = 20_000
	e2eBatch     = 97    // not a divisor of a minute of event time: watermarks fall anywhere in a window
	e2eOOO       = 2_000 // max_out_of_orderness, ms
	e2eDisorder  = 5_000 // ms; late records go back up to 4× this
	e2eGenerator = `{kind: transactions, count: 20000, seed: 11, cards: 50, disorder: 5s, late_fraction: 0.05}`
)

// genRecord is one generated transaction as the window sees it.
type genRecord struct {
	key     string
	ts      int64
	amount  float64
	value   string
	country string
}

// sourceBatch is what one Next call of one source subtask returned, and the
// watermark that subtask's task sends after it.
type sourceBatch struct {
	recs []genRecord
	wm   int64 // math.MinInt64 when the watermark did not advance
}

// regenerate runs subtask of the job's source alone, as the source task
// does (Next with the batch size), and computes the watermark after each
// batch as the source task does: max timestamp so far - out-of-orderness -
// 1, when it advances.
func regenerate(t *testing.T, spec *jobspec.Spec, subtask, parallelism int) []sourceBatch {
	t.Helper()
	src, err := connectors.Registry{}.NewSource(spec.Nodes[0].Source, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := src.Open(ctx, stream.TaskInfo{Subtask: subtask, Parallelism: parallelism}); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	ooo := spec.Nodes[0].EventTime.MaxOutOfOrderness.D().Milliseconds()
	var out []sourceBatch
	maxTs, wm := int64(math.MinInt64), int64(math.MinInt64)
	for {
		b := stream.NewBatch(spec.BatchSize)
		err := src.Next(ctx, b, spec.BatchSize)
		if b.Len() > 0 {
			sb := sourceBatch{wm: math.MinInt64}
			for _, r := range b.Records {
				var v struct {
					Card    string  `json:"card"`
					Country string  `json:"country"`
					Amount  float64 `json:"amount"`
				}
				if err := json.Unmarshal(r.Value, &v); err != nil {
					t.Fatal(err)
				}
				sb.recs = append(sb.recs, genRecord{key: v.Card, ts: r.Timestamp, amount: v.Amount, value: string(r.Value),
					country: v.Country})
				maxTs = max(maxTs, r.Timestamp)
			}
			if w := maxTs - ooo - 1; w > wm {
				wm, sb.wm = w, w
			}
			out = append(out, sb)
		}
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// agg is a window result, from the job or from the model.
type agg struct {
	Key   string   `json:"key"`
	Start int64    `json:"window_start"`
	End   int64    `json:"window_end"`
	Count int64    `json:"count"`
	Sum   *float64 `json:"sum"`
	Min   *float64 `json:"min"`
	Max   *float64 `json:"max"`
	Avg   *float64 `json:"avg"`
	// Extra is what a Wasm aggregate or window function computed, in a
	// form that compares exactly (see wasmAgg).
	Extra string `json:"-"`
}

func (a agg) String() string {
	f := func(p *float64) string {
		if p == nil {
			return "null"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("%s [%d,%d) count=%d sum=%s min=%s max=%s avg=%s %s", a.Key, a.Start, a.End, a.Count, f(a.Sum), f(a.Min), f(a.Max), f(a.Avg), a.Extra)
}

func closeTo(a, b *float64) bool {
	if a == nil || b == nil {
		return a == b
	}
	return math.Abs(*a-*b) <= 1e-9*math.Max(1, math.Abs(*b))
}

func (a agg) equal(b agg) bool {
	return a.Key == b.Key && a.Start == b.Start && a.End == b.End && a.Count == b.Count &&
		closeTo(a.Sum, b.Sum) && closeTo(a.Min, b.Min) && closeTo(a.Max, b.Max) && closeTo(a.Avg, b.Avg) && a.Extra == b.Extra
}

// aggregate computes a pane's result from its records.
func aggregate(key string, start, end int64, recs []genRecord) agg {
	a := agg{Key: key, Start: start, End: end, Count: int64(len(recs))}
	sum, lo, hi := 0.0, math.Inf(1), math.Inf(-1)
	for _, r := range recs {
		sum += r.amount
		lo, hi = min(lo, r.amount), max(hi, r.amount)
	}
	avg := sum / float64(len(recs))
	a.Sum, a.Min, a.Max, a.Avg = &sum, &lo, &hi, &avg
	return a
}

// winKey identifies a pane: key and bounds.
type winKey struct {
	key        string
	start, end int64
}

// ---- the model: what Flink's WindowOperator emits, brute force ----

// model replays one window subtask's input: the records of the keys it
// owns in arrival order, with the watermark advancing between batches.
type model struct {
	size, slide, gap, lateness int64
	wm                         int64
	// fixed-size windows
	panes map[winKey]*pane
	// sessions, per key
	sessions map[string][]*pane
	// emitted results per pane, in order; late records
	emitted map[winKey][]agg
	late    []string
	bridges int // records behind the watermark that merged two or more sessions
	wasm    *wasmAgg
}

type pane struct {
	w       winKey
	recs    []genRecord
	pending bool // its end-of-window firing is still to come
}

func newModel(w *jobspec.WindowSpec) *model {
	m := &model{wm: math.MinInt64, panes: map[winKey]*pane{}, sessions: map[string][]*pane{}, emitted: map[winKey][]agg{}}
	switch {
	case w.Tumbling != nil:
		m.size = w.Tumbling.D().Milliseconds()
		m.slide = m.size
	case w.Sliding != nil:
		m.size, m.slide = w.Sliding.Size.D().Milliseconds(), w.Sliding.Slide.D().Milliseconds()
	case w.Session != nil:
		m.gap = w.Session.Gap.D().Milliseconds()
	}
	m.lateness = w.AllowedLateness.D().Milliseconds()
	return m
}

func (m *model) emit(p *pane) {
	summarize := aggregate
	if m.wasm != nil {
		summarize = m.wasm.model
	}
	m.emitted[p.w] = append(m.emitted[p.w], summarize(p.w.key, p.w.start, p.w.end, p.recs))
}

// gone: the window's state is cleaned up once the watermark reaches its
// last millisecond plus the allowed lateness.
func (m *model) gone(end int64) bool { return end-1+m.lateness <= m.wm }

func (m *model) add(r genRecord) {
	if m.gap > 0 {
		m.addSession(r)
		return
	}
	kept := false
	// Every window [k·slide, k·slide+size) that contains ts.
	for k := r.ts/m.slide - m.size/m.slide - 2; k*m.slide <= r.ts; k++ {
		start := k * m.slide
		if r.ts < start || r.ts >= start+m.size || m.gone(start+m.size) {
			continue
		}
		w := winKey{r.key, start, start + m.size}
		p := m.panes[w]
		if p == nil {
			p = &pane{w: w, pending: w.end-1 > m.wm}
			m.panes[w] = p
		}
		p.recs = append(p.recs, r)
		kept = true
		if w.end-1 <= m.wm {
			m.emit(p) // a late record within lateness fires the window again
		}
	}
	if !kept {
		m.late = append(m.late, r.value)
	}
}

func (m *model) addSession(r genRecord) {
	start, end := r.ts, r.ts+m.gap
	var keep []*pane
	merged := &pane{w: winKey{r.key, start, end}}
	touched := 0
	for _, s := range m.sessions[r.key] {
		if s.w.start <= end && s.w.end >= start { // overlapping or adjacent
			touched++
			merged.w.start, merged.w.end = min(merged.w.start, s.w.start), max(merged.w.end, s.w.end)
			merged.recs = append(merged.recs, s.recs...)
		} else {
			keep = append(keep, s)
		}
	}
	if m.gone(merged.w.end) {
		m.late = append(m.late, r.value)
		return
	}
	if touched > 1 && r.ts <= m.wm {
		m.bridges++
	}
	merged.recs = append(merged.recs, r)
	merged.pending = merged.w.end-1 > m.wm
	m.sessions[r.key] = append(keep, merged)
	if merged.w.end-1 <= m.wm {
		m.emit(merged)
	}
}

// advance moves the watermark: due windows fire, expired ones go.
func (m *model) advance(wm int64) {
	if wm <= m.wm {
		return
	}
	m.wm = wm
	fire := func(p *pane) bool {
		if p.pending && p.w.end-1 <= wm {
			p.pending = false
			m.emit(p)
		}
		return m.gone(p.w.end)
	}
	for w, p := range m.panes {
		if fire(p) {
			delete(m.panes, w)
		}
	}
	for key, ss := range m.sessions {
		m.sessions[key] = slices.DeleteFunc(ss, fire)
	}
}

// ---- running the job ----

type e2eCase struct {
	name   string
	window string // the window: mapping of the spec
	// parallelism of the job and of its source
	parallelism, sourceParallelism int
	late                           bool     // with a late_output read by a sink
	wasm                           *wasmAgg // aggregated by a Wasm module, not the built-ins
	// The data must exercise what the case is about (exact tests): some
	// late records, re-firings, sessions bridged by a record.
	wantLate, wantRefires, wantBridges bool
}

func (c e2eCase) spec(t *testing.T, dir, backend string) *jobspec.Spec {
	t.Helper()
	window := c.window
	lateSink := ""
	if c.late {
		window = strings.TrimSuffix(window, "}") + ", late_output: late}"
		lateSink = fmt.Sprintf(`
  - name: late_sink
    input: late
    sink: {file: {path: %q}}`, filepath.Join(dir, "late.jsonl"))
	}
	aggregateSpec := "[count, sum(amount), min(amount), max(amount), avg(amount)]"
	if c.wasm != nil {
		aggregateSpec = c.wasm.spec
	}
	text := fmt.Sprintf(`name: window-e2e
parallelism: %d
batch_size: %d
state_backend: %s
nodes:
  - name: txns
    parallelism: %d
    source: {generator: %s}
    event_time: {max_out_of_orderness: %dms}
  - name: per_card
    input: txns
    key_by: card
    window: %s
    aggregate: %s
  - name: results
    input: per_card
    sink: {file: {path: %q}}%s
`, c.parallelism, e2eBatch, backend, c.sourceParallelism, e2eGenerator, e2eOOO, window, aggregateSpec, filepath.Join(dir, "out.jsonl"), lateSink)
	spec, err := jobspec.Parse([]byte(text), "")
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	return spec
}

// runJob runs the case's job and returns its results grouped by pane (in
// the order they were emitted) and the late records.
func runJob(t *testing.T, c e2eCase, bk backend) (*jobspec.Spec, map[winKey][]agg, []string) {
	t.Helper()
	dir := t.TempDir()
	b := bk.open(t)
	spec := c.spec(t, dir, bk.name)
	opts := dataflow.Options{
		Connectors:     connectors.Registry{},
		StateBackends:  func(string) (state.Backend, error) { return b, nil },
		WindowOperator: window.New,
	}
	if c.wasm != nil {
		opts.Engine = testEngine(t)
	}
	job, err := dataflow.NewJob(context.Background(), spec, opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := job.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	results := map[winKey][]agg{}
	lines := testkit.ReadLines(t, filepath.Join(dir, "out.jsonl"))
	if c.wasm != nil {
		for _, a := range c.wasm.parse(t, lines) {
			w := winKey{a.Key, a.Start, a.End}
			results[w] = append(results[w], a)
		}
		return spec, results, testkit.ReadLines(t, filepath.Join(dir, "late.jsonl"))
	}
	for _, line := range lines {
		var a agg
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatalf("result %s: %v", line, err)
		}
		w := winKey{a.Key, a.Start, a.End}
		results[w] = append(results[w], a)
	}
	return spec, results, testkit.ReadLines(t, filepath.Join(dir, "late.jsonl"))
}

// TestEndToEndExact runs jobs whose source is one subtask, so that every
// window subtask sees one deterministic sequence of batches and watermarks,
// and predicts every result and every late record exactly.
func TestEndToEndExact(t *testing.T) {
	cases := []e2eCase{
		{name: "tumbling", window: `{tumbling: 1m}`, parallelism: 1, sourceParallelism: 1, late: true, wantLate: true},
		{name: "tumbling with lateness", window: `{tumbling: 1m, allowed_lateness: 4s}`, parallelism: 1, sourceParallelism: 1, late: true, wantLate: true, wantRefires: true},
		{name: "sliding", window: `{sliding: {size: 10m, slide: 1m}}`, parallelism: 1, sourceParallelism: 1, late: true},
		{name: "sliding with lateness, 3 window subtasks", window: `{sliding: {size: 20s, slide: 5s}, allowed_lateness: 3s}`, parallelism: 3, sourceParallelism: 1, late: true, wantRefires: true},
		{name: "sliding not divisible, dropping late records", window: `{sliding: {size: 10s, slide: 3s}}`, parallelism: 1, sourceParallelism: 1, wantLate: true},
		{name: "session", window: `{session: {gap: 30s}}`, parallelism: 1, sourceParallelism: 1, late: true, wantBridges: true},
		{name: "short session", window: `{session: {gap: 4s}}`, parallelism: 1, sourceParallelism: 1, late: true, wantLate: true, wantBridges: true},
		{name: "short session with lateness, 3 window subtasks", window: `{session: {gap: 4s}, allowed_lateness: 3s}`, parallelism: 3, sourceParallelism: 1, late: true, wantLate: true, wantRefires: true, wantBridges: true},
	}
	for _, bk := range backends {
		for _, c := range cases {
			t.Run(bk.name+"/"+c.name, func(t *testing.T) { runExact(t, c, bk) })
		}
	}
}

// runExact runs an exact case and compares every result and late record
// with the model's.
func runExact(t *testing.T, c e2eCase, bk backend) {
	spec, got, gotLate := runJob(t, c, bk)
	win := spec.Node("per_card").Window
	// One model per window subtask, fed the keys it owns.
	p := spec.NodeParallelism(spec.Node("per_card"))
	models := make([]*model, p)
	for i := range models {
		models[i] = newModel(win)
		models[i].wasm = c.wasm
	}
	for _, sb := range regenerate(t, spec, 0, 1) {
		for _, r := range sb.recs {
			sub := state.SubtaskFor(state.KeyGroup([]byte(r.key), spec.MaxParallelism), p, spec.MaxParallelism)
			models[sub].add(r)
		}
		for _, m := range models {
			m.advance(sb.wm)
		}
	}
	want := map[winKey][]agg{}
	var wantLate []string
	bridges := 0
	for _, m := range models {
		bridges += m.bridges
		m.advance(math.MaxInt64)
		for w, as := range m.emitted {
			want[w] = as
		}
		wantLate = append(wantLate, m.late...)
	}
	refires := comparePanes(t, got, want)
	if len(want) == 0 || (c.wantLate && len(wantLate) == 0) || (c.wantRefires && refires == 0) || (c.wantBridges && bridges == 0) {
		t.Errorf("the generated data does not exercise this case: %d panes, %d late records, %d re-firings, %d bridges", len(want), len(wantLate), refires, bridges)
	}
	t.Logf("%d panes, %d re-firings, %d late records, %d sessions bridged by late records", len(want), refires, len(wantLate), bridges)
	if !c.late {
		wantLate = nil // dropped, not written
	}
	slices.Sort(gotLate)
	slices.Sort(wantLate)
	if !slices.Equal(gotLate, wantLate) {
		t.Errorf("late output: %d records, want %d", len(gotLate), len(wantLate))
	}
}

// comparePanes checks that every pane emitted exactly the model's sequence
// of results and returns how many firings were re-firings.
func comparePanes(t *testing.T, got, want map[winKey][]agg) int {
	t.Helper()
	refires, bad := 0, 0
	for w, as := range want {
		refires += len(as) - 1
		g := got[w]
		ok := len(g) == len(as)
		for i := 0; ok && i < len(as); i++ {
			ok = g[i].equal(as[i])
		}
		if !ok && bad < 5 {
			bad++
			t.Errorf("pane %v: emitted\n\t%v\nwant\n\t%v", w, g, as)
		}
	}
	for w, g := range got {
		if _, ok := want[w]; !ok && bad < 5 {
			bad++
			t.Errorf("pane %v: emitted %v, want nothing", w, g)
		}
	}
	return refires
}

// TestEndToEndParallel runs jobs with 3 source and 3 window subtasks, where
// the order in which a window subtask merges its inputs varies from run to
// run. The allowed lateness exceeds the generator's worst disorder, so no
// record is late and no window is dropped before its last record: then the
// last result of every pane is exact whatever the interleaving, and each
// earlier one is a firing of part of it.
func TestEndToEndParallel(t *testing.T) {
	lateness := fmt.Sprintf("allowed_lateness: %dms", 4*e2eDisorder+1000)
	cases := []e2eCase{
		{name: "tumbling", window: `{tumbling: 1m, ` + lateness + `}`},
		{name: "sliding", window: `{sliding: {size: 10m, slide: 1m}, ` + lateness + `}`},
		{name: "session", window: `{session: {gap: 30s}, ` + lateness + `}`},
		{name: "short session", window: `{session: {gap: 4s}, ` + lateness + `}`},
	}
	for _, bk := range backends {
		for _, c := range cases {
			c.parallelism, c.sourceParallelism, c.late = 3, 3, true
			t.Run(bk.name+"/"+c.name, func(t *testing.T) {
				spec, got, late := runJob(t, c, bk)
				if len(late) != 0 {
					t.Errorf("%d late records, want none", len(late))
				}
				win := spec.Node("per_card").Window
				byKey := map[string][]genRecord{}
				for sub := range 3 {
					for _, sb := range regenerate(t, spec, sub, 3) {
						for _, r := range sb.recs {
							byKey[r.key] = append(byKey[r.key], r)
						}
					}
				}
				var final map[winKey]agg
				if win.Session != nil {
					final = offlineSessions(byKey, win.Session.Gap.D().Milliseconds())
				} else {
					m := newModel(win) // for its size and slide only
					final = offlineWindows(byKey, m.size, m.slide)
				}
				checkFinal(t, got, final, win.Session != nil)
			})
		}
	}
}

// offlineWindows is every pane over the whole input, by definition: the
// records whose timestamps fall in it.
func offlineWindows(byKey map[string][]genRecord, size, slide int64) map[winKey]agg {
	panes := map[winKey][]genRecord{}
	for key, recs := range byKey {
		for _, r := range recs {
			for k := r.ts/slide - size/slide - 2; k*slide <= r.ts; k++ {
				if s := k * slide; s <= r.ts && r.ts < s+size {
					w := winKey{key, s, s + size}
					panes[w] = append(panes[w], r)
				}
			}
		}
	}
	out := map[winKey]agg{}
	for w, recs := range panes {
		out[w] = aggregate(w.key, w.start, w.end, recs)
	}
	return out
}

// offlineSessions groups each key's timestamps, sorted, into runs whose
// consecutive gaps are at most gap: those are the sessions once every
// record has arrived, [first, last+gap).
func offlineSessions(byKey map[string][]genRecord, gap int64) map[winKey]agg {
	out := map[winKey]agg{}
	for key, recs := range byKey {
		recs = slices.Clone(recs)
		slices.SortFunc(recs, func(a, b genRecord) int { return cmp.Compare(a.ts, b.ts) })
		for i := 0; i < len(recs); {
			j := i + 1
			for j < len(recs) && recs[j].ts-recs[j-1].ts <= gap {
				j++
			}
			w := winKey{key, recs[i].ts, recs[j-1].ts + gap}
			out[w] = aggregate(key, w.start, w.end, recs[i:j])
			i = j
		}
	}
	return out
}

// checkFinal checks results against the complete panes: each complete pane's
// last result is exact and earlier firings of it counted fewer records;
// every other result is of a pane contained in a complete one (sessions
// that merged later), or there is none (fixed windows).
func checkFinal(t *testing.T, got map[winKey][]agg, final map[winKey]agg, sessions bool) {
	t.Helper()
	bad := 0
	report := func(format string, args ...any) {
		if bad++; bad <= 5 {
			t.Errorf(format, args...)
		}
	}
	for w, want := range final {
		g := got[w]
		if len(g) == 0 {
			report("pane %v: no result, want %v", w, want)
			continue
		}
		if last := g[len(g)-1]; !last.equal(want) {
			report("pane %v: last result %v, want %v", w, last, want)
		}
		for i := 1; i < len(g); i++ {
			if g[i].Count <= g[i-1].Count {
				report("pane %v: firing %d counts %d records, after %d", w, i, g[i].Count, g[i-1].Count)
			}
		}
	}
	var within map[string][]winKey
	if sessions {
		within = map[string][]winKey{}
		for w := range final {
			within[w.key] = append(within[w.key], w)
		}
	}
	partial := 0
	for w, g := range got {
		if _, ok := final[w]; ok {
			continue
		}
		if !sessions || !slices.ContainsFunc(within[w.key], func(f winKey) bool { return f.start <= w.start && w.end <= f.end }) {
			report("pane %v: %d results %v, but no such pane", w, len(g), g)
		}
		partial++
	}
	t.Logf("%d panes, %d partial sessions merged later", len(final), partial)
}

// TestEndToEndGlobalCount checks count windows: with one source subtask the
// arrival order of each key is the generator's and every pane is exact;
// with three it varies, but each key still fires ⌊records/N⌋ times, N
// records each, and keeps its partial pane.
func TestEndToEndGlobalCount(t *testing.T) {
	const n = 7
	for _, bk := range backends {
		for _, par := range []int{1, 3, 0} {
			// 0: parallelism 1, aggregated by a Wasm module.
			c := e2eCase{name: "global", window: fmt.Sprintf(`{global: {trigger: {count: %d}}}`, n), parallelism: max(par, 1), sourceParallelism: max(par, 1)}
			name := fmt.Sprintf("%s/parallelism %d", bk.name, par)
			summarize := aggregate
			if par == 0 {
				c.wasm = cardStats("c")
				summarize = c.wasm.model
				name = bk.name + "/card-stats-c"
				par = 1
			}
			t.Run(name, func(t *testing.T) {
				spec, got, _ := runJob(t, c, bk)
				byKey := map[string][]genRecord{}
				for sub := range par {
					for _, sb := range regenerate(t, spec, sub, par) {
						for _, r := range sb.recs {
							byKey[r.key] = append(byKey[r.key], r)
						}
					}
				}
				fired := map[string][]agg{}
				for _, as := range got {
					for _, a := range as {
						fired[a.Key] = append(fired[a.Key], a)
					}
				}
				total := 0
				for key, recs := range byKey {
					f := fired[key]
					total += len(f)
					if len(f) != len(recs)/n {
						t.Errorf("key %s: %d results, want %d for %d records", key, len(f), len(recs)/n, len(recs))
						continue
					}
					if par > 1 {
						for _, a := range f {
							if a.Count != n {
								t.Errorf("key %s: result %v, want count %d", key, a, n)
							}
						}
						continue
					}
					for i := range f {
						pane := recs[i*n : (i+1)*n]
						lo, hi := int64(math.MaxInt64), int64(math.MinInt64)
						for _, r := range pane {
							lo, hi = min(lo, r.ts), max(hi, r.ts)
						}
						if want := summarize(key, lo, hi+1, pane); !slices.ContainsFunc(f, want.equal) {
							t.Errorf("key %s: no result %v among %v", key, want, f)
						}
					}
				}
				if total == 0 {
					t.Fatal("no results at all")
				}
			})
		}
	}
}
