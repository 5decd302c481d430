package connectors

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/eddy-stream/eddy/abi/jsonscan"
	"github.com/eddy-stream/eddy/dataflow/stream"
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
	// offset is the byte offset of the line after the last one scanned,
	// and tokenLen the bytes the scanner's last token took, newline
	// included: the position of a checkpoint.
	offset   int64
	tokenLen int
	// size is the file's size at Open: what Progress measures the
	// offset against (every subtask scans the whole file).
	size int64
}

func (s *fileSource) Open(ctx context.Context, info stream.TaskInfo) error {
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
	s.subtask, s.parallelism = subtask, parallelism
	s.size = -1
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() {
		s.size = fi.Size()
	}
	s.scanFrom(0, 0)
	return nil
}

// scanFrom starts scanning at offset, which is where line+1 begins.
func (s *fileSource) scanFrom(offset int64, line int) {
	s.sc = bufio.NewScanner(s.f)
	s.sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	s.sc.Split(s.splitLines)
	s.offset, s.line, s.done = offset, line, false
}

// splitLines is bufio.ScanLines, remembering how many bytes each line took.
func (s *fileSource) splitLines(data []byte, atEOF bool) (int, []byte, error) {
	advance, token, err := bufio.ScanLines(data, atEOF)
	if token != nil {
		s.tokenLen = advance
	}
	return advance, token, err
}

// filePositionTag starts a file source position: its format version.
const filePositionTag = 'f'

// Position is the byte offset of the next line to scan and the number of
// lines before it, which decides the subtask of every line after.
func (s *fileSource) Position() ([]byte, error) {
	if s.sc == nil {
		return nil, fmt.Errorf("file source %s: %w", s.path, errNotOpen)
	}
	return encodeFilePosition(s.offset, s.line), nil
}

// Seek continues at a position Position returned. The file must still
// hold at least as many bytes, with a line ending right before the
// position: otherwise it is not the file the position was taken on.
func (s *fileSource) Seek(pos []byte) error {
	if s.sc == nil {
		return fmt.Errorf("file source %s: %w", s.path, errNotOpen)
	}
	offset, line, err := decodeFilePosition(pos)
	if err != nil {
		return fmt.Errorf("file source %s: %w", s.path, err)
	}
	if offset > 0 {
		var last [1]byte
		if _, err := s.f.ReadAt(last[:], offset-1); err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("file source %s: position %d is beyond the end of the file: it changed since the checkpoint", s.path, offset)
			}
			return fmt.Errorf("file source %s: %w", s.path, err)
		}
		if last[0] != '\n' && !s.atEnd(offset) {
			return fmt.Errorf("file source %s: position %d (line %d) is not at the start of a line: the file changed since the checkpoint", s.path, offset, line+1)
		}
	}
	if _, err := s.f.Seek(offset, io.SeekStart); err != nil {
		return fmt.Errorf("file source %s: %w", s.path, err)
	}
	s.scanFrom(offset, line)
	return nil
}

// atEnd reports whether offset is the end of the file: a last line
// without a newline ends there.
func (s *fileSource) atEnd(offset int64) bool {
	fi, err := s.f.Stat()
	return err == nil && fi.Size() == offset
}

func encodeFilePosition(offset int64, line int) []byte {
	b := []byte{filePositionTag, 1}
	b = binary.AppendUvarint(b, uint64(offset))
	return binary.AppendUvarint(b, uint64(line))
}

// decodeFilePosition reads what encodeFilePosition wrote; the bytes come
// from checkpoint storage, so anything else is an error.
func decodeFilePosition(pos []byte) (offset int64, line int, err error) {
	if len(pos) < 2 || pos[0] != filePositionTag || pos[1] != 1 {
		return 0, 0, fmt.Errorf("%w: not a file position", ErrBadPosition)
	}
	rest := pos[2:]
	off, n := binary.Uvarint(rest)
	if n <= 0 || off > math.MaxInt64 {
		return 0, 0, fmt.Errorf("%w: file position: bad offset", ErrBadPosition)
	}
	rest = rest[n:]
	ln, n := binary.Uvarint(rest)
	if n <= 0 || ln > math.MaxInt32 || ln > off {
		// Every line takes at least its newline.
		return 0, 0, fmt.Errorf("%w: file position: bad line number", ErrBadPosition)
	}
	if len(rest) != n {
		return 0, 0, fmt.Errorf("%w: file position: %d trailing bytes", ErrBadPosition, len(rest)-n)
	}
	return int64(off), int(ln), nil
}

// Next appends up to limit records and returns io.EOF with the last ones.
func (s *fileSource) Next(ctx context.Context, b *stream.Batch, limit int) error {
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
		s.offset += int64(s.tokenLen)
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

// Progress is the byte offset scanned of the file's size at Open; a file
// that grows meanwhile reads as done until its end (it is read to EOF).
// A pipe or device has no size to tell.
func (s *fileSource) Progress() (done, total int64, ok bool) {
	if s.sc == nil || s.size < 0 {
		return 0, 0, false
	}
	if s.done {
		return s.size, s.size, true
	}
	return min(s.offset, s.size), s.size, true
}

func (s *fileSource) add(b *stream.Batch, line []byte) error {
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
		if raw, st := jsonscan.Lookup(line, []byte(s.keyField)); st == jsonscan.Field {
			key = jsonKey(raw)
		}
	}
	ts := stream.NoTimestamp
	if s.tsField != "" {
		if raw, st := jsonscan.Lookup(line, []byte(s.tsField)); st == jsonscan.Field {
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

// jsonKey turns the raw value of a key field into a record key: the
// content of a string, the JSON text of anything else, nothing for null.
func jsonKey(raw []byte) []byte {
	switch {
	case len(raw) == 0 || string(raw) == "null":
		return nil
	case raw[0] == '"':
		return jsonscan.AppendUnquote(nil, raw)
	default:
		return raw
	}
}

// jsonTimestamp reads event time from the raw value of a timestamp field:
// a number of milliseconds since the Unix epoch or an RFC 3339 string.
// null means no timestamp.
func jsonTimestamp(raw []byte) (int64, error) {
	switch {
	case string(raw) == "null":
		return stream.NoTimestamp, nil
	case raw[0] == '"':
		s := jsonscan.AppendUnquote(nil, raw)
		t, err := time.Parse(time.RFC3339Nano, string(s))
		if err != nil {
			return 0, fmt.Errorf("timestamp %s is not an RFC 3339 time", raw)
		}
		return t.UnixMilli(), nil
	case raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'):
		if ms, err := strconv.ParseInt(string(raw), 10, 64); err == nil {
			return ms, nil
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil || f < -(1<<63) || f >= 1<<63 {
			return 0, fmt.Errorf("timestamp %s is out of range", raw)
		}
		return int64(f), nil
	default:
		return 0, fmt.Errorf("timestamp %s is neither a number of milliseconds nor an RFC 3339 string", raw)
	}
}
