package main

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/connectors/nexmark"
)

const nexmarkSpec = `name: nexmark-source
parallelism: 3
nodes:
  - name: events
    source: {generator: {kind: nexmark, count: 50000, seed: 3, disorder: 4sNEXMARK}}
  - name: out
    input: events
    sink: {file: {path: $OUT/events.jsonl}}
`

// TestNexmarkRun: `eddy run` of a Nexmark source at parallelism 3 writes
// exactly the model's events, 1:3:46; a bad nexmark field is refused by
// `eddy validate` in one line.
func TestNexmarkRun(t *testing.T) {
	spec, out := inlineSpec(t, strings.Replace(nexmarkSpec, "NEXMARK", "", 1))
	if r := eddy(t, "run", spec); r.code != 0 {
		t.Fatalf("eddy run exited %d: %s", r.code, r.stderr)
	}
	parts, err := filepath.Glob(filepath.Join(out, "events.jsonl*"))
	if err != nil || len(parts) != 3 {
		t.Fatalf("output files %v (%v), want one per sink subtask", parts, err)
	}
	var got []string
	for _, p := range parts {
		got = append(got, sortedLines(t, p)...)
	}
	slices.Sort(got)

	c := nexmark.DefaultConfig()
	c.Seed, c.DisorderMs = 3, 4000
	g, err := nexmark.New(c)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for n := range uint64(50000) {
		v, _ := g.AppendJSON(nil, n)
		want = append(want, string(v))
	}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%d events written, not the model's %d", len(got), len(want))
	}
	var kinds [3]int
	for _, l := range got {
		var e nexmark.Event
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatal(err)
		}
		kinds[e.Type]++
	}
	if kinds != [3]int{1000, 3000, 46000} {
		t.Fatalf("kinds %v, want 1000:3000:46000", kinds)
	}

	bad, _ := inlineSpec(t, strings.Replace(nexmarkSpec, "NEXMARK", ", nexmark: {hot_bidders_ratio: -1}", 1))
	r := eddy(t, "validate", bad)
	if msg := strings.TrimSpace(r.stderr); r.code == 0 || !strings.Contains(msg, "nexmark.hot_bidders_ratio is -1") || strings.Contains(msg, "\n") {
		t.Fatalf("validate of a bad nexmark field: exit %d, %q", r.code, r.stderr)
	}
}
