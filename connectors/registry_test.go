package connectors

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

// Registry is what dataflow's job builder asks for.
var _ interface {
	NewSource(*jobspec.SourceSpec, string) (stream.Source, error)
	NewSink(*jobspec.SinkSpec, string) (stream.Sink, error)
} = Registry{}

func TestRegistrySpecErrors(t *testing.T) {
	gen := &jobspec.GeneratorSpec{Kind: "sequence"}
	file := &jobspec.FileSourceSpec{Path: "in.jsonl"}
	tests := []struct {
		name   string
		source *jobspec.SourceSpec
		sink   *jobspec.SinkSpec
		want   string
	}{
		{name: "nil source", source: nil, want: "source: connectors: bad spec: missing"},
		{name: "empty source", source: &jobspec.SourceSpec{}, want: "no connector set (want exactly one of generator, file, kafka)"},
		{name: "two sources", source: &jobspec.SourceSpec{Generator: gen, File: file}, want: "several connectors set (generator, file)"},
		{name: "file source without path", source: &jobspec.SourceSpec{File: &jobspec.FileSourceSpec{}}, want: "file source: connectors: bad spec: path is empty"},
		{name: "kafka source without topics", source: &jobspec.SourceSpec{Kafka: &jobspec.KafkaSourceSpec{Brokers: []string{"h:1"}}}, want: "kafka source: connectors: bad spec: needs topics or topic_pattern"},
		{name: "kafka source with bad start", source: &jobspec.SourceSpec{Kafka: &jobspec.KafkaSourceSpec{Brokers: []string{"h:1"}, Topics: []string{"t"}, Start: "x"}}, want: `kafka source: connectors: bad spec: start "x" (want earliest, latest, timestamp or group)`},
		{name: "nil sink", sink: nil, want: "sink: connectors: bad spec: missing"},
		{name: "empty sink", sink: &jobspec.SinkSpec{}, want: "no connector set (want exactly one of file, stdout, discard, kafka)"},
		{name: "three sinks", sink: &jobspec.SinkSpec{File: &jobspec.FileSinkSpec{Path: "x"}, Stdout: &jobspec.StdoutSpec{}, Discard: &jobspec.DiscardSpec{}}, want: "several connectors set (file, stdout, discard)"},
		{name: "file sink without path", sink: &jobspec.SinkSpec{File: &jobspec.FileSinkSpec{}}, want: "file sink: connectors: bad spec: path is empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if strings.Contains(tc.name, "source") {
				_, err = Registry{}.NewSource(tc.source, "")
			} else {
				_, err = Registry{}.NewSink(tc.sink, "")
			}
			if err == nil || !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v: want ErrBadSpec mentioning %q", err, tc.want)
			}
		})
	}
}

func TestSourceBounded(t *testing.T) {
	tests := []struct {
		name string
		spec *jobspec.SourceSpec
		want bool
	}{
		{"generator with count", genSpec(jobspec.GeneratorSpec{Kind: "sequence", Count: 5}), true},
		{"generator without count", genSpec(jobspec.GeneratorSpec{Kind: "sequence"}), false},
		{"file", fileSourceSpec("x.jsonl", "", ""), true},
		{"kafka", &jobspec.SourceSpec{Kafka: &jobspec.KafkaSourceSpec{Brokers: []string{"h:1"}, Topics: []string{"t"}}}, false},
		{"kafka stop_at latest", &jobspec.SourceSpec{Kafka: &jobspec.KafkaSourceSpec{Brokers: []string{"h:1"}, Topics: []string{"t"}, StopAt: "latest"}}, true},
		{"no connector", &jobspec.SourceSpec{}, false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := (Registry{}).SourceBounded(tc.spec); got != tc.want {
				t.Fatalf("SourceBounded = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPathsResolveAgainstBaseDir(t *testing.T) {
	base := t.TempDir()
	abs := filepath.Join(t.TempDir(), "abs.jsonl")
	writeFile(t, filepath.Join(base, "rel.jsonl"), "1\n")
	writeFile(t, abs, "2\n")
	tests := []struct {
		name, path, want string
	}{
		{"relative", "rel.jsonl", "1"},
		{"absolute ignores base", abs, "2"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := drainAll(t, fileSourceSpec(tc.path, "", ""), base, 1, 10)
			if len(got) != 1 || got[0].Value != tc.want {
				t.Fatalf("read %v, want %s", got, tc.want)
			}
		})
	}
	snk, err := Registry{}.NewSink(&jobspec.SinkSpec{File: &jobspec.FileSinkSpec{Path: "a/b/out.jsonl"}}, base)
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, snk, 0, 1, batchOf("3"))
	if _, err := os.Stat(filepath.Join(base, "a", "b", "out.jsonl")); err != nil {
		t.Fatalf("sink output not under the base directory: %v", err)
	}
}

func TestOpenRejectsBadSubtask(t *testing.T) {
	tests := []struct {
		name string
		info stream.TaskInfo
	}{
		{"subtask beyond parallelism", stream.TaskInfo{Subtask: 2, Parallelism: 2}},
		{"negative subtask", stream.TaskInfo{Subtask: -1, Parallelism: 2}},
		{"negative parallelism", stream.TaskInfo{Parallelism: -1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src, err := Registry{}.NewSource(genSpec(jobspec.GeneratorSpec{Kind: "sequence"}), "")
			if err != nil {
				t.Fatal(err)
			}
			if err := src.Open(context.Background(), tc.info); err == nil || !strings.Contains(err.Error(), "out of range") {
				t.Fatalf("Open: %v, want an out-of-range error", err)
			}
		})
	}
}

func TestDiscardCounts(t *testing.T) {
	snk, err := Registry{}.NewSink(&jobspec.SinkSpec{Discard: &jobspec.DiscardSpec{}}, "")
	if err != nil {
		t.Fatal(err)
	}
	writeAll(t, snk, 0, 1, batchOf("ab", "c"), batchOf("d"))
	d := snk.(*discardSink)
	if d.records.Load() != 3 || d.bytes.Load() != 4 {
		t.Fatalf("counted %d records, %d bytes; want 3, 4", d.records.Load(), d.bytes.Load())
	}
}
