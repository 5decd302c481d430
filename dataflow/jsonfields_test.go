package dataflow

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/eddy-stream/eddy/connectors"
	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

// A record with duplicate members is read the same way everywhere a field
// is looked up on the host side: the file source's key_field and
// timestamp_field, key_by and event_time all take the first member, as
// package jsonscan (and the SDKs built on it) does.
func TestJSONFieldsAgreeOnDuplicateMembers(t *testing.T) {
	line := `{"card":"first","ts":1000,"card":"second","ts":2000}`
	path := filepath.Join(t.TempDir(), "dup.jsonl")
	if err := os.WriteFile(path, []byte(line+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := connectors.Registry{}.NewSource(&jobspec.SourceSpec{File: &jobspec.FileSourceSpec{
		Path: path, KeyField: "card", TimestampField: "ts"}}, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := src.Open(ctx, stream.TaskInfo{Node: "in", Parallelism: 1}); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	b := stream.NewBatch(4)
	if err := src.Next(ctx, b, 4); err != nil && b.Len() == 0 {
		t.Fatal(err)
	}
	if b.Len() != 1 {
		t.Fatalf("file source read %d records, want 1", b.Len())
	}
	fromSource := b.Records[0]

	keyBy, err := keyOf(fromSource.Value, []byte("card"))
	if err != nil {
		t.Fatal(err)
	}
	if err := assignTimestamps(b, []byte("ts")); err != nil {
		t.Fatal(err)
	}
	eventTime := b.Records[0].Timestamp

	if string(fromSource.Key) != "first" || !bytes.Equal(fromSource.Key, keyBy) {
		t.Errorf("key_field gives %q, key_by %q; want both %q", fromSource.Key, keyBy, "first")
	}
	if fromSource.Timestamp != 1000 || fromSource.Timestamp != eventTime {
		t.Errorf("timestamp_field gives %d, event_time %d; want both 1000", fromSource.Timestamp, eventTime)
	}
}
