package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// These tests run the real eddy binary on specs under testdata/ and compare
// the files it writes with expected outputs computed independently (by a
// script, from the same inputs).

var eddyBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "eddy-e2e")
	if err != nil {
		panic(err)
	}
	eddyBin = filepath.Join(dir, "eddy")
	build := exec.Command("go", "build", "-o", eddyBin, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		panic("build eddy: " + err.Error())
	}
	// Every server a test starts forms its cluster with this admin token,
	// and every client call sends it, unless a test says otherwise; the
	// CLI's configuration file is the test run's own.
	os.Setenv("EDDY_BOOTSTRAP_TOKEN", testToken)
	os.Setenv("EDDY_TOKEN", testToken)
	os.Setenv("EDDY_CONFIG", filepath.Join(dir, "config.yaml"))
	os.Setenv("EDDY_CLI_CONTEXT", "") // standalones save no context but where a test asks
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testToken is the admin token of the test clusters.
var testToken = "eddy_" + strings.Repeat("e", 16) + "_" + strings.Repeat("7", 64)

func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// writeSpec copies testdata/name with $ROOT and $OUT filled in and returns
// its path and the output directory.
func writeSpec(t *testing.T, name string) (spec, out string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	out = t.TempDir()
	text := strings.NewReplacer("$ROOT", repoRoot(t), "$OUT", out).Replace(string(raw))
	spec = filepath.Join(out, name)
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec, out
}

type result struct {
	code           int
	stdout, stderr string
}

func eddy(t testing.TB, args ...string) result {
	t.Helper()
	return eddyEnv(t, nil, args...)
}

func sortedLines(t testing.TB, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	slices.Sort(lines)
	return lines
}

func sameLines(t *testing.T, gotPath, wantPath string) {
	t.Helper()
	got, want := sortedLines(t, gotPath), sortedLines(t, wantPath)
	if len(got) != len(want) {
		t.Fatalf("%s: %d lines, want %d (as in %s)", gotPath, len(got), len(want), wantPath)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: sorted line %d = %s, want %s", gotPath, i, got[i], want[i])
		}
	}
}

func TestRunPipelines(t *testing.T) {
	tests := []struct {
		spec    string
		outputs map[string]string // output file → expected file
		summary []string          // substrings of the summary
	}{
		{"project_c.yaml", map[string]string{"out.jsonl": "project.expected.jsonl"}, []string{"job project-c finished", "3000", "1466"}},
		{"project_go.yaml", map[string]string{"out.jsonl": "project.expected.jsonl"}, []string{"job project-go finished", "1466"}},
		{"split_union.yaml", map[string]string{"out.jsonl": "union.expected.jsonl"}, []string{"4800"}},
		{"fanout.yaml", map[string]string{"big.jsonl": "project.expected.jsonl", "de.jsonl": "project_de.expected.jsonl", "words.jsonl": "split.expected.jsonl"}, []string{"310", "2400"}},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			spec, out := writeSpec(t, tc.spec)
			r := eddy(t, "run", spec)
			if r.code != 0 {
				t.Fatalf("eddy run exited %d: %s", r.code, r.stderr)
			}
			for got, want := range tc.outputs {
				sameLines(t, filepath.Join(out, got), filepath.Join("testdata", want))
			}
			for _, s := range tc.summary {
				if !strings.Contains(r.stderr, s) {
					t.Errorf("summary lacks %q:\n%s", s, r.stderr)
				}
			}
		})
	}
}

// inlineSpec writes text (with $ROOT and $OUT) to a temp spec file.
func inlineSpec(t testing.TB, text string) (spec, out string) {
	t.Helper()
	out = t.TempDir()
	text = strings.NewReplacer("$ROOT", repoRoot(t), "$OUT", out).Replace(text)
	spec = filepath.Join(out, "job.yaml")
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return spec, out
}

const wasmJob = `name: hostile
nodes:
  - name: txns
    source: {file: {path: $ROOT/cmd/eddy/testdata/txns.jsonl}}
  - name: op
    input: txns
    wasm: {module: MODULE}
  - name: out
    input: op
    sink: {file: {path: $OUT/out.jsonl}}
`

func TestCLIErrors(t *testing.T) {
	tests := []struct {
		name  string
		args  []string // the spec path is appended
		spec  string
		code  int
		wants []string
	}{
		{"typo in spec", []string{"run"}, strings.Replace(wasmJob, "    source:", "    sorce:", 1), 1,
			[]string{`job.yaml:4: unknown field "sorce" in node "txns" (did you mean "source"?)`}},
		{"unknown module path", []string{"validate"}, strings.Replace(wasmJob, "MODULE", "$OUT/nope.wasm", 1), 1,
			[]string{`node "op" (line 7)`, "nope.wasm", "no such file"}},
		{"missing export", []string{"validate"}, strings.Replace(wasmJob, "MODULE", "$ROOT/host/testdata/missing_export.wasm", 1), 1,
			[]string{`missing export "eddy_process"`}},
		{"unknown import", []string{"run"}, strings.Replace(wasmJob, "MODULE", "$ROOT/host/testdata/bad_import.wasm", 1), 1,
			[]string{"nope"}},
		{"not wasm", []string{"validate"}, strings.Replace(wasmJob, "MODULE", "$ROOT/cmd/eddy/testdata/txns.jsonl", 1), 1,
			[]string{"txns.jsonl"}},
		{"looping operator", []string{"run", "--call-timeout", "300ms"}, strings.Replace(wasmJob, "MODULE", "$ROOT/host/testdata/loop.wasm", 1), 1,
			[]string{"job hostile failed: ", "task txns→op→out[0]", "300ms deadline"}},
		{"trapping operator", []string{"run"}, strings.Replace(wasmJob, "MODULE", "$ROOT/host/testdata/trap.wasm", 1), 1,
			[]string{"op", "unreachable"}},
		{"out of bounds emit", []string{"run"}, strings.Replace(wasmJob, "MODULE", "$ROOT/host/testdata/oob_emit.wasm", 1), 1,
			[]string{"emit"}},
		{"memory bomb", []string{"run", "--memory-limit", "8388608"}, strings.Replace(wasmJob, "MODULE", "$ROOT/host/testdata/grow_bomb.wasm", 1), 1,
			[]string{"memory limit"}},
		{"emit flood", []string{"run"}, strings.Replace(wasmJob, "MODULE", "$ROOT/host/testdata/emit_flood.wasm", 1), 1,
			[]string{"job hostile failed: ", "eddy_process emitted more than 16 MiB in one call (limit max_emit_bytes=16777216;"}},
		{"no args", []string{"run"}, "", 2, []string{"one job spec file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.spec != "" {
				spec, _ := inlineSpec(t, tc.spec)
				args = append(slices.Clone(args), spec)
			}
			r := eddy(t, args...)
			if r.code != tc.code {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", r.code, tc.code, r.stderr)
			}
			last := lastLine(r.stderr)
			for _, w := range tc.wants {
				if !strings.Contains(last, w) {
					t.Errorf("error line lacks %q:\n%s", w, last)
				}
			}
			if !strings.HasPrefix(last, "eddy: ") {
				t.Errorf("last line is not the one-line error: %q", last)
			}
			// The error is all it prints: no summary, no logs above it.
			if r.stdout != "" || r.stderr != last+"\n" {
				t.Errorf("more than the error line:\nstdout:\n%sstderr:\n%s", r.stdout, r.stderr)
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestValidateOK(t *testing.T) {
	spec, _ := writeSpec(t, "fanout.yaml")
	r := eddy(t, "validate", spec)
	if r.code != 0 || !strings.Contains(r.stdout, `job "fanout" is valid (8 nodes)`) {
		t.Fatalf("validate: code %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func TestGeneratorJobJSONSummary(t *testing.T) {
	spec, _ := inlineSpec(t, `name: gen
parallelism: 2
nodes:
  - name: txns
    source: {generator: {kind: transactions, count: 20000, seed: 7}}
  - name: proj
    input: txns
    wasm: {module: $ROOT/udfs/build/project-c.wasm, config: {fields: [card, amount]}}
  - name: out
    input: proj
    sink: {discard: {}}
`)
	r := eddy(t, "run", "--json", spec)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{`"name":"txns","kind":"source","parallelism":2,"records_in":0,"records_out":20000`, `"name":"out","kind":"sink","parallelism":2,"records_in":20000`} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("summary lacks %s:\n%s", want, r.stdout)
		}
	}
}
