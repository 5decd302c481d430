package connectors

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

type progressStep struct{ done, total int64 }

// readProgress opens spec's source as subtask of parallelism, reads it in
// batches of limit and returns what Progress said after each Next.
func readProgress(t *testing.T, spec *jobspec.SourceSpec, dir string, subtask, parallelism, limit int) []progressStep {
	t.Helper()
	src, err := Registry{}.NewSource(spec, dir)
	if err != nil {
		t.Fatal(err)
	}
	pr, ok := src.(stream.ProgressReporter)
	if !ok {
		t.Fatalf("%T is not a stream.ProgressReporter", src)
	}
	if _, _, ok := pr.Progress(); ok {
		t.Error("Progress known before Open")
	}
	ctx := context.Background()
	if err := src.Open(ctx, stream.TaskInfo{Job: "test", Node: "src", Subtask: subtask, Parallelism: parallelism}); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var steps []progressStep
	b := stream.NewBatch(limit)
	for {
		b.Reset()
		err := src.Next(ctx, b, limit)
		if err != nil && !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		done, total, ok := pr.Progress()
		if !ok {
			t.Fatal("Progress unknown after Next")
		}
		steps = append(steps, progressStep{done, total})
		if err != nil {
			return steps
		}
	}
}

func TestProgress(t *testing.T) {
	dir := t.TempDir()
	// 4 lines of 10 bytes each.
	if err := os.WriteFile(filepath.Join(dir, "in.jsonl"), []byte("{\"a\":1000}\n{\"a\":2000}\n{\"a\":3000}\n{\"a\":4000}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := &jobspec.SourceSpec{File: &jobspec.FileSourceSpec{Path: "in.jsonl"}}
	gen := &jobspec.SourceSpec{Generator: &jobspec.GeneratorSpec{Kind: "sequence", Count: 10}}
	tests := []struct {
		name                        string
		spec                        *jobspec.SourceSpec
		subtask, parallelism, limit int
		want                        []progressStep
	}{
		{"file by bytes", file, 0, 1, 1, []progressStep{{11, 44}, {22, 44}, {33, 44}, {44, 44}, {44, 44}}},
		// Subtask 1 of 2 scans every line and keeps the odd ones.
		{"file subtask scans it all", file, 1, 2, 1, []progressStep{{22, 44}, {44, 44}, {44, 44}}},
		{"generator by records", gen, 0, 1, 4, []progressStep{{4, 10}, {8, 10}, {10, 10}}},
		// Records 1, 4, 7 of 10 are subtask 1's of 3.
		{"generator subtask's share", gen, 1, 3, 2, []progressStep{{2, 3}, {3, 3}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := readProgress(t, tc.spec, dir, tc.subtask, tc.parallelism, tc.limit)
			if len(got) != len(tc.want) {
				t.Fatalf("progress %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("progress %v, want %v", got, tc.want)
				}
			}
		})
	}
	t.Run("unbounded generator cannot tell", func(t *testing.T) {
		src, err := Registry{}.NewSource(&jobspec.SourceSpec{Generator: &jobspec.GeneratorSpec{Kind: "sequence"}}, dir)
		if err != nil {
			t.Fatal(err)
		}
		if err := src.Open(context.Background(), stream.TaskInfo{Job: "test", Node: "src", Subtask: 0, Parallelism: 1}); err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		if _, _, ok := src.(stream.ProgressReporter).Progress(); ok {
			t.Error("an unbounded generator reports progress")
		}
	})
}
