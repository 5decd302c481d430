package connectors

import (
	"context"
	"sync/atomic"

	"github.com/eddy-stream/eddy/dataflow/stream"
)

// discardSink counts records and drops them: the sink of benchmarks, where
// any real output would measure the disk instead of the job.
type discardSink struct {
	records atomic.Int64 // read by tests and benchmarks from other goroutines
	bytes   atomic.Int64
}

func (s *discardSink) Open(ctx context.Context, info stream.TaskInfo) error { return nil }

func (s *discardSink) Write(ctx context.Context, b *stream.Batch) error {
	s.records.Add(int64(b.Len()))
	n := 0
	for i := range b.Records {
		n += len(b.Records[i].Key) + len(b.Records[i].Value)
	}
	s.bytes.Add(int64(n))
	return nil
}

func (s *discardSink) Finish(ctx context.Context) error { return nil }

// ReleasesInput: it keeps nothing.
func (s *discardSink) ReleasesInput() bool { return true }

func (s *discardSink) Close() error { return nil }
