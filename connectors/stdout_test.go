package connectors

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

// byteWriter writes one byte at a time and yields in between, so that two
// unsynchronised writers would interleave within lines. It is deliberately
// not goroutine-safe: the race detector flags a sink that writes without
// the lock.
type byteWriter struct{ buf bytes.Buffer }

func (w *byteWriter) Write(p []byte) (int, error) {
	for _, c := range p {
		w.buf.WriteByte(c)
		runtime.Gosched()
	}
	return len(p), nil
}

// Concurrent subtasks of a stdout sink never interleave within a line.
func TestStdoutNoInterleaving(t *testing.T) {
	const subtasks, batches, perBatch = 4, 20, 25
	out := &byteWriter{}
	reg := Registry{Stdout: out}
	spec := &jobspec.SinkSpec{Stdout: &jobspec.StdoutSpec{Prefix: "alert> "}}
	var wg sync.WaitGroup
	errs := make(chan error, subtasks)
	for s := range subtasks {
		snk, err := reg.NewSink(spec, "")
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			ctx := context.Background()
			if err := snk.Open(ctx, stream.TaskInfo{Subtask: s, Parallelism: subtasks}); err != nil {
				errs <- err
				return
			}
			defer snk.Close()
			for i := range batches {
				b := stream.NewBatch(perBatch)
				for k := range perBatch {
					b.Add(nil, fmt.Appendf(nil, `{"subtask":%d,"n":%d}`, s, i*perBatch+k), 0)
				}
				if err := snk.Write(ctx, b); err != nil {
					errs <- err
					return
				}
			}
			errs <- snk.Finish(ctx)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	seen := map[string]bool{}
	lines := strings.Split(strings.TrimSuffix(out.buf.String(), "\n"), "\n")
	for _, line := range lines {
		var s, n int
		if _, err := fmt.Sscanf(line, `alert> {"subtask":%d,"n":%d}`, &s, &n); err != nil || !strings.HasSuffix(line, "}") {
			t.Fatalf("mangled line %q", line)
		}
		seen[line] = true
	}
	if want := subtasks * batches * perBatch; len(lines) != want || len(seen) != want {
		t.Fatalf("%d lines (%d distinct), want %d", len(lines), len(seen), want)
	}
}

func TestStdoutPrintsValues(t *testing.T) {
	tests := []struct {
		name   string
		prefix string
		values []string
		want   string
	}{
		{"no prefix", "", []string{`{"a":1}`, "plain text"}, "{\"a\":1}\nplain text\n"},
		{"prefix", "> ", []string{"x"}, "> x\n"},
		{"empty batch", "> ", nil, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			snk, err := Registry{Stdout: &out}.NewSink(&jobspec.SinkSpec{Stdout: &jobspec.StdoutSpec{Prefix: tc.prefix}}, "")
			if err != nil {
				t.Fatal(err)
			}
			writeAll(t, snk, 0, 1, batchOf(tc.values...))
			if out.String() != tc.want {
				t.Fatalf("printed %q, want %q", out.String(), tc.want)
			}
		})
	}
}
