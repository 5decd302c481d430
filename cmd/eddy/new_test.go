package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestNewBuildsAndRuns scaffolds every language and kind eddy new offers
// with the real binary, builds each project with its own Makefile,
// unchanged and with no network (GOPROXY=off, no repository around it),
// and runs its test vector through the real host: `make test` (eddy test)
// when this eddy has that command, else its job.yaml with eddy run, whose
// output must be the vector's expected output.
func TestNewBuildsAndRuns(t *testing.T) {
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	hasTest := !strings.Contains(eddy(t, "test", "-h").stderr, `unknown command "test"`)
	for _, lang := range []string{"go", "c"} {
		if lang == "c" {
			if _, err := exec.LookPath("clang"); err != nil {
				t.Skip("clang is not installed (Debian: clang lld wasi-libc libclang-rt-14-dev-wasm32)")
			}
		}
		for _, kind := range []string{"operator", "keyed", "aggregate", "window"} {
			t.Run(lang+"/"+kind, func(t *testing.T) {
				name := "my-" + kind
				dir := filepath.Join(t.TempDir(), name)
				r := eddy(t, "new", name, "--lang", lang, "--kind", kind, "--dir", dir)
				if r.code != 0 {
					t.Fatalf("eddy new exited %d: %s", r.code, r.stderr)
				}
				for _, f := range []string{"Makefile", "README.md", "job.yaml", "testdata/input.jsonl", "testdata/expected.jsonl"} {
					if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
						t.Errorf("the project has no %s: %v", f, err)
					}
				}
				readme, err := os.ReadFile(filepath.Join(dir, "README.md"))
				if err != nil || !bytes.Contains(readme, []byte("-o "+name+".wasm")) {
					t.Errorf("README.md does not give the build command (%v)", err)
				}
				makeIn(t, dir)
				if r := eddy(t, "validate", filepath.Join(dir, "job.yaml")); r.code != 0 {
					t.Fatalf("eddy validate job.yaml exited %d: %s", r.code, r.stderr)
				}
				if hasTest {
					makeIn(t, dir, "test", "EDDY="+eddyBin)
					return
				}
				if r := eddy(t, "run", filepath.Join(dir, "job.yaml")); r.code != 0 {
					t.Fatalf("eddy run job.yaml exited %d: %s", r.code, r.stderr)
				}
				sameLines(t, filepath.Join(dir, "out/output.jsonl"), filepath.Join(dir, "testdata/expected.jsonl"))
			})
		}
	}
}

// makeIn runs make in dir, as an author would, away from the repository's
// go.mod and without a module proxy: a scaffold that needed either would
// fail here.
func makeIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("make", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local",
		"XDG_CACHE_HOME="+filepath.Join(os.TempDir(), "eddy-e2e-cache"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
}

// TestNewRefuses checks that every bad invocation ends with one line that
// says what is wrong, and writes nothing.
func TestNewRefuses(t *testing.T) {
	full := t.TempDir()
	if err := os.WriteFile(filepath.Join(full, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no name", []string{"--lang", "go"}, 2, "want one NAME"},
		{"two names", []string{"a", "b", "--lang", "go"}, 2, "want one NAME"},
		{"bad name", []string{"My Op", "--lang", "go"}, 2, `bad name "My Op"`},
		{"path as name", []string{"../x", "--lang", "go"}, 2, `bad name "../x"`},
		{"no lang", []string{"x"}, 2, "--lang is required"},
		{"unknown lang", []string{"x", "--lang", "java"}, 2, `unknown --lang "java"`},
		{"unknown kind", []string{"x", "--lang", "c", "--kind", "sink"}, 2, `unknown --kind "sink"`},
		{"rust not yet", []string{"x", "--lang", "rust"}, 2, "the Rust SDK is not available yet"},
		{"as not yet", []string{"x", "--lang", "as"}, 2, "the AssemblyScript SDK is not available yet"},
		{"non-empty dir", []string{"x", "--lang", "go", "--dir", full}, 1, "exists and is not empty"},
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
