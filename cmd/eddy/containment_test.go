package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/internal/testkit"
)

// TestHostileJobIsContained: on one standalone worker, three hostile jobs
// fail, each with the one line of its bound — one whose module emits 1 MiB
// batches in an endless loop (it took 2.4 GB of the host before the emit
// bound), a table.grow bomb (3.6 GB, and the worker missed its heartbeats)
// and a memory.grow bomb filling its 64 MiB — while another job on the
// same worker keeps running, is not restarted, and the worker stays alive;
// the process's peak resident set stays well below what the bombs took.
func TestHostileJobIsContained(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a standalone process")
	}
	dir := t.TempDir()
	standalone, cli := standaloneProc(t, dir, "--data-dir", filepath.Join(dir, "data"), "--restart", "none", "--slots", "4")
	root := repoRoot(t)
	for name, file := range map[string]string{"echo": "echo.wasm", "flood": "emit_flood.wasm",
		"tables": "table_bomb.wasm", "memory": "memory_bomb.wasm"} {
		if r := cli("module", "upload", filepath.Join(root, "host/testdata", file), "--name", name); r.code != 0 {
			t.Fatalf("upload %s: %s", name, r.stderr)
		}
	}
	// wasmJob, from a source without end.
	job := strings.Replace(wasmJob, "{file: {path: $ROOT/cmd/eddy/testdata/txns.jsonl}}",
		"{generator: {kind: transactions, rate: 2000, cards: 50, seed: 3}}", 1)
	submit := func(module string) string {
		spec, _ := inlineSpec(t, strings.Replace(job, "MODULE", module, 1))
		r := cli("job", "submit", spec)
		if r.code != 0 {
			t.Fatalf("submit: %s", r.stderr)
		}
		return strings.TrimSpace(r.stdout)
	}
	neighbour := submit("echo@1")
	// The records out of the neighbour's task, from its status (the file
	// sink writes at checkpoints and at the end).
	recordsOut := regexp.MustCompile(`(?m)^\S+\s+RUNNING\s+\S+\s+\d+\s+(\d+)\s`)
	outCount := func() int64 {
		m := recordsOut.FindStringSubmatch(cli("job", "status", neighbour).stdout)
		if m == nil {
			return 0
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n
	}
	testkit.Eventually(t, 30*time.Second, "the neighbour's first output", func() bool { return outCount() > 0 })

	for _, h := range []struct{ module, line string }{
		{"flood@1", "eddy_process emitted more than 16 MiB in one call (limit max_emit_bytes=16777216;"},
		{"tables@1", "(its tables may grow to 1048576 elements in all, limit table_limit=1048576)"},
		{"memory@1", "eddy_process: memory limit of 64 MiB reached"},
	} {
		id := submit(h.module)
		var status string
		testkit.Eventually(t, 30*time.Second, h.module+" failed", func() bool {
			status = cli("job", "status", id).stdout
			return strings.Contains(status, "FAILED,")
		})
		if !strings.Contains(status, h.line) {
			t.Errorf("job of %s: status lacks %q:\n%s", h.module, h.line, status)
		}
	}

	// The neighbour goes on: same attempt, output still growing, worker
	// alive.
	before := outCount()
	testkit.Eventually(t, 30*time.Second, "the neighbour's output to grow after the flood failed", func() bool { return outCount() > before })
	st := cli("job", "status", neighbour).stdout
	if !strings.Contains(st, ": RUNNING, attempt 1\n") {
		t.Errorf("neighbour job was disturbed:\n%s", st)
	}
	if info := cli("cluster", "info").stdout; !strings.Contains(info, "ALIVE") {
		t.Errorf("worker not alive after the flood:\n%s", info)
	}
	if hwm := peakResident(t, standalone.cmd.Process.Pid); hwm > 0 {
		t.Logf("standalone peak resident set: %d MiB", hwm>>20)
		if hwm > 512<<20 {
			t.Errorf("standalone peak resident set %d MiB, want under 512 MiB", hwm>>20)
		}
	}
}

// peakResident is VmHWM of process pid in bytes, 0 if /proc cannot say.
func peakResident(t *testing.T, pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	m := regexp.MustCompile(`(?m)^VmHWM:\s+(\d+) kB`).FindSubmatch(b)
	if m == nil {
		return 0
	}
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}
