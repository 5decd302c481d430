package connectors

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/eddy-stream/eddy/dataflow/stream"
)

const fileSinkBuffer = 256 << 10

// fileSink writes each record's value as one line.
//
// Without checkpoints it writes to a hidden temporary file beside the
// target and renames it into place on Finish, so that the target path only
// ever holds complete output: a job that fails or is cancelled leaves the
// previous file (or none) rather than a truncated one. The target is the
// configured path, or path.part-<subtask> when the sink is parallel.
//
// With checkpoints (TaskInfo.Checkpointing) it is a two-phase-commit sink
// (stream.Transactional) and its output is a set of files
// path.part-<subtask>-<checkpoint>, each holding what the subtask wrote
// between the previous checkpoint and that one:
//
//   - records go to a hidden temporary file, .<base>.part-<subtask>.tmp-*;
//   - PreCommit(N) syncs and closes it and renames it to the hidden staged
//     name .<base>.part-<subtask>-<N>.inprogress (nothing when the file is
//     empty);
//   - Commit(N) renames every file staged at checkpoints ≤ N to its
//     published name, and Finish stages the rest (as the checkpoint after
//     the last one it saw) and publishes everything: the end of a bounded
//     input is a final commit;
//   - Abort, at the start of a run, brings the output back to the restored
//     checkpoint R: files staged at checkpoints ≤ R are published (R
//     completed, though its completion may never have reached the sink),
//     files staged or published at checkpoints > R and temporary files are
//     deleted. Starting from scratch (R = 0) deletes the subtask's earlier
//     output, as a run without checkpoints replaces its file.
//
// Naming files by checkpoint id is what makes "newer than the checkpoint"
// decidable from the directory alone: checkpoint ids grow across attempts.
// Subtask i of p takes care of the files of every subtask j ≡ i (mod p), so
// that the files of subtasks that a rescale removed are not orphaned.
type fileSink struct {
	path string // as configured; the target adds .part-i when parallel

	target  string
	f       *os.File
	w       *bufio.Writer
	scratch []byte // for compacting multi-line values
	done    bool   // renamed into place (published, with checkpoints)

	// With checkpoints.
	tx          bool
	dir, base   string // of path
	subtask     int
	parallelism int
	restored    int64 // the checkpoint the run started from
	last        int64 // the newest checkpoint staged or restored
	written     int   // records in the temporary file
	staged      []stagedFile
}

type stagedFile struct {
	checkpoint int64
	name       string // in dir: the hidden staged name
}

var (
	_ stream.Sink          = (*fileSink)(nil)
	_ stream.Transactional = (*fileSink)(nil)
)

func (s *fileSink) Open(ctx context.Context, info stream.TaskInfo) error {
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
	if info.Checkpointing {
		s.tx = true
		s.dir, s.base = filepath.Dir(s.path), filepath.Base(s.path)
		s.subtask, s.parallelism = subtask, parallelism
		s.restored, s.last = info.RestoredCheckpoint, info.RestoredCheckpoint
		// For errors; the temporary file is created with the first record.
		s.target = filepath.Join(s.dir, fmt.Sprintf("%s.part-%d-*", s.base, subtask))
		return nil
	}
	return s.create(filepath.Base(s.target))
}

// create opens a new hidden temporary file beside the output, named after
// name.
func (s *fileSink) create(name string) error {
	dir := filepath.Dir(s.target)
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
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
	if s.w == nil {
		s.w = bufio.NewWriterSize(f, fileSinkBuffer)
	} else {
		s.w.Reset(f)
	}
	s.written = 0
	return nil
}

func (s *fileSink) Write(ctx context.Context, b *stream.Batch) error {
	if s.done || (!s.tx && s.w == nil) {
		return fmt.Errorf("file sink %s: %w", s.path, errNotOpen)
	}
	if s.tx && s.f == nil && b.Len() > 0 {
		if err := s.create(fmt.Sprintf("%s.part-%d", s.base, s.subtask)); err != nil {
			return err
		}
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
	s.written += b.Len()
	return nil
}

// ReleasesInput: Write copies into the file's buffer.
func (s *fileSink) ReleasesInput() bool { return true }

// Finish flushes, syncs and renames the temporary file into place: the
// sync comes first so that the rename never publishes a file whose data is
// not yet on disk. With checkpoints it publishes everything staged too.
func (s *fileSink) Finish(ctx context.Context) error {
	if s.done {
		return nil
	}
	if s.tx {
		if _, err := s.PreCommit(ctx, s.last+1); err != nil {
			return err
		}
		if err := s.Commit(ctx, s.last); err != nil {
			return err
		}
		s.done = true
		return nil
	}
	if s.w == nil {
		return fmt.Errorf("file sink %s: %w", s.path, errNotOpen)
	}
	tmp, err := s.closeTemp()
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, s.target); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("file sink %s: %w", s.target, err)
	}
	s.done = true
	return nil
}

// closeTemp flushes, syncs and closes the temporary file and returns its
// name.
func (s *fileSink) closeTemp() (string, error) {
	if err := s.w.Flush(); err != nil {
		return "", fmt.Errorf("file sink %s: %w", s.target, err)
	}
	if err := s.f.Sync(); err != nil {
		return "", fmt.Errorf("file sink %s: %w", s.target, err)
	}
	tmp := s.f.Name()
	err := s.f.Close()
	s.f = nil
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("file sink %s: %w", s.target, err)
	}
	return tmp, nil
}

// PreCommit stages what was written since the previous checkpoint under
// checkpoint; see fileSink.
func (s *fileSink) PreCommit(ctx context.Context, checkpoint int64) ([]string, error) {
	if !s.tx || s.done {
		return nil, fmt.Errorf("file sink %s: pre-commit without checkpointing: %w", s.path, errNotOpen)
	}
	if checkpoint <= s.last {
		return nil, fmt.Errorf("file sink %s: checkpoint %d is not after checkpoint %d", s.path, checkpoint, s.last)
	}
	s.last = checkpoint
	if s.f == nil || s.written == 0 {
		return nil, nil
	}
	tmp, err := s.closeTemp()
	if err != nil {
		return nil, err
	}
	name := s.stagedName(s.subtask, checkpoint)
	if err := os.Rename(tmp, filepath.Join(s.dir, name)); err != nil {
		os.Remove(tmp)
		return nil, fmt.Errorf("file sink %s: stage: %w", s.path, err)
	}
	if err := syncDir(s.dir); err != nil {
		return nil, fmt.Errorf("file sink %s: stage: %w", s.path, err)
	}
	s.staged = append(s.staged, stagedFile{checkpoint: checkpoint, name: name})
	return []string{name}, nil
}

// Commit publishes the files staged at checkpoints ≤ checkpoint.
func (s *fileSink) Commit(ctx context.Context, checkpoint int64) error {
	if !s.tx {
		return fmt.Errorf("file sink %s: commit without checkpointing: %w", s.path, errNotOpen)
	}
	kept := s.staged[:0]
	published := false
	for _, f := range s.staged {
		if f.checkpoint > checkpoint {
			kept = append(kept, f)
			continue
		}
		if err := os.Rename(filepath.Join(s.dir, f.name), filepath.Join(s.dir, s.publishedName(s.subtask, f.checkpoint))); err != nil {
			return fmt.Errorf("file sink %s: publish checkpoint %d: %w", s.path, f.checkpoint, err)
		}
		published = true
	}
	s.staged = kept
	if published {
		if err := syncDir(s.dir); err != nil {
			return fmt.Errorf("file sink %s: publish: %w", s.path, err)
		}
	}
	return nil
}

// Abort brings the directory back to the restored checkpoint; see
// fileSink. staged are the names the checkpoint's task manifests
// recorded for the subtasks this one takes over: each must be there,
// staged or published, or output of a completed checkpoint was lost.
func (s *fileSink) Abort(ctx context.Context, staged []string) error {
	if !s.tx {
		return fmt.Errorf("file sink %s: abort without checkpointing: %w", s.path, errNotOpen)
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return fmt.Errorf("file sink %s: %w", s.path, err)
	}
	changed := false
	for _, e := range entries {
		f, ok := s.parseName(e.Name())
		if !ok || f.subtask%s.parallelism != s.subtask {
			continue
		}
		full := filepath.Join(s.dir, e.Name())
		switch {
		case f.kind == fileStaged && f.checkpoint <= s.restored:
			err = os.Rename(full, filepath.Join(s.dir, s.publishedName(f.subtask, f.checkpoint)))
		case f.kind == filePublished && f.checkpoint <= s.restored:
			continue
		default: // newer than the checkpoint, or never staged
			err = os.Remove(full)
		}
		if err != nil {
			return fmt.Errorf("file sink %s: %w", s.path, err)
		}
		changed = true
	}
	if changed {
		if err := syncDir(s.dir); err != nil {
			return fmt.Errorf("file sink %s: %w", s.path, err)
		}
	}
	for _, name := range staged {
		f, ok := s.parseName(name)
		if !ok || f.kind != fileStaged || f.subtask%s.parallelism != s.subtask || f.checkpoint > s.restored {
			return fmt.Errorf("file sink %s: %q is not a file this subtask staged at or before checkpoint %d", s.path, name, s.restored)
		}
		if _, err := os.Stat(filepath.Join(s.dir, s.publishedName(f.subtask, f.checkpoint))); err != nil {
			return fmt.Errorf("file sink %s: output staged at checkpoint %d is lost: %w", s.path, f.checkpoint, err)
		}
	}
	return nil
}

func (s *fileSink) stagedName(subtask int, checkpoint int64) string {
	return fmt.Sprintf(".%s.part-%d-%d.inprogress", s.base, subtask, checkpoint)
}

func (s *fileSink) publishedName(subtask int, checkpoint int64) string {
	return fmt.Sprintf("%s.part-%d-%d", s.base, subtask, checkpoint)
}

type sinkFileKind uint8

const (
	filePublished sinkFileKind = iota
	fileStaged
	fileTemp
)

type sinkFile struct {
	kind       sinkFileKind
	subtask    int
	checkpoint int64 // 0 for a temporary file
}

// parseName recognises the files of this sink, of any subtask, in its
// directory: published, staged and temporary ones.
func (s *fileSink) parseName(name string) (sinkFile, bool) {
	if rest, ok := strings.CutPrefix(name, s.base+".part-"); ok {
		sub, cp, ok := parseSubtaskCheckpoint(rest)
		return sinkFile{kind: filePublished, subtask: sub, checkpoint: cp}, ok
	}
	rest, ok := strings.CutPrefix(name, "."+s.base+".part-")
	if !ok {
		return sinkFile{}, false
	}
	if mid, ok := strings.CutSuffix(rest, ".inprogress"); ok {
		sub, cp, ok := parseSubtaskCheckpoint(mid)
		return sinkFile{kind: fileStaged, subtask: sub, checkpoint: cp}, ok
	}
	if sub, _, ok := strings.Cut(rest, ".tmp-"); ok {
		n, err := strconv.Atoi(sub)
		return sinkFile{kind: fileTemp, subtask: n}, err == nil && n >= 0 && strconv.Itoa(n) == sub
	}
	return sinkFile{}, false
}

// parseSubtaskCheckpoint reads "<subtask>-<checkpoint>", both canonical
// decimals.
func parseSubtaskCheckpoint(s string) (int, int64, bool) {
	a, b, ok := strings.Cut(s, "-")
	if !ok {
		return 0, 0, false
	}
	sub, err1 := strconv.Atoi(a)
	cp, err2 := strconv.ParseInt(b, 10, 64)
	if err1 != nil || err2 != nil || sub < 0 || cp <= 0 || strconv.Itoa(sub) != a || strconv.FormatInt(cp, 10) != b {
		return 0, 0, false
	}
	return sub, cp, true
}

// syncDir makes renames in dir durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, os.ErrInvalid) {
		return nil // a file system that cannot sync directories
	}
	return err
}

// Close removes the temporary file unless Finish has renamed it. Staged
// files stay: a restore publishes or deletes them.
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
