package jobspec

import (
	"errors"
	"strings"
	"testing"
)

// upgradeBase is the running spec every case of TestDiff edits.
const upgradeBase = `name: card-activity
parallelism: 2
checkpoint: {interval: 10s}
nodes:
  - name: txns
    source: {generator: {kind: transactions, rate: 5000, seed: 7}}
    event_time: {field: ts, max_out_of_orderness: 5s}
  - name: clicks
    source: {generator: {kind: sequence}}
  - name: enrich
    input: txns
    wasm: {module: enrich@1, config: {currency: EUR, limit: 10}}
  - name: count
    input: enrich
    key_by: card
    wasm: {module: counter@1}
  - name: per_card
    input: count
    key_by: card
    window: {tumbling: 1m}
    aggregate: {wasm: {module: card-stats@1}}
  - name: out
    input: [per_card, clicks]
    sink: {file: {path: alerts.jsonl}}
`

func mustParse(t *testing.T, yaml string) *Spec {
	t.Helper()
	s, err := Parse([]byte(yaml), "")
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, yaml)
	}
	return s
}

// edit replaces old with new in upgradeBase, once, and fails when old is
// not there (a case that edits nothing tests nothing).
func edit(t *testing.T, pairs ...string) string {
	t.Helper()
	s := upgradeBase
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("edit: %q is not in the base spec", pairs[i])
		}
		s = strings.Replace(s, pairs[i], pairs[i+1], 1)
	}
	return s
}

func TestDiff(t *testing.T) {
	tests := []struct {
		name    string
		edits   []string
		want    []NodeChange
		rescale bool
		err     string // the refusal's line, before ": " and the advice
	}{
		{name: "same spec"},
		{name: "same spec written differently",
			edits: []string{"config: {currency: EUR, limit: 10}", "config: {limit: 10.0, currency: \"EUR\"}",
				"input: [per_card, clicks]", "input: [clicks, per_card]"}},
		{name: "nodes in another order",
			edits: []string{"  - name: clicks\n    source: {generator: {kind: sequence}}\n", "",
				"sink: {file: {path: alerts.jsonl}}\n", "sink: {file: {path: alerts.jsonl}}\n  - name: clicks\n    source: {generator: {kind: sequence}}\n"}},
		{name: "module version",
			edits: []string{"module: counter@1", "module: counter@2"},
			want:  []NodeChange{{Node: "count", Module: "counter@2"}}},
		{name: "module without version is another reference",
			edits: []string{"module: counter@1", "module: counter"},
			want:  []NodeChange{{Node: "count", Module: "counter"}}},
		{name: "config only",
			edits: []string{"currency: EUR", "currency: USD"},
			want:  []NodeChange{{Node: "enrich", Config: []byte(`{"currency":"USD","limit":10}`), ConfigChanged: true}}},
		{name: "config added to a node without one",
			edits: []string{"module: counter@1}", "module: counter@1, config: {reset: true}}"},
			want:  []NodeChange{{Node: "count", Config: []byte(`{"reset":true}`), ConfigChanged: true}}},
		{name: "config removed",
			edits: []string{", config: {currency: EUR, limit: 10}", ""},
			want:  []NodeChange{{Node: "enrich", Config: []byte(`{}`), ConfigChanged: true}}},
		{name: "empty config is no config",
			edits: []string{"module: counter@1}", "module: counter@1, config: {}}"}},
		{name: "module and config of two nodes, in spec order",
			edits: []string{"module: counter@1", "module: counter@3", "enrich@1, config: {currency: EUR", "enrich@2, config: {currency: GBP"},
			want: []NodeChange{
				{Node: "enrich", Module: "enrich@2", Config: []byte(`{"currency":"GBP","limit":10}`), ConfigChanged: true},
				{Node: "count", Module: "counter@3"},
			}},
		{name: "wasm aggregate of a window",
			edits: []string{"card-stats@1", "card-stats@2"},
			want:  []NodeChange{{Node: "per_card", Module: "card-stats@2"}}},
		{name: "job parallelism, sources kept",
			edits: []string{"parallelism: 2", "parallelism: 4",
				"  - name: txns\n", "  - name: txns\n    parallelism: 2\n", "  - name: clicks\n", "  - name: clicks\n    parallelism: 2\n"},
			rescale: true},
		{name: "job parallelism changes a source's", edits: []string{"parallelism: 2", "parallelism: 4"},
			err: "node txns: the parallelism of a source changed from 2 to 4"},
		{name: "source parallelism", edits: []string{"  - name: clicks\n", "  - name: clicks\n    parallelism: 1\n"},
			err: "node clicks: the parallelism of a source changed from 2 to 1"},
		{name: "node parallelism",
			edits:   []string{"  - name: count\n", "  - name: count\n    parallelism: 1\n"},
			rescale: true},
		{name: "node parallelism written but the same",
			edits: []string{"  - name: count\n", "  - name: count\n    parallelism: 2\n"}},
		{name: "parallelism and a module",
			edits: []string{"  - name: count\n", "  - name: count\n    parallelism: 3\n",
				"module: counter@1", "module: counter@2"},
			want:    []NodeChange{{Node: "count", Module: "counter@2"}},
			rescale: true},

		{name: "job name", edits: []string{"name: card-activity", "name: cards"},
			err: "the job's name changed from card-activity to cards"},
		{name: "max parallelism", edits: []string{"parallelism: 2\n", "parallelism: 2\nmax_parallelism: 256\n"},
			err: "max_parallelism changed from 128 to 256"},
		{name: "batch size", edits: []string{"parallelism: 2\n", "parallelism: 2\nbatch_size: 64\n"},
			err: "batch_size changed from 256 to 64"},
		{name: "buffer timeout", edits: []string{"parallelism: 2\n", "parallelism: 2\nbuffer_timeout: 5ms\n"},
			err: "buffer_timeout changed from 100ms to 5ms"},
		{name: "state backend", edits: []string{"parallelism: 2\n", "parallelism: 2\nstate_backend: memory\n"},
			err: "state_backend changed from pebble to memory"},
		{name: "checkpoint", edits: []string{"interval: 10s", "interval: 1s"},
			err: "the checkpoint section changed"},
		{name: "node removed",
			edits: []string{"  - name: clicks\n    source: {generator: {kind: sequence}}\n", "", "input: [per_card, clicks]", "input: per_card"},
			err:   "node clicks was removed"},
		{name: "node added",
			edits: []string{"input: [per_card, clicks]", "input: [per_card, clicks, more]",
				"  - name: out\n", "  - name: more\n    source: {generator: {kind: sequence}}\n  - name: out\n"},
			err: "node more was added"},
		{name: "node renamed",
			edits: []string{"name: enrich", "name: enrich2", "input: enrich", "input: enrich2"},
			err:   "node enrich was removed"},
		{name: "input", edits: []string{"input: txns", "input: clicks", "input: [per_card, clicks]", "input: [per_card, txns]"},
			err: "node enrich: input changed from txns to clicks"},
		{name: "input added to a union",
			edits: []string{"input: [per_card, clicks]", "input: [per_card, clicks, enrich]"},
			err:   "node out: input changed from clicks, per_card to clicks, enrich, per_card"},
		{name: "key_by", edits: []string{"key_by: card\n    wasm", "key_by: merchant\n    wasm"},
			err: "node count: key_by changed from card to merchant"},
		{name: "key_by added", edits: []string{"input: txns\n", "input: txns\n    key_by: card\n"},
			err: "node enrich: key_by changed from (none) to card"},
		{name: "source", edits: []string{"rate: 5000", "rate: 6000"},
			err: "node txns: its source changed"},
		{name: "event time", edits: []string{"max_out_of_orderness: 5s", "max_out_of_orderness: 6s"},
			err: "node txns: its event_time changed"},
		{name: "sink", edits: []string{"alerts.jsonl", "alerts2.jsonl"},
			err: "node out: its sink changed"},
		{name: "window", edits: []string{"tumbling: 1m", "tumbling: 2m"},
			err: "node per_card: its window changed"},
		{name: "aggregate wasm to built-in",
			edits: []string{"aggregate: {wasm: {module: card-stats@1}}", "aggregate: count"},
			err:   "node per_card: aggregate changed from a wasm aggregate to count"},
		{name: "aggregate wasm to apply",
			edits: []string{"aggregate: {wasm: {module: card-stats@1}}", "aggregate: {apply: {module: card-stats@1}}"},
			err:   "node per_card: aggregate changed from a wasm aggregate to a wasm window function (apply)"},
		{name: "aggregate name",
			edits: []string{"aggregate: {wasm: {module: card-stats@1}}", "aggregate: {wasm: {module: card-stats@1}, name: stats}"},
			err:   "node per_card: aggregate name changed from (none) to stats"},
		{name: "kind",
			edits: []string{"wasm: {module: counter@1}", "window: {tumbling: 1m}\n    aggregate: count"},
			err:   "node count: changed from a wasm node to a window node"},
	}
	old := mustParse(t, upgradeBase)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := Diff(old, mustParse(t, edit(t, tc.edits...)))
			if tc.err != "" {
				var de *DiffError
				if !errors.As(err, &de) || !errors.Is(err, ErrNotInPlace) {
					t.Fatalf("Diff = %v, %v; want the refusal %q", d, err, tc.err)
				}
				if de.Change != tc.err {
					t.Fatalf("refusal %q, want %q", de.Change, tc.err)
				}
				if strings.ContainsAny(err.Error(), "\n") || !strings.HasPrefix(err.Error(), tc.err+": ") {
					t.Fatalf("the error is not one line starting with the change: %q", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Diff: %v", err)
			}
			if d.Rescale != tc.rescale {
				t.Errorf("Rescale = %v, want %v", d.Rescale, tc.rescale)
			}
			if got, want := changes(d.Changes), changes(tc.want); got != want {
				t.Errorf("changes\n%s\nwant\n%s", got, want)
			}
			if d.Empty() != (len(tc.want) == 0 && !tc.rescale) {
				t.Errorf("Empty = %v", d.Empty())
			}
		})
	}
}

func changes(cs []NodeChange) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.Node + " module=" + c.Module + " config=" + string(c.Config))
		if c.ConfigChanged {
			b.WriteString(" (changed)")
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestDiffErrorFor: the advice names the job to stop.
func TestDiffErrorFor(t *testing.T) {
	_, err := Diff(mustParse(t, upgradeBase), mustParse(t, edit(t, "input: txns", "input: clicks", "input: [per_card, clicks]", "input: [per_card, txns]")))
	var de *DiffError
	if !errors.As(err, &de) {
		t.Fatalf("Diff: %v", err)
	}
	want := "node enrich: input changed from txns to clicks: a topology change cannot be applied in place; " +
		"stop the job with a savepoint (eddy savepoint create job-3 --stop) and submit the new spec with --from-savepoint"
	if got := de.For("job-3"); got != want {
		t.Fatalf("For:\n%s\nwant\n%s", got, want)
	}
}

func TestOverride(t *testing.T) {
	tests := []struct {
		name   string
		node   string
		module string
		config []byte
		err    string // a part of the error; "" for none
		check  func(t *testing.T, s *Spec)
	}{
		{name: "module and config", node: "enrich", module: "enrich@2", config: []byte(`{"currency":"USD","big":12345678901234567890}`),
			check: func(t *testing.T, s *Spec) {
				w := s.Node("enrich").Wasm
				cfg, _ := w.ConfigJSON()
				if w.Module != "enrich@2" || string(cfg) != `{"big":12345678901234567890,"currency":"USD"}` {
					t.Fatalf("enrich = %s %s", w.Module, cfg)
				}
			}},
		{name: "module only keeps the config", node: "enrich", module: "enrich@3",
			check: func(t *testing.T, s *Spec) {
				w := s.Node("enrich").Wasm
				cfg, _ := w.ConfigJSON()
				if w.Module != "enrich@3" || string(cfg) != `{"currency":"EUR","limit":10}` {
					t.Fatalf("enrich = %s %s", w.Module, cfg)
				}
			}},
		{name: "config only keeps the module", node: "count", config: []byte(` {} `),
			check: func(t *testing.T, s *Spec) {
				if w := s.Node("count").Wasm; w.Module != "counter@1" || w.Config == nil || len(w.Config) != 0 {
					t.Fatalf("count = %+v", w)
				}
			}},
		{name: "wasm aggregate of a window", node: "per_card", module: "card-stats@2",
			check: func(t *testing.T, s *Spec) {
				if m := s.Node("per_card").Aggregate.Wasm.Module; m != "card-stats@2" {
					t.Fatalf("per_card = %s", m)
				}
			}},
		{name: "unknown node", node: "nope", module: "x@1", err: `override of node "nope": job card-activity has no such node`},
		{name: "source node", node: "txns", module: "x@1", err: `override of node "txns": it is a source node, which runs no Wasm module`},
		{name: "window with a built-in aggregate", node: "per_card", module: "x@1", err: "it is a window node"},
		{name: "config a list", node: "enrich", config: []byte(`[1]`), err: "config must be a JSON object"},
		{name: "config null", node: "enrich", config: []byte(`null`), err: "config must be a JSON object"},
		{name: "empty config keeps the config", node: "enrich", module: "enrich@4", config: []byte{},
			check: func(t *testing.T, s *Spec) {
				if w := s.Node("enrich").Wasm; w.Module != "enrich@4" || w.Config["currency"] != "EUR" {
					t.Fatalf("enrich = %+v", w)
				}
			}},
		{name: "config blank", node: "enrich", config: []byte(`  `), err: "config must be a JSON object"},
		{name: "config broken", node: "enrich", config: []byte(`{"a":`), err: "config is not valid JSON"},
		{name: "config with trailing data", node: "enrich", config: []byte(`{"a":1} {}`), err: "config has more after its JSON object"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			base := upgradeBase
			if tc.name == "window with a built-in aggregate" {
				base = strings.Replace(base, "aggregate: {wasm: {module: card-stats@1}}", "aggregate: count", 1)
			}
			s := mustParse(t, base)
			before := mustParse(t, base)
			err := s.Override(tc.node, tc.module, tc.config)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Override = %v, want an error with %q", err, tc.err)
				}
				// A refused override changes nothing.
				if d, derr := Diff(before, s); derr != nil || !d.Empty() {
					t.Fatalf("the spec changed: %v %v", d, derr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Override: %v", err)
			}
			tc.check(t, s)
		})
	}
}

// FuzzDecodeConfig: a configuration from the CLI or an RPC is an object
// or an error, never a panic, and what it decodes to writes as JSON again.
func FuzzDecodeConfig(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":1}`, `{"a":{"b":[1,2.5e300,"x",null,true]}}`, `[1]`, `null`, `{"a":1} x`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg, err := DecodeConfig(b)
		if err != nil {
			return
		}
		if _, err := (&WasmSpec{Config: cfg}).ConfigJSON(); err != nil {
			t.Fatalf("decoded config %q does not encode: %v", b, err)
		}
	})
}

// FuzzDiffSelf: any spec that parses is no change from itself, and a
// diff never panics.
func FuzzDiffSelf(f *testing.F) {
	f.Add([]byte(upgradeBase))
	f.Add([]byte(good))
	f.Fuzz(func(t *testing.T, b []byte) {
		a, err := Parse(b, "")
		if err != nil {
			return
		}
		again, err := Parse(b, "")
		if err != nil {
			t.Fatalf("the second parse failed: %v", err)
		}
		d, err := Diff(a, again)
		if err != nil || !d.Empty() {
			t.Fatalf("Diff of a spec with itself = %+v, %v\n%s", d, err, b)
		}
	})
}
