package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	eddysdk "github.com/eddy-stream/eddy"
)

// TestNewBuildsAndRuns scaffolds every language and kind eddy new offers
// with the real binary, builds each project with its own build file,
// unchanged and with no network (GOPROXY=off, no repository around it),
// and runs its test vector through the real host: `make test` (eddy test)
// when this eddy has that command, else its job.yaml with eddy run, whose
// output must be the vector's expected output.
func TestNewBuildsAndRuns(t *testing.T) {
	hasTest := !strings.Contains(eddy(t, "test", "-h").stderr, `unknown command "test"`)
	// What builds a project and runs its vector through eddy test, per
	// language: the commands its README gives.
	steps := map[string]struct {
		tools       []string
		build, test [][]string
	}{
		"go": {[]string{"make"}, [][]string{{"make"}}, [][]string{{"make", "test", "EDDY=" + eddyBin}}},
		"c":  {[]string{"make", "clang"}, [][]string{{"make"}}, [][]string{{"make", "test", "EDDY=" + eddyBin}}},
		"as": {[]string{"npm"}, [][]string{{"npm", "install", "--no-audit", "--no-fund", "--prefer-offline"}, {"npm", "run", "build"}},
			[][]string{{"npm", "test"}}},
		// Rust's build file is Cargo.toml alone: eddy test is run as the
		// README gives it.
		"rust": {[]string{"/usr/bin/cargo", "/usr/bin/rustc"},
			[][]string{{"env", "RUSTC=/usr/bin/rustc", "/usr/bin/cargo", "build", "--offline", "--release", "--target", "wasm32-wasi"}}, nil},
	}
	for _, lang := range []string{"go", "c", "as", "rust"} {
		t.Run(lang, func(t *testing.T) {
			if !slices.Contains(eddysdk.SDKLanguages(), lang) {
				t.Skipf("this eddy carries no %s SDK (TestNewRefuses checks that eddy new says so)", lang)
			}
			st, ok := steps[lang]
			if !ok {
				t.Fatalf("the %s SDK is embedded, but this test does not know how to build its projects", lang)
			}
			for _, tool := range st.tools {
				if _, err := exec.LookPath(tool); err != nil {
					t.Skipf("%s is not installed", tool)
				}
			}
			for _, kind := range []string{"operator", "keyed", "aggregate", "window"} {
				t.Run(kind, func(t *testing.T) {
					name := "my-" + kind
					dir := filepath.Join(t.TempDir(), name)
					wasm := name + ".wasm"
					if lang == "rust" {
						wasm = "target/wasm32-wasi/release/" + strings.ReplaceAll(name, "-", "_") + ".wasm"
					}
					r := eddy(t, "new", name, "--lang", lang, "--kind", kind, "--dir", dir)
					if r.code != 0 {
						t.Fatalf("eddy new exited %d: %s", r.code, r.stderr)
					}
					for _, f := range []string{"README.md", "job.yaml", "testdata/input.jsonl", "testdata/expected.jsonl"} {
						if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
							t.Errorf("the project has no %s: %v", f, err)
						}
					}
					readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
					if err != nil || !bytes.Contains(readme, []byte(wasm)) {
						t.Errorf("README.md does not say where the build writes %s (%v)", wasm, err)
					}
					for _, cmd := range st.build {
						runIn(t, dir, cmd...)
					}
					if r := eddy(t, "validate", filepath.Join(dir, "job.yaml")); r.code != 0 {
						t.Fatalf("eddy validate job.yaml exited %d: %s", r.code, r.stderr)
					}
					if hasTest {
						test := st.test
						if test == nil {
							test = [][]string{append([]string{eddyBin, "test", wasm}, newKinds[kind].testArgs...)}
						}
						for _, cmd := range test {
							runIn(t, dir, cmd...)
						}
						return
					}
					if r := eddy(t, "run", filepath.Join(dir, "job.yaml")); r.code != 0 {
						t.Fatalf("eddy run job.yaml exited %d: %s", r.code, r.stderr)
					}
					// The job's file sink writes values; the vector has
					// eddy test's records.
					got, want := sortedLines(t, filepath.Join(dir, "out/output.jsonl")), expectedValues(t, filepath.Join(dir, "testdata/expected.jsonl"))
					if !slices.Equal(got, want) {
						t.Fatalf("job.yaml's output:\n%s\nwant the values of testdata/expected.jsonl:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
					}
				})
			}
		})
	}
}

// expectedValues are the values of the records of an eddy test --expect
// file, compact, sorted.
func expectedValues(t *testing.T, path string) []string {
	t.Helper()
	var values []string
	for _, line := range sortedLines(t, path) {
		var r struct{ Value json.RawMessage }
		if err := json.Unmarshal([]byte(line), &r); err != nil || r.Value == nil {
			t.Fatalf("%s: %q is not a record with a value (%v)", path, line, err)
		}
		var b bytes.Buffer
		if err := json.Compact(&b, r.Value); err != nil {
			t.Fatal(err)
		}
		values = append(values, b.String())
	}
	slices.Sort(values)
	return values
}

// runIn runs a build or test command in dir, as an author would: away from
// the repository's go.mod and without a Go module proxy, so a scaffold
// that needed either fails here. (npm may reach its registry, for the
// AssemblyScript compiler.)
func runIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local",
		"XDG_CACHE_HOME="+filepath.Join(os.TempDir(), "eddy-e2e-cache"),
		"PATH="+filepath.Dir(eddyBin)+string(os.PathListSeparator)+os.Getenv("PATH")) // npm test's eddy
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
}

// TestNewRefuses checks that every bad invocation ends with one line that
// says what is wrong, and writes nothing.
func TestNewRefuses(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	type refusal struct {
		name string
		args []string
		code int
		want string
	}
	tests := []refusal{
		{"no name", []string{"--lang", "go"}, 2, "want one NAME"},
		{"two names", []string{"a", "b", "--lang", "go"}, 2, "want one NAME"},
		{"bad name", []string{"My Op", "--lang", "go"}, 2, `bad name "My Op"`},
		{"path as name", []string{"../x", "--lang", "go"}, 2, `bad name "../x"`},
		{"no lang", []string{"x"}, 2, "--lang is required"},
		{"unknown lang", []string{"x", "--lang", "java"}, 2, `unknown --lang "java"`},
		{"unknown kind", []string{"x", "--lang", "c", "--kind", "sink"}, 2, `unknown --kind "sink"`},
		{"non-empty dir", []string{"x", "--lang", "go", "--dir", full}, 1, "exists and is not empty"},
	}
	for _, lang := range []string{"rust", "as"} {
		if !slices.Contains(eddysdk.SDKLanguages(), lang) {
			tests = append(tests, refusal{lang + " not yet", []string{"x", "--lang", lang}, 2, "SDK is not available yet"})
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cwd := t.TempDir()
			cmd := exec.Command(eddyBin, append([]string{"new"}, tc.args...)...)
			cmd.Dir = cwd
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			ee, ok := err.(*exec.ExitError)
			if !ok || ee.ExitCode() != tc.code {
				t.Fatalf("eddy new %v: %v, want exit code %d; stderr: %s", tc.args, err, tc.code, stderr.String())
			}
			line := strings.TrimSuffix(stderr.String(), "\n")
			if strings.Contains(line, "\n") || !strings.Contains(line, tc.want) {
				t.Errorf("stderr = %q, want one line with %q", stderr.String(), tc.want)
			}
			if entries, _ := os.ReadDir(cwd); len(entries) != 0 {
				t.Errorf("eddy new wrote %s after refusing", entries[0].Name())
			}
		})
	}
	if b, err := os.ReadFile(filepath.Join(full, "keep.txt")); err != nil || string(b) != "mine" {
		t.Errorf("the non-empty directory was changed: %q, %v", b, err)
	}
}
