package connectors

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/eddy-stream/eddy/dataflow"
)

// maxLineBytes bounds one line of a JSON-lines file. Lines are records, so
// anything larger is almost certainly not a JSON-lines file at all.
const maxLineBytes = 16 << 20

// fileSource reads one JSON value per line. Subtask i of p takes the lines
// whose 0-based number (blank lines included) is i modulo p: every subtask
// scans the whole file, but the split needs no coordination and the union
// is the file whatever p is. Lines of other subtasks are not checked here;
// their own subtask reports them.
type fileSource struct {
	path     string
	keyField string
	tsField  string

	f           *os.File
	sc          *bufio.Scanner
	line        int // 1-based number of the last line scanned
	subtask     int
	parallelism int
	done        bool
}

func (s *fileSource) Open(ctx context.Context, info dataflow.TaskInfo) error {
	subtask, parallelism, err := subtaskOf(info)
	if err != nil {
		return fmt.Errorf("open file source %s: %w", s.path, err)
	}
	f, err := os.Open(s.path)
	if err != nil {
		// The *PathError already names the path.
		return fmt.Errorf("file source: %w", err)
	}
	s.f = f
	s.sc = bufio.NewScanner(f)
	s.sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	s.subtask, s.parallelism = subtask, parallelism
	return nil
}

// Next appends up to limit records and returns io.EOF with the last ones.
func (s *fileSource) Next(ctx context.Context, b *dataflow.Batch, limit int) error {
	if s.sc == nil {
		return fmt.Errorf("file source %s: %w", s.path, errNotOpen)
	}
	if s.done {
		return io.EOF
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for added := 0; added < limit; {
		if !s.sc.Scan() {
			if err := s.sc.Err(); err != nil {
				if errors.Is(err, bufio.ErrTooLong) {
					return fmt.Errorf("%s:%d: line longer than %d MiB", s.path, s.line+1, maxLineBytes>>20)
				}
				return fmt.Errorf("file source %s: read after line %d: %w", s.path, s.line, err)
			}
			s.done = true
			return io.EOF
		}
		s.line++
		if (s.line-1)%s.parallelism != s.subtask {
			continue
		}
		line := bytes.TrimSpace(s.sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if err := s.add(b, line); err != nil {
			return fmt.Errorf("%s:%d: %w", s.path, s.line, err)
		}
		added++
	}
	return nil
}

func (s *fileSource) add(b *dataflow.Batch, line []byte) error {
	if !json.Valid(line) {
		// Decode only to get encoding/json's description of the error.
		var v json.RawMessage
		err := json.Unmarshal(line, &v)
		if err == nil {
			err = errors.New("not a JSON value")
		}
		return fmt.Errorf("invalid JSON: %w", err)
	}
	var key []byte
	if s.keyField != "" {
		if raw, ok := jsonField(line, s.keyField); ok {
			k, err := jsonKey(raw)
			if err != nil {
				return fmt.Errorf("key field %q: %w", s.keyField, err)
			}
			key = k
		}
	}
	ts := dataflow.NoTimestamp
	if s.tsField != "" {
		if raw, ok := jsonField(line, s.tsField); ok {
			t, err := jsonTimestamp(raw)
			if err != nil {
				return fmt.Errorf("timestamp field %q: %w", s.tsField, err)
			}
			ts = t
		}
	}
	b.Add(key, line, ts)
	return nil
}

func (s *fileSource) Close() error {
	if s.f == nil {
		return nil
	}
	err := s.f.Close()
	s.f, s.sc = nil, nil
	if err != nil {
		return fmt.Errorf("file source: %w", err)
	}
	return nil
}
