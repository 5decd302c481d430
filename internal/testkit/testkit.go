// Package testkit holds what the tests of several packages share: waiting
// for a state with a deadline (Eventually), a logger into the test's output
// (Logger), reading what a file sink wrote (ReadLines), the length-prefixed
// frames of the ABI's state reads (Frames), a TCP listener on a port the
// kernel picks (Listen), and the committed Wasm modules (WasmModules).
//
// It is for tests only: no package of the module imports it outside its
// _test.go files. It depends on the standard library alone, so that any
// test may use it without pulling anything in; the fake keyed host, which
// needs wazero, is its own package (testkit/keyedhost).
package testkit

import (
	"bufio"
	"encoding/binary"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// maxPoll is the longest pause between two polls of Eventually.
const maxPoll = 100 * time.Millisecond

// Eventually polls cond until it holds and returns how long that took. If
// it does not hold within the given time, the test fails with what ("the
// job to finish: not within 1m0s"). The polls start a millisecond apart and
// back off to 100 ms, so that a quick state is seen at once and a slow one
// (a cond that runs a process) costs little. cond runs on the test's
// goroutine: it may fail the test itself when waiting longer cannot help.
func Eventually(t testing.TB, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	deadline := start.Add(within)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
		time.Sleep(pause)
		pause = min(2*pause, maxPoll)
	}
	return time.Since(start)
}

// Logger returns a logger into the test's output: warnings and errors, and
// everything from info up with -v. Lines logged after the test ended (by
// goroutines still stopping) are dropped, since t.Log must not be called
// then. Call it before starting what logs to it: its cleanup, registered
// first, runs after every cleanup that stops something.
func Logger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	level := slog.LevelWarn
	if testing.Verbose() {
		level = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// testWriter sends lines to t.Log until the test ends.
type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

// ReadLines returns what a file sink wrote to path: the lines of path, or
// of its parts (the files whose names start with path's, in name order)
// when the sink was parallel, each in the order written.
func ReadLines(t testing.TB, path string) []string {
	t.Helper()
	files, err := filepath.Glob(path + "*")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, name := range files {
		f, err := os.Open(name)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			lines = append(lines, sc.Text())
		}
		f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return lines
}

// Frames encodes parts as the state reads of ABI version 2 return a list
// and a map's entries (abi/ABI.md, state_list): each part as a
// little-endian u32 length and its bytes.
func Frames[T ~string | ~[]byte](parts ...T) []byte {
	var b []byte
	for _, p := range parts {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

// Listen returns a TCP listener on 127.0.0.1 at a port the kernel picks,
// closed when the test ends. Serve on the listener itself: a port picked
// and closed again may be taken by another process before it is bound
// anew.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// WasmModules returns the Wasm modules the repository builds and commits:
// the host's test operators (host/testdata) and the example operators
// (udfs/build), among them Go-built ones of megabytes with every kind of
// instruction Go emits. It fails the test when either folder has none.
func WasmModules(t testing.TB) []string {
	t.Helper()
	root := repoRoot(t)
	var paths []string
	for _, dir := range []string{"host/testdata", "udfs/build"} {
		pattern := filepath.Join(root, dir, "*.wasm")
		p, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		if len(p) == 0 {
			t.Fatalf("no modules match %s", pattern)
		}
		paths = append(paths, p...)
	}
	return paths
}

// repoRoot is the module's root: the nearest folder above the test's
// working directory (its package's folder) that holds go.mod. The source
// path runtime.Caller reports is no help: the Makefile builds with
// -trimpath.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testkit: no go.mod above the test's directory")
		}
		dir = parent
	}
}
