package window_test

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/host"
)

// Wasm aggregates and window functions, end to end: the same jobs and
// model as the built-ins (e2e_test.go), aggregated by udfs/card-stats (a
// Wasm aggregate) or udfs/top-n (a window function) in Go and in C, each
// checked against a computation of its own in the model.

func testEngine(t *testing.T) *host.Engine {
	t.Helper()
	e, err := host.NewEngine(context.Background(), host.Config{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

// wasmAgg is how a case aggregates with a module: the spec's aggregate, the
// model's result of a window, and the job's results read back.
type wasmAgg struct {
	spec  string
	model func(key string, start, end int64, recs []genRecord) agg
	parse func(t *testing.T, lines []string) []agg
}

func cents(x float64) int64 { return int64(math.Round(x * 100)) }

func money(c int64) string { return fmt.Sprintf("%d.%02d", c/100, c%100) }

// cardStats aggregates with udfs/card-stats: records, total and largest
// amount (exact, in cents) and distinct countries.
func cardStats(lang string) *wasmAgg {
	return &wasmAgg{
		spec: fmt.Sprintf("{wasm: {module: ../../udfs/build/card-stats-%s.wasm}, name: stats}", lang),
		model: func(key string, start, end int64, recs []genRecord) agg {
			var total, hi int64
			countries := map[string]bool{}
			for _, r := range recs {
				c := cents(r.amount)
				total += c
				hi = max(hi, c)
				countries[r.country] = true
			}
			return agg{Key: key, Start: start, End: end, Count: int64(len(recs)),
				Extra: fmt.Sprintf("total=%s max=%s countries=%d", money(total), money(hi), len(countries))}
		},
		parse: func(t *testing.T, lines []string) []agg {
			var out []agg
			for _, line := range lines {
				var r struct {
					Key   string `json:"key"`
					Start int64  `json:"window_start"`
					End   int64  `json:"window_end"`
					Stats struct {
						N         int64  `json:"n"`
						Total     string `json:"total"`
						Max       string `json:"max"`
						Countries int    `json:"countries"`
					} `json:"stats"`
				}
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("result %s: %v", line, err)
				}
				out = append(out, agg{Key: r.Key, Start: r.Start, End: r.End, Count: r.Stats.N,
					Extra: fmt.Sprintf("total=%s max=%s countries=%d", r.Stats.Total, r.Stats.Max, r.Stats.Countries)})
			}
			return out
		},
	}
}

const topNCount = 3

// topN aggregates with the window function udfs/top-n: the three largest
// amounts of a window, ties to the earlier element (event time, then
// arrival). A firing is its elements' values in rank order, joined by
// "|" (a value is the generator's JSON, unique per transaction).
func topN(lang string) *wasmAgg {
	return &wasmAgg{
		spec: fmt.Sprintf("{apply: {module: ../../udfs/build/top-n-%s.wasm, config: {n: %d, field: amount}}}", lang, topNCount),
		model: func(key string, start, end int64, recs []genRecord) agg {
			rs := slices.Clone(recs) // arrival order
			slices.SortStableFunc(rs, func(a, b genRecord) int { return cmp.Compare(a.ts, b.ts) })
			slices.SortStableFunc(rs, func(a, b genRecord) int { return cmp.Compare(cents(b.amount), cents(a.amount)) })
			var vals []string
			for _, r := range rs[:min(topNCount, len(rs))] {
				vals = append(vals, r.value)
			}
			return agg{Key: key, Start: start, End: end, Extra: strings.Join(vals, "|")}
		},
		parse: func(t *testing.T, lines []string) []agg {
			var out []agg
			for _, line := range lines {
				var r struct {
					Key   string          `json:"key"`
					Start int64           `json:"window_start"`
					End   int64           `json:"window_end"`
					Rank  int             `json:"rank"`
					Value json.RawMessage `json:"value"`
				}
				if err := json.Unmarshal([]byte(line), &r); err != nil {
					t.Fatalf("result %s: %v", line, err)
				}
				// A firing's lines are consecutive and ranked from 1.
				if r.Rank == 1 {
					out = append(out, agg{Key: r.Key, Start: r.Start, End: r.End, Extra: string(r.Value)})
					continue
				}
				last := len(out) - 1
				if last < 0 || out[last].Key != r.Key || out[last].Start != r.Start || out[last].End != r.End ||
					strings.Count(out[last].Extra, "|")+2 != r.Rank {
					t.Fatalf("result %s does not continue the firing before it", line)
				}
				out[last].Extra += "|" + string(r.Value)
			}
			return out
		},
	}
}

// TestEndToEndWasm runs the exact cases of TestEndToEndExact that matter
// for a Wasm module — re-firings, merges of sliding panes and of sessions,
// several window subtasks — with both modules in both languages.
func TestEndToEndWasm(t *testing.T) {
	cases := []e2eCase{
		{name: "tumbling with lateness", window: `{tumbling: 1m, allowed_lateness: 4s}`, parallelism: 1, late: true, wantLate: true, wantRefires: true},
		{name: "sliding with lateness, 3 window subtasks", window: `{sliding: {size: 20s, slide: 5s}, allowed_lateness: 3s}`, parallelism: 3, late: true, wantRefires: true},
		{name: "short session with lateness, 3 window subtasks", window: `{session: {gap: 4s}, allowed_lateness: 3s}`, parallelism: 3, late: true, wantLate: true, wantRefires: true, wantBridges: true},
	}
	aggs := map[string]func(string) *wasmAgg{"card-stats": cardStats, "top-n": topN}
	for _, bk := range backends {
		for _, aggName := range []string{"card-stats", "top-n"} {
			for _, lang := range []string{"go", "c"} {
				for _, c := range cases {
					c.sourceParallelism = 1
					c.wasm = aggs[aggName](lang)
					t.Run(fmt.Sprintf("%s/%s-%s/%s", bk.name, aggName, lang, c.name), func(t *testing.T) {
						runExact(t, c, bk)
					})
				}
			}
		}
	}
}
