package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/eddy-stream/eddy/dataflow"
)

func TestFormatRate(t *testing.T) {
	tests := []struct {
		name string
		in   float64
		want string
	}{
		{"zero", 0, "0 records/s"},
		{"negative is zero", -5, "0 records/s"},
		{"units", 850, "850 records/s"},
		{"rounds to the next prefix", 999.7, "1.00k records/s"},
		{"thousands", 4100, "4.10k records/s"},
		{"tens of thousands", 42_345, "42.3k records/s"},
		{"hundreds of thousands", 123_456, "123k records/s"},
		{"millions", 2_500_000, "2.50M records/s"},
		{"billions", 7e9, "7.00G records/s"},
		{"beyond the last prefix", 3e13, "30000G records/s"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := formatRate(tc.in); got != tc.want {
				t.Errorf("formatRate(%v) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestFormatFraction(t *testing.T) {
	tests := []struct {
		name string
		in   float64
		want string
	}{
		{"none", 0, "0.0%"},
		{"a third", 1.0 / 3, "33.3%"},
		{"never 100% before the end", 0.99999, "99.9%"},
		{"done", 1, "100.0%"},
		{"clamped above", 1.5, "100.0%"},
		{"clamped below", -1, "0.0%"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := formatFraction(tc.in); got != tc.want {
				t.Errorf("formatFraction(%v) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestEstimateETA(t *testing.T) {
	tests := []struct {
		name     string
		elapsed  time.Duration
		fraction float64
		want     time.Duration
		ok       bool
	}{
		{"a quarter in 10s leaves 30s", 10 * time.Second, 0.25, 30 * time.Second, true},
		{"half", time.Minute, 0.5, time.Minute, true},
		{"done", 5 * time.Second, 1, 0, true},
		{"no progress yet", 10 * time.Second, 0, 0, false},
		{"too early to tell", 100 * time.Millisecond, 0.5, 0, false},
		{"absurdly far", time.Hour, 1e-9, 0, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := estimateETA(tc.elapsed, tc.fraction)
			if ok != tc.ok || got.Round(time.Millisecond) != tc.want {
				t.Errorf("estimateETA(%v, %v) = %v, %v; want %v, %v", tc.elapsed, tc.fraction, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestFormatDuration(t *testing.T) {
	tests := []struct {
		in   time.Duration
		want string
	}{
		{0, "0s"},
		{1499 * time.Millisecond, "1s"},
		{8 * time.Second, "8s"},
		{65 * time.Second, "1m05s"},
		{2*time.Hour + 3*time.Minute + 59*time.Second, "2h04m"},
		{-time.Second, "0s"},
	}
	for _, tc := range tests {
		if got := formatDuration(tc.in); got != tc.want {
			t.Errorf("formatDuration(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestSampleNodes(t *testing.T) {
	src := func(out, done, total int64, known bool) dataflow.NodeSummary {
		return dataflow.NodeSummary{Kind: "source", Out: out, Done: done, Total: total, ProgressKnown: known}
	}
	sink := dataflow.NodeSummary{Kind: "sink", In: 999, Out: 0}
	tests := []struct {
		name     string
		nodes    []dataflow.NodeSummary
		records  int64
		fraction float64
		hasFrac  bool
	}{
		{"one source", []dataflow.NodeSummary{src(10, 25, 100, true), sink}, 10, 0.25, true},
		{"the least advanced source", []dataflow.NodeSummary{src(10, 90, 100, true), src(5, 1, 10, true)}, 15, 0.1, true},
		{"one source cannot tell", []dataflow.NodeSummary{src(10, 90, 100, true), src(5, 0, 0, false)}, 15, 0, false},
		{"an empty file", []dataflow.NodeSummary{src(0, 0, 0, true)}, 0, 0, false},
		{"no sources yet", nil, 0, 0, false},
		{"past the size it had", []dataflow.NodeSummary{src(3, 120, 100, true)}, 3, 1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := sampleNodes(tc.nodes, time.Time{})
			if s.records != tc.records || s.hasFrac != tc.hasFrac || s.fraction != tc.fraction {
				t.Errorf("got records %d fraction %v (%v), want %d %v (%v)", s.records, s.fraction, s.hasFrac, tc.records, tc.fraction, tc.hasFrac)
			}
		})
	}
}

// TestProgressTerminal drives the live renderer with a fake terminal: each
// sample redraws the one line in place, and finish clears it.
func TestProgressTerminal(t *testing.T) {
	var w bytes.Buffer
	start := time.Unix(1000, 0)
	p := newProgressPrinter(&w, true, 5*time.Second, start)
	p.observe(progressSample{at: start.Add(time.Second), records: 1000, fraction: 0.25, hasFrac: true})
	p.observe(progressSample{at: start.Add(2 * time.Second), records: 3000, fraction: 0.5, hasFrac: true})
	got := w.String()
	draws := strings.Split(got, "\r\x1b[K")
	if len(draws) != 3 || draws[0] != "" {
		t.Fatalf("want two redraws of one line, got %q", got)
	}
	if strings.Contains(got, "\n") {
		t.Errorf("the live line has a newline: %q", got)
	}
	want := []string{
		"progress: 1000 records, 0 records/s, 25.0% done, ETA 3s, elapsed 1s",
		// The rate is over the window: 2000 records in the last second.
		"progress: 3000 records, 2.00k records/s, 50.0% done, ETA 2s, elapsed 2s",
	}
	for i, line := range want {
		if draws[i+1] != line {
			t.Errorf("redraw %d = %q, want %q", i+1, draws[i+1], line)
		}
	}
	w.Reset()
	p.finish(progressSample{}, true)
	if w.String() != "\r\x1b[K" {
		t.Errorf("finish wrote %q, want the line cleared", w.String())
	}
}

// TestProgressPlain checks the lines for a pipe: nothing during the first
// period (a short job prints only its summary), then one per period, each
// with the rate of its period; final adds a last line.
func TestProgressPlain(t *testing.T) {
	var w bytes.Buffer
	start := time.Unix(1000, 0)
	p := newProgressPrinter(&w, false, 5*time.Second, start)
	at := func(s float64, records int64) progressSample {
		return progressSample{at: start.Add(time.Duration(s * float64(time.Second))), records: records}
	}
	for _, s := range []progressSample{at(1, 100), at(4.9, 490)} {
		p.observe(s)
	}
	if w.Len() != 0 {
		t.Fatalf("printed during the first period: %q", w.String())
	}
	p.observe(at(5, 500))
	p.observe(at(7, 700))
	p.observe(at(10, 2000))
	p.finish(at(11, 2100), true)
	want := "progress: 500 records, 100 records/s, elapsed 5s\n" +
		"progress: 2000 records, 300 records/s, elapsed 10s\n" +
		"progress: 2100 records, 100 records/s, elapsed 11s\n"
	if w.String() != want {
		t.Errorf("got\n%s\nwant\n%s", w.String(), want)
	}
	w.Reset()
	p.finish(at(12, 2200), false)
	if w.Len() != 0 {
		t.Errorf("finish without final printed %q", w.String())
	}
}

func TestProgressModeFlag(t *testing.T) {
	var m progressMode
	for _, ok := range []string{"auto", "always", "never"} {
		if err := m.Set(ok); err != nil || string(m) != ok {
			t.Errorf("Set(%q) = %v, mode %q", ok, err, m)
		}
	}
	if err := m.Set("sometimes"); err == nil {
		t.Error("Set(sometimes) accepted")
	}
}

var progressLineRE = regexp.MustCompile(`(?m)^progress: (\d+) records, [0-9.]+[kMG]? records/s, (\d+\.\d)% done, ETA (\S+), elapsed \S+$`)

// TestRunProgress runs bounded jobs with the progress forced on a pipe:
// the lines carry records/s and the fraction done, go up to 100% at the
// end, and the job's count is right.
func TestRunProgress(t *testing.T) {
	dir := t.TempDir()
	txns := filepath.Join(repoRoot(t), "cmd/eddy/testdata/txns.jsonl")
	tests := []struct {
		name    string
		source  string
		records int
		// periodic: the job runs several periods, so lines come before the end.
		periodic bool
	}{
		// 6000 records at 4000/s over 2 subtasks: ~1.5 s, periods of 200 ms.
		{"generator", "{generator: {kind: sequence, rate: 4000, count: 6000, seed: 3}}", 6000, true},
		// The file is read at once: the last line (always) alone.
		{"file", "{file: {path: " + txns + "}}", 3000, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(dir, tc.name+".jsonl")
			spec := filepath.Join(dir, tc.name+".yaml")
			text := "name: progress-" + tc.name + "\nparallelism: 2\nnodes:\n" +
				"  - name: src\n    source: " + tc.source + "\n" +
				"  - name: out\n    input: src\n    parallelism: 1\n    sink: {file: {path: " + out + "}}\n"
			if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
			r := eddy(t, "run", "--progress", "always", "--progress-interval", "200ms", spec)
			if r.code != 0 {
				t.Fatalf("eddy run exited %d: %s", r.code, r.stderr)
			}
			lines := progressLineRE.FindAllStringSubmatch(r.stderr, -1)
			if len(lines) == 0 {
				t.Fatalf("no progress line with records/s and a fraction:\n%s", r.stderr)
			}
			if tc.periodic && len(lines) < 3 {
				t.Errorf("%d progress lines, want periodic ones before the last:\n%s", len(lines), r.stderr)
			}
			last := lines[len(lines)-1]
			if last[1] != strconv.Itoa(tc.records) || last[2] != "100.0" {
				t.Errorf("last progress line %q: want %d records, 100.0%% done", last[0], tc.records)
			}
			for _, l := range lines[:len(lines)-1] {
				if l[2] == "100.0" && l[1] != last[1] {
					t.Errorf("line %q says done before the end", l[0])
				}
			}
			if strings.Contains(r.stderr, "\r") || strings.Contains(r.stderr, "\x1b") {
				t.Errorf("terminal controls on a pipe: %q", r.stderr)
			}
			if !strings.Contains(r.stderr, "job progress-"+tc.name+" finished") {
				t.Errorf("no summary after the progress:\n%s", r.stderr)
			}
			if n := len(sortedLines(t, out)); n != tc.records {
				t.Errorf("%s: %d records, want %d", out, n, tc.records)
			}
		})
	}
	t.Run("never", func(t *testing.T) {
		r := eddy(t, "run", "--progress", "never", "--progress-interval", "1ms", filepath.Join(dir, "file.yaml"))
		if r.code != 0 || strings.Contains(r.stderr, "progress:") {
			t.Errorf("exit %d, stderr with progress:\n%s", r.code, r.stderr)
		}
	})
	t.Run("bad flags", func(t *testing.T) {
		for _, args := range [][]string{{"--progress", "loud"}, {"--progress-interval", "0s"}} {
			r := eddy(t, append(append([]string{"run"}, args...), filepath.Join(dir, "file.yaml"))...)
			if r.code != 2 || !strings.Contains(r.stderr, args[0]) {
				t.Errorf("%v: exit %d, want 2 naming the flag:\n%s", args, r.code, r.stderr)
			}
		}
	})
}

// TestRunProgressTerminal runs `eddy run` with stderr on a real terminal
// (a pty): auto mode draws the live line, redrawn in place, and clears it
// before the summary.
func TestRunProgressTerminal(t *testing.T) {
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Skipf("no pty: %v", err)
	}
	defer ptmx.Close()
	dir := t.TempDir()
	spec := filepath.Join(dir, "tty.yaml")
	text := "name: tty\nparallelism: 2\nnodes:\n" +
		"  - name: src\n    source: {generator: {kind: sequence, rate: 4000, count: 4000}}\n" +
		"  - name: out\n    input: src\n    parallelism: 1\n    sink: {file: {path: " + filepath.Join(dir, "out.jsonl") + "}}\n"
	if err := os.WriteFile(spec, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(eddyBin, "run", spec)
	cmd.Env = append(os.Environ(), "XDG_CACHE_HOME="+filepath.Join(os.TempDir(), "eddy-e2e-cache"))
	cmd.Stderr = tty
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close() // the child holds it; EOF on ptmx once the child exits
	var screen bytes.Buffer
	copied := make(chan error, 1)
	go func() { _, err := io.Copy(&screen, ptmx); copied <- err }()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("eddy run: %v\n%s", err, screen.String())
	}
	select {
	case <-copied: // EIO at the end of a pty is its EOF
	case <-time.After(10 * time.Second):
		t.Fatal("the terminal's output did not end")
	}
	got := strings.ReplaceAll(screen.String(), "\r\n", "\n") // the pty's newline translation
	draws := progressLineRE.FindAllString(strings.ReplaceAll(got, "\r\x1b[K", "\n"), -1)
	if len(draws) < 2 {
		t.Fatalf("want the live line drawn several times, got:\n%q", got)
	}
	summary := strings.Index(got, "job tty finished")
	if summary < 0 {
		t.Fatalf("no summary: %q", got)
	}
	if !strings.HasSuffix(got[:summary], "\r\x1b[K") {
		t.Errorf("the live line is not cleared before the summary: %q", got[:summary])
	}
	if strings.Contains(got[:summary], "\n") {
		t.Errorf("the live line scrolled (a newline before the summary): %q", got[:summary])
	}
}
