package connectors

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func fileSourceSpec(path, keyField, tsField string) *jobspec.SourceSpec {
	return &jobspec.SourceSpec{File: &jobspec.FileSourceSpec{Path: path, KeyField: keyField, TimestampField: tsField}}
}

// writeAll runs one sink instance over batches and finishes it.
func writeAll(t *testing.T, snk stream.Sink, subtask, parallelism int, batches ...*stream.Batch) {
	t.Helper()
	ctx := context.Background()
	if err := snk.Open(ctx, stream.TaskInfo{Subtask: subtask, Parallelism: parallelism}); err != nil {
		t.Fatalf("Open: %v", err)
	}
	for _, b := range batches {
		if err := snk.Write(ctx, b); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	if err := snk.Finish(ctx); err != nil {
		t.Fatalf("Finish: %v", err)
	}
	if err := snk.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// Generated records written by the file sink and read back by the file
// source are the same records, at any parallelism of either side.
func TestFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	gen := genSpec(jobspec.GeneratorSpec{Kind: "transactions", Count: 1000, Seed: 9, Disorder: jobspec.Duration(time.Second)})
	want := drainAll(t, gen, "", 1, 100)

	// One sink instance: the plain path, in a directory that does not exist yet.
	sinkSpec := &jobspec.SinkSpec{File: &jobspec.FileSinkSpec{Path: "out/txns.jsonl"}}
	snk, err := Registry{}.NewSink(sinkSpec, dir)
	if err != nil {
		t.Fatal(err)
	}
	b := stream.NewBatch(len(want))
	for _, r := range want {
		b.Add([]byte(r.Key), []byte(r.Value), r.TS)
	}
	writeAll(t, snk, 0, 1, b)

	for _, p := range []int{1, 3} {
		got := drainAll(t, fileSourceSpec("out/txns.jsonl", "card", "ts"), dir, p, 64)
		if !slices.Equal(got, want) {
			t.Fatalf("parallelism %d: read back %d records, want the %d written", p, len(got), len(want))
		}
	}

	// Two sink instances: one part file each, together holding everything.
	for i := range 2 {
		snk, err := Registry{}.NewSink(sinkSpec, dir)
		if err != nil {
			t.Fatal(err)
		}
		part := stream.NewBatch(len(want))
		for k := i; k < len(want); k += 2 {
			part.Add([]byte(want[k].Key), []byte(want[k].Value), want[k].TS)
		}
		writeAll(t, snk, i, 2, part)
	}
	var got []rec
	for _, name := range []string{"out/txns.jsonl.part-0", "out/txns.jsonl.part-1"} {
		got = append(got, drainAll(t, fileSourceSpec(name, "card", "ts"), dir, 1, 64)...)
	}
	sortRecs(got)
	if !slices.Equal(got, want) {
		t.Fatalf("part files hold %d records, want the %d written", len(got), len(want))
	}
	assertNoTempFiles(t, filepath.Join(dir, "out"))
}

func assertNoTempFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Fatalf("temporary file %s left behind", e.Name())
		}
	}
}

func TestFileSourceFields(t *testing.T) {
	tests := []struct {
		name    string
		line    string
		keyF    string
		tsF     string
		wantKey string
		wantTS  int64
	}{
		{"no fields configured", `{"a":1}`, "", "", "", stream.NoTimestamp},
		{"string key", `{"card":"card-7","x":1}`, "card", "", "card-7", stream.NoTimestamp},
		{"escaped string key", `{"card":"a\"b\u00e9"}`, "card", "", `a"bé`, stream.NoTimestamp},
		{"number key is its JSON text", `{"id":42.50}`, "id", "", "42.50", stream.NoTimestamp},
		{"object key is its JSON text", `{"id":{"a":[1, 2]}}`, "id", "", `{"a":[1, 2]}`, stream.NoTimestamp},
		{"null key is no key", `{"id":null}`, "id", "", "", stream.NoTimestamp},
		{"missing key", `{"other":"x"}`, "id", "", "", stream.NoTimestamp},
		{"nested field is not top-level", `{"inner":{"id":"x"}}`, "id", "", "", stream.NoTimestamp},
		{"not an object", `[1,2,3]`, "id", "ts", "", stream.NoTimestamp},
		{"timestamp in ms", `{"ts":1767225600123}`, "", "ts", "", 1767225600123},
		{"negative timestamp", `{"ts":-5}`, "", "ts", "", -5},
		{"float timestamp", `{"ts":1.5e3}`, "", "ts", "", 1500},
		{"RFC 3339 timestamp", `{"ts":"2026-01-01T00:00:01.5Z"}`, "", "ts", "", 1767225601500},
		{"RFC 3339 timestamp with zone", `{"ts":"2026-01-01T01:00:00+01:00"}`, "", "ts", "", 1767225600000},
		{"null timestamp", `{"ts":null}`, "", "ts", "", stream.NoTimestamp},
		{"key and timestamp", ` {"ts": 7 , "k" : "v"} `, "k", "ts", "v", 7},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "in.jsonl")
			writeFile(t, path, tc.line+"\n")
			got := drainAll(t, fileSourceSpec(path, tc.keyF, tc.tsF), "", 1, 10)
			want := []rec{{tc.wantKey, strings.TrimSpace(tc.line), tc.wantTS}}
			if !slices.Equal(got, want) {
				t.Fatalf("got %v, want %v", got, want)
			}
		})
	}
}

func TestFileSourceSplitsLinesBySubtask(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.jsonl")
	writeFile(t, path, "0\n1\n\n3\r\n  \n5\n6") // blank lines count, last line unterminated
	tests := []struct {
		subtask, parallelism int
		want                 []string
	}{
		{0, 1, []string{"0", "1", "3", "5", "6"}},
		{0, 3, []string{"0", "3", "6"}},
		{1, 3, []string{"1"}},
		{2, 3, []string{"5"}},
	}
	for _, tc := range tests {
		src, err := Registry{}.NewSource(fileSourceSpec(path, "", ""), "")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range drain(t, src, tc.subtask, tc.parallelism, 2) {
			got = append(got, r.Value)
		}
		if !slices.Equal(got, tc.want) {
			t.Fatalf("subtask %d of %d: got %v, want %v", tc.subtask, tc.parallelism, got, tc.want)
		}
	}
}

func TestFileSourceErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		content string // "" means the file does not exist
		tsField string
		want    []string // substrings of the error
	}{
		{"missing file", "", "", []string{filepath.Join(dir, "missing file.jsonl"), "no such file"}},
		{"bad JSON", "{\"a\":1}\n\n{\"a\":\n", "", []string{"bad JSON.jsonl:3:", "invalid JSON"}},
		{"two values on a line", "{\"a\":1} {\"b\":2}\n", "", []string{"two values on a line.jsonl:1:", "invalid JSON"}},
		{"bad timestamp", "{\"ts\":1}\n{\"ts\":true}\n", "ts", []string{"bad timestamp.jsonl:2:", `timestamp field "ts"`}},
		{"bad RFC 3339", "{\"ts\":\"monday\"}\n", "ts", []string{"bad RFC 3339.jsonl:1:", "RFC 3339"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, tc.name+".jsonl")
			if tc.content != "" {
				writeFile(t, path, tc.content)
			}
			src, err := Registry{}.NewSource(fileSourceSpec(path, "", tc.tsField), "")
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			err = src.Open(ctx, stream.TaskInfo{})
			if err == nil {
				b := stream.NewBatch(10)
				for err == nil {
					err = src.Next(ctx, b, 10)
				}
				src.Close()
			}
			if err == nil || errors.Is(err, io.EOF) {
				t.Fatalf("got %v, want an error", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q does not mention %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q spans several lines", err)
			}
		})
	}
}

// A sink that is closed without Finish (the job failed) leaves the target
// as it was and no temporary file.
func TestFileSinkFailedJobLeavesNoFile(t *testing.T) {
	tests := []struct {
		name     string
		previous string // "" means no previous output
	}{
		{"no previous output", ""},
		{"previous output kept", "{\"old\":true}\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "out.jsonl")
			if tc.previous != "" {
				writeFile(t, path, tc.previous)
			}
			snk, err := Registry{}.NewSink(&jobspec.SinkSpec{File: &jobspec.FileSinkSpec{Path: path}}, "")
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if err := snk.Open(ctx, stream.TaskInfo{}); err != nil {
				t.Fatal(err)
			}
			if err := snk.Write(ctx, batchOf(`{"new":1}`, `{"new":2}`)); err != nil {
				t.Fatal(err)
			}
			if err := snk.Close(); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			switch {
			case tc.previous == "" && !errors.Is(err, fs.ErrNotExist):
				t.Fatalf("target exists after a failed job (err %v)", err)
			case tc.previous != "" && string(got) != tc.previous:
				t.Fatalf("target is %q, want the previous %q", got, tc.previous)
			}
			assertNoTempFiles(t, dir)
		})
	}
}

func TestFileSinkLines(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		want   string
	}{
		{"one per line", []string{`{"a":1}`, `2`, `"x"`}, "{\"a\":1}\n2\n\"x\"\n"},
		{"pretty JSON is compacted", []string{"{\n  \"a\": [1,\r\n 2]\n}"}, "{\"a\":[1,2]}\n"},
		{"nothing written", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "out.jsonl")
			snk, err := Registry{}.NewSink(&jobspec.SinkSpec{File: &jobspec.FileSinkSpec{Path: path}}, "")
			if err != nil {
				t.Fatal(err)
			}
			writeAll(t, snk, 0, 1, batchOf(tc.values...))
			got, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("file holds %q, want %q", got, tc.want)
			}
		})
	}
}

func TestFileSinkRejectsMultiLineNonJSON(t *testing.T) {
	snk, err := Registry{}.NewSink(&jobspec.SinkSpec{File: &jobspec.FileSinkSpec{Path: filepath.Join(t.TempDir(), "o")}}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := snk.Open(ctx, stream.TaskInfo{}); err != nil {
		t.Fatal(err)
	}
	defer snk.Close()
	if err := snk.Write(ctx, batchOf("not\njson")); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Fatalf("Write: %v, want an error about a multi-line non-JSON value", err)
	}
}
