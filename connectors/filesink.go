package connectors

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/eddy-stream/eddy/dataflow"
)

const fileSinkBuffer = 256 << 10

// fileSink writes each record's value as one line. It writes to a hidden
// temporary file beside the target and renames it into place on Finish, so
// that the target path only ever holds complete output: a job that fails
// or is cancelled leaves the previous file (or none) rather than a
// truncated one.
type fileSink struct {
	path string // as configured; the target adds .part-i when parallel

	target  string
	f       *os.File
	w       *bufio.Writer
	scratch []byte // for compacting multi-line values
	done    bool   // renamed into place
}

func (s *fileSink) Open(ctx context.Context, info dataflow.TaskInfo) error {
	subtask, parallelism, err := subtaskOf(info)
	if err != nil {
		return fmt.Errorf("open file sink %s: %w", s.path, err)
	}
	s.target = s.path
	if parallelism > 1 {
		s.target = s.path + fmt.Sprintf(".part-%d", subtask)
	}
	dir := filepath.Dir(s.target)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("file sink %s: %w", s.target, err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(s.target)+".tmp-*")
	if err != nil {
		return fmt.Errorf("file sink %s: %w", s.target, err)
	}
	// CreateTemp makes the file private; the output is an ordinary file.
	if err := f.Chmod(0o644); err != nil {
		f.Close()
		os.Remove(f.Name())
		return fmt.Errorf("file sink %s: %w", s.target, err)
	}
	s.f = f
	s.w = bufio.NewWriterSize(f, fileSinkBuffer)
	return nil
}

func (s *fileSink) Write(ctx context.Context, b *dataflow.Batch) error {
	if s.w == nil || s.done {
		return fmt.Errorf("file sink %s: %w", s.path, errNotOpen)
	}
	for i := range b.Records {
		v := b.Records[i].Value
		if bytes.ContainsAny(v, "\r\n") {
			// A pretty-printed value would span several lines and break
			// the one-value-per-line format; compact it.
			s.scratch = s.scratch[:0]
			buf := bytes.NewBuffer(s.scratch)
			if err := json.Compact(buf, v); err != nil {
				return fmt.Errorf("file sink %s: record value spans several lines and is not JSON: %w", s.target, err)
			}
			v, s.scratch = buf.Bytes(), buf.Bytes()
		}
		s.w.Write(v) // a bufio.Writer keeps its first error; Flush reports it
		if err := s.w.WriteByte('\n'); err != nil {
			return fmt.Errorf("file sink %s: %w", s.target, err)
		}
	}
	return nil
}

// Finish flushes, syncs and renames the temporary file into place: the
// sync comes first so that the rename never publishes a file whose data is
// not yet on disk.
func (s *fileSink) Finish(ctx context.Context) error {
	if s.w == nil {
		return fmt.Errorf("file sink %s: %w", s.path, errNotOpen)
	}
	if s.done {
		return nil
	}
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("file sink %s: %w", s.target, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("file sink %s: %w", s.target, err)
	}
	tmp := s.f.Name()
	err := s.f.Close()
	s.f = nil
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("file sink %s: %w", s.target, err)
	}
	if err := os.Rename(tmp, s.target); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("file sink %s: %w", s.target, err)
	}
	s.done = true
	return nil
}

// Close removes the temporary file unless Finish has renamed it.
func (s *fileSink) Close() error {
	if s.f == nil {
		return nil
	}
	tmp := s.f.Name()
	err := s.f.Close()
	s.f = nil
	if rmErr := os.Remove(tmp); rmErr != nil && err == nil {
		err = rmErr
	}
	if err != nil {
		return fmt.Errorf("file sink %s: discard unfinished output: %w", s.target, err)
	}
	return nil
}
