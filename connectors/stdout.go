package connectors

import (
	"context"
	"fmt"
	"io"
	"sync"

	"github.com/eddy-stream/eddy/dataflow/stream"
)

// stdoutMu serialises the writes of every stdout sink in the process, so
// that lines of concurrent subtasks never interleave. One lock for all
// rather than one per writer: the writers share a terminal or pipe anyway,
// and a per-writer table would need writers to be comparable map keys.
var stdoutMu sync.Mutex

// stdoutFlushAt bounds the bytes a sink formats before writing them out, so
// that a huge batch does not build a huge buffer.
const stdoutFlushAt = 256 << 10

// stdoutSink prints each record's value on its own line after the prefix.
// It formats a whole batch into its own buffer without the lock and then
// writes it in one call under the lock: output appears batch by batch
// (a stream of rare alerts is not held back waiting for a buffer to fill)
// and the lock is held only for the write itself.
type stdoutSink struct {
	w      io.Writer
	prefix string
	buf    []byte
}

func (s *stdoutSink) Open(ctx context.Context, info stream.TaskInfo) error {
	if _, _, err := subtaskOf(info); err != nil {
		return fmt.Errorf("open stdout sink: %w", err)
	}
	return nil
}

func (s *stdoutSink) Write(ctx context.Context, b *stream.Batch) error {
	for i := range b.Records {
		s.buf = append(s.buf, s.prefix...)
		s.buf = append(s.buf, b.Records[i].Value...)
		s.buf = append(s.buf, '\n')
		if len(s.buf) >= stdoutFlushAt {
			if err := s.flush(); err != nil {
				return err
			}
		}
	}
	return s.flush()
}

// ReleasesInput: Write copies into its buffer.
func (s *stdoutSink) ReleasesInput() bool { return true }

func (s *stdoutSink) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	stdoutMu.Lock()
	_, err := s.w.Write(s.buf)
	stdoutMu.Unlock()
	s.buf = s.buf[:0]
	if err != nil {
		return fmt.Errorf("stdout sink: %w", err)
	}
	return nil
}

func (s *stdoutSink) Finish(ctx context.Context) error { return s.flush() }

func (s *stdoutSink) Close() error { return s.flush() }
