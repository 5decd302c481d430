package dataflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/host"
	"github.com/eddy-stream/eddy/state"
)

// coJob runs udfs/regularjoin ($LANG: go, c, rust or as), a two-input keyed Wasm operator (ABI
// version 5), on two paced generators keyed by card: every pair of a txns
// and a payments record of the same card is joined once, and at the end
// (the final watermark is +∞) each card's report timer fires once with the
// number of records each input had. The sources are also written out
// as they are, for the model.
const coJob = `name: co
parallelism: 2
state_backend: $BACKEND
batch_size: 64
nodes:
  - {name: txns, parallelism: 2, event_time: {max_out_of_orderness: 3s},
     source: {generator: {kind: transactions, count: 3000, seed: 7, cards: 200, disorder: 2s, rate: $RATE}}}
  - {name: payments, parallelism: 2, event_time: {max_out_of_orderness: 3s},
     source: {generator: {kind: transactions, count: 1500, seed: 8, cards: 200, interval: 200ms, disorder: 2s, rate: $HALF}}}
  - name: joined
    input: [txns, payments]
    key_by: [card, card]
    wasm: {module: $ROOT/udfs/build/regular-join-$LANG.wasm, config: {report_at: 4102444800000}}
  - {name: out, input: joined, sink: {file: {path: $DIR/joined.jsonl}}}
$SOURCES`

const coSources = `  - {name: txns_out, input: txns, sink: {file: {path: $DIR/txns.jsonl}}}
  - {name: payments_out, input: payments, sink: {file: {path: $DIR/payments.jsonl}}}
`

func coText(lang, dir string, rate float64, backend string, sources bool) string {
	src := ""
	if sources {
		src = coSources
	}
	r := strings.NewReplacer("$LANG", lang, "$SOURCES", src, "$RATE", fmt.Sprint(rate), "$HALF", fmt.Sprint(rate/2), "$BACKEND", backend)
	return strings.ReplaceAll(r.Replace(coJob), "$DIR", dir)
}

// coModel is the brute-force regular join of the two inputs' values,
// keyed by card, and the report of each card: what the operator must
// publish, sorted.
func coModel(t *testing.T, lefts, rights []string) []string {
	t.Helper()
	byCard := func(lines []string) map[string][]string {
		m := map[string][]string{}
		for _, l := range lines {
			var v struct {
				Card string `json:"card"`
			}
			if err := json.Unmarshal([]byte(l), &v); err != nil || v.Card == "" {
				t.Fatalf("source record %s: no card (%v)", l, err)
			}
			m[v.Card] = append(m[v.Card], l)
		}
		return m
	}
	ls, rs := byCard(lefts), byCard(rights)
	var out []string
	for card, l := range ls {
		for _, a := range l {
			for _, b := range rs[card] {
				out = append(out, `{"left":`+a+`,"right":`+b+`}`)
			}
		}
	}
	for card := range ls {
		out = append(out, fmt.Sprintf(`{"key":%q,"left":%d,"right":%d}`, card, len(ls[card]), len(rs[card])))
	}
	for card := range rs {
		if _, ok := ls[card]; !ok {
			out = append(out, fmt.Sprintf(`{"key":%q,"left":0,"right":%d}`, card, len(rs[card])))
		}
	}
	sort.Strings(out)
	return out
}

// TestCheckpointTwoInputWasm runs the two-input Wasm operator (its Go,
// C, Rust and AssemblyScript builds) uninterrupted, checks its output against the model, then crashes it
// after checkpoints and restores it (on memory and on Pebble state): the
// published output must still be the model's, each pair and each report
// once.
func TestCheckpointTwoInputWasm(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	for _, lang := range []string{"go", "c", "rust", "as"} {
		t.Run(lang, func(t *testing.T) {
			ref := t.TempDir()
			if _, err := newChkJob(t, engine, coText(lang, ref, 0, "memory", true), "memory").Run(context.Background()); err != nil {
				t.Fatal(err)
			}
			want := coModel(t, sinkLines(t, ref, "txns.jsonl"), sinkLines(t, ref, "payments.jsonl"))
			if len(want) < 10000 {
				t.Fatalf("the model joins %d records: the data does not exercise the join", len(want))
			}
			diff("joined (uninterrupted)", joinedLines(t, ref), want, t)
			for _, backend := range []string{"memory", "pebble"} {
				t.Run(backend, func(t *testing.T) {
					e := playAttempts(t, engine, backend, "co", func(out string) string { return coText(lang, out, chkRate/10, backend, false) },
						attempt{parallelism: 2, checkpoints: []int64{600, 1200}, crashAt: 1800},
						attempt{parallelism: 2, checkpoints: []int64{500}, crashAt: 1000},
						attempt{parallelism: 2})
					diff("joined", joinedLines(t, e.out), want, t)
				})
			}
		})
	}
}

// TestTwoInputMisuse: a module and a node that disagree on the number of
// inputs are refused when the job is planned, and a key_by that does not
// fit the inputs when the spec is parsed, each with one line.
func TestTwoInputMisuse(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	plan := func(text string) error {
		root, _ := filepath.Abs("..")
		spec, err := jobspec.Parse([]byte(strings.ReplaceAll(text, "$ROOT", root)), "job.yaml")
		if err != nil {
			return err
		}
		b := openBackend(t, jobspec.BackendMemory)
		_, err = dataflow.NewJob(context.Background(), spec, dataflow.Options{
			Connectors: connectors.Registry{}, Engine: engine,
			StateBackends: func(string) (state.Backend, error) { return b, nil },
		})
		return err
	}
	const head = `name: m
nodes:
  - {name: a, source: {generator: {kind: transactions, count: 10}}}
  - {name: b, source: {generator: {kind: transactions, count: 10}}}
`
	for _, tc := range []struct {
		name, node, want string
		invalid          bool // a jobspec.ErrInvalid, with the line
	}{
		{"one-input module, two keys", `  - {name: j, input: [a, b], key_by: [card, card], wasm: {module: $ROOT/udfs/build/counter-go.wasm}}`,
			"job m: node \"j\" (line 5): module ", false},
		{"two-input module on a union", `  - {name: j, input: [a, b], key_by: card, wasm: {module: $ROOT/udfs/build/regular-join-go.wasm}}`,
			"is a two-input operator (it exports eddy_process2): its node needs input: [left, right] and key_by: [left_key, right_key]", false},
		{"three keys", `  - {name: j, input: [a, b], key_by: [card, card, card], wasm: {module: $ROOT/udfs/build/regular-join-go.wasm}}`,
			"job.yaml:5: node \"j\": key_by names 3 keys", true},
		{"two keys, one input", `  - {name: j, input: a, key_by: [card, card], wasm: {module: $ROOT/udfs/build/regular-join-go.wasm}}`,
			"job.yaml:5: node \"j\": key_by [card, card] names a key per input, so the node needs two inputs", true},
		{"typo", `  - {name: j, input: [a, b], key_bye: [card, card], wasm: {module: $ROOT/udfs/build/regular-join-go.wasm}}`,
			"job.yaml:5: unknown field \"key_bye\" in node \"j\" (did you mean \"key_by\"?)", true},
		{"key_by a mapping", `  - {name: j, input: [a, b], key_by: {left: card}, wasm: {module: $ROOT/udfs/build/regular-join-go.wasm}}`,
			"job.yaml:5: key_by must be a key field or a list of them", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := plan(head + tc.node + "\n  - {name: out, input: j, sink: {discard: {}}}\n")
			if err == nil {
				t.Fatal("planned without an error")
			}
			msg := err.Error()
			if !strings.Contains(msg, tc.want) || strings.Contains(msg, "\n") {
				t.Fatalf("error %q: want one line containing %q", msg, tc.want)
			}
			if tc.invalid != errors.Is(err, jobspec.ErrInvalid) {
				t.Fatalf("error %q: errors.Is(jobspec.ErrInvalid) = %v, want %v", msg, !tc.invalid, tc.invalid)
			}
		})
	}
}

// TestSwapTwoInput hot-swaps a two-input Wasm node mid-stream, the Go
// build of udfs/regularjoin for the C one and for the AssemblyScript one
// (the same state encoding), at a
// swap savepoint whose barrier comes on both inputs: both tasks of the
// node pause for it, and the published output is still exactly the
// model's, each pair and each card's report once, so the state both
// inputs built under v1 (pending rows and the report timers) went on
// under v2.
func TestSwapTwoInput(t *testing.T) {
	engine := newEngine(t, host.DefaultConfig())
	ref := t.TempDir()
	if _, err := newChkJob(t, engine, coText("go", ref, 0, "memory", true), "memory").Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := coModel(t, sinkLines(t, ref, "txns.jsonl"), sinkLines(t, ref, "payments.jsonl"))
	for _, to := range []string{"c", "as"} {
		for _, backend := range []string{"memory", "pebble"} {
			t.Run(to+"/"+backend, func(t *testing.T) {
				e := newChkEnv(t, engine)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				job := newChkJob(t, engine, coText("go", e.out, chkRate/40, backend, false), backend)
				run, err := job.StartDeployment(ctx, dataflow.Deployment{JobID: "chk", Tasks: taskIDs(job), Checkpointing: e.checkpointing()}, nil)
				if err != nil {
					t.Fatal(err)
				}
				runs := []*dataflow.Running{run}
				waitRecords(t, job, runs, 800)
				e.checkpoint(job, runs, true)
				prepareAll(t, runs, dataflow.Swap{ID: 1, Node: "joined", Module: udf(t, engine, "regular-join-"+to)})
				waitRecords(t, job, runs, 1600)
				e.swapAt(job, runs, 1, "joined")
				if n := sourceRecords(job); n >= 4500 {
					t.Fatalf("the sources had produced all %d records by the swap: it was not mid-stream", n)
				}
				waitAll(t, runs)
				diff("joined across the swap", joinedLines(t, e.out), want, t)
			})
		}
	}
}
