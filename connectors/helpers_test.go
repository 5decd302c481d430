package connectors

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

// rec is a record copied out of its batch, comparable for tests.
type rec struct {
	Key, Value string
	TS         int64
}

func (r rec) String() string { return fmt.Sprintf("%s|%s|%d", r.Key, r.Value, r.TS) }

// drain opens src as the given subtask, reads it to io.EOF in batches of
// limit and closes it.
func drain(t testing.TB, src stream.Source, subtask, parallelism, limit int) []rec {
	t.Helper()
	ctx := context.Background()
	if err := src.Open(ctx, stream.TaskInfo{Job: "test", Node: "src", Subtask: subtask, Parallelism: parallelism}); err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer src.Close()
	var out []rec
	b := stream.NewBatch(limit)
	for {
		b.Reset()
		err := src.Next(ctx, b, limit)
		if b.Len() > limit {
			t.Fatalf("Next returned %d records, limit %d", b.Len(), limit)
		}
		for _, r := range b.Records {
			out = append(out, rec{string(r.Key), string(r.Value), r.Timestamp})
		}
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
	}
}

// drainAll reads every subtask of a source built from spec and returns the
// union, sorted.
func drainAll(t testing.TB, spec *jobspec.SourceSpec, baseDir string, parallelism, limit int) []rec {
	t.Helper()
	var all []rec
	for i := range parallelism {
		src, err := Registry{}.NewSource(spec, baseDir)
		if err != nil {
			t.Fatalf("NewSource: %v", err)
		}
		all = append(all, drain(t, src, i, parallelism, limit)...)
	}
	sortRecs(all)
	return all
}

func sortRecs(rs []rec) {
	slices.SortFunc(rs, func(a, b rec) int {
		return cmp.Or(strings.Compare(a.Key, b.Key), strings.Compare(a.Value, b.Value), cmp.Compare(a.TS, b.TS))
	})
}

// batchOf builds a batch holding values, with no keys or timestamps.
func batchOf(values ...string) *stream.Batch {
	b := stream.NewBatch(len(values))
	for _, v := range values {
		b.Add(nil, []byte(v), stream.NoTimestamp)
	}
	return b
}
