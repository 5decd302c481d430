package connectors

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eddy-stream/eddy/dataflow/jobspec"
	"github.com/eddy-stream/eddy/dataflow/stream"
)

// batchRead is what one Next call returned and the position after it.
type batchRead struct {
	recs []rec
	pos  []byte
}

// readPositions opens src as the subtask, seeks it to from (unless nil),
// and reads it to the end in batches of limit, taking its position before
// the first Next and after each.
func readPositions(t *testing.T, src stream.Source, subtask, parallelism, limit int, from []byte) (start []byte, reads []batchRead) {
	t.Helper()
	ctx := context.Background()
	if err := src.Open(ctx, stream.TaskInfo{Subtask: subtask, Parallelism: parallelism}); err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	cp := src.(stream.Checkpointed)
	if from != nil {
		if err := cp.Seek(from); err != nil {
			t.Fatalf("Seek: %v", err)
		}
	}
	start, err := cp.Position()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b := stream.NewBatch(limit)
		nextErr := src.Next(ctx, b, limit)
		if nextErr != nil && !errors.Is(nextErr, io.EOF) {
			t.Fatalf("Next: %v", nextErr)
		}
		var r batchRead
		for _, x := range b.Records {
			r.recs = append(r.recs, rec{string(x.Key), string(x.Value), x.Timestamp})
		}
		if r.pos, err = cp.Position(); err != nil {
			t.Fatal(err)
		}
		reads = append(reads, r)
		if nextErr != nil {
			return start, reads
		}
		if len(reads) > 10_000 {
			t.Fatal("the source does not end")
		}
	}
}

func flatten(reads []batchRead) []rec {
	var out []rec
	for _, r := range reads {
		out = append(out, r.recs...)
	}
	return out
}

// checkSeekRoundTrip reads every subtask of a source once, then again from
// each position it reported: seek and continue must give exactly the
// records after that position.
func checkSeekRoundTrip(t *testing.T, spec *jobspec.SourceSpec, parallelism, limit int) {
	t.Helper()
	for sub := range parallelism {
		newSrc := func() stream.Source {
			src, err := Registry{}.NewSource(spec, "")
			if err != nil {
				t.Fatal(err)
			}
			return src
		}
		start, reads := readPositions(t, newSrc(), sub, parallelism, limit, nil)
		all := flatten(reads)
		if len(all) == 0 {
			t.Fatalf("subtask %d read nothing", sub)
		}
		_, again := readPositions(t, newSrc(), sub, parallelism, limit, start)
		if got := flatten(again); !slices.Equal(got, all) {
			t.Fatalf("subtask %d: from the start position: %d records, want %d", sub, len(got), len(all))
		}
		seen := 0
		for i, r := range reads {
			seen += len(r.recs)
			_, rest := readPositions(t, newSrc(), sub, parallelism, 3, r.pos)
			if got := flatten(rest); !slices.Equal(got, all[seen:]) {
				t.Fatalf("subtask %d: after batch %d (%d records): %d records, want %d", sub, i, seen, len(got), len(all)-seen)
			}
		}
	}
}

func TestGeneratorSeek(t *testing.T) {
	for _, tc := range []struct {
		name string
		spec jobspec.GeneratorSpec
	}{
		{"sequence", jobspec.GeneratorSpec{Kind: "sequence", Count: 100}},
		{"transactions", jobspec.GeneratorSpec{Kind: "transactions", Count: 120, Seed: 5, Disorder: jobspec.Duration(2 * time.Second), LateFraction: 0.1}},
		{"fewer records than subtasks", jobspec.GeneratorSpec{Kind: "transactions", Count: 2, Seed: 5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, p := range []int{1, 3} {
				if int64(p) > tc.spec.Count {
					continue
				}
				checkSeekRoundTrip(t, genSpec(tc.spec), p, 7)
			}
		})
	}
}

// TestGeneratorSeekUnbounded: an unbounded generator resumes exactly too.
func TestGeneratorSeekUnbounded(t *testing.T) {
	ctx := context.Background()
	spec := genSpec(jobspec.GeneratorSpec{Kind: "transactions", Seed: 3})
	read := func(from []byte, batches int) ([]rec, []byte) {
		src, _ := Registry{}.NewSource(spec, "")
		if err := src.Open(ctx, stream.TaskInfo{Subtask: 1, Parallelism: 2}); err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		if from != nil {
			if err := src.(stream.Checkpointed).Seek(from); err != nil {
				t.Fatal(err)
			}
		}
		var out []rec
		for range batches {
			b := stream.NewBatch(50)
			if err := src.Next(ctx, b, 50); err != nil {
				t.Fatal(err)
			}
			for _, r := range b.Records {
				out = append(out, rec{string(r.Key), string(r.Value), r.Timestamp})
			}
		}
		pos, _ := src.(stream.Checkpointed).Position()
		return out, pos
	}
	all, _ := read(nil, 4)
	_, pos := read(nil, 1)
	rest, _ := read(pos, 3)
	if !slices.Equal(rest, all[50:]) {
		t.Fatalf("after a seek: %d records differ", len(rest))
	}
}

func TestGeneratorSeekErrors(t *testing.T) {
	ctx := context.Background()
	spec := genSpec(jobspec.GeneratorSpec{Kind: "sequence", Count: 100})
	open := func(sub, p int) stream.Checkpointed {
		src, _ := Registry{}.NewSource(spec, "")
		if err := src.Open(ctx, stream.TaskInfo{Subtask: sub, Parallelism: p}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { src.Close() })
		return src.(stream.Checkpointed)
	}
	pos, _ := open(1, 3).Position()
	for _, tc := range []struct {
		name     string
		sub, p   int
		pos      []byte
		badBytes bool
		msg      string
	}{
		{"other subtask", 2, 3, pos, false, "position of subtask 1 of 3, this is subtask 2 of 3"},
		{"other parallelism", 1, 2, pos, false, "position of subtask 1 of 3, this is subtask 1 of 2"},
		{"empty", 0, 1, nil, true, "not a generator position"},
		{"file position", 0, 1, encodeFilePosition(10, 2), true, "not a generator position"},
		{"truncated", 1, 3, pos[:len(pos)-1], true, "bad parallelism"},
		{"trailing bytes", 1, 3, append(slices.Clone(pos), 0), true, "1 trailing bytes"},
		{"zero parallelism", 0, 1, encodeGeneratorPosition(0, 0), true, "bad parallelism"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := open(tc.sub, tc.p).Seek(tc.pos)
			if err == nil || !strings.Contains(err.Error(), tc.msg) || errors.Is(err, ErrBadPosition) != tc.badBytes {
				t.Fatalf("Seek: %v, want %q (ErrBadPosition: %v)", err, tc.msg, tc.badBytes)
			}
		})
	}
}

const seekFileContent = "{\"n\":0}\n{\"n\":1}\n\n   \r\n{\"n\":2}\r\n{\"n\":3}\n{\"n\":4}\n{\"n\":5}\n\n{\"n\":6}\n{\"n\":7}\n{\"n\":8}"

func TestFileSourceSeek(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		"no final newline": seekFileContent,
		"final newline":    seekFileContent + "\n",
		"empty":            "",
		"blank lines only": "\n\n\n",
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".jsonl")
			writeFile(t, path, content)
			for _, p := range []int{1, 2, 3} {
				for _, limit := range []int{1, 2, 5} {
					if strings.Contains(content, "n") {
						checkSeekRoundTrip(t, fileSourceSpec(path, "", ""), p, limit)
						continue
					}
					// Nothing to read: seeking to the end reads nothing.
					start, reads := readPositions(t, mustSource(t, path), 0, p, limit, nil)
					_, again := readPositions(t, mustSource(t, path), 0, p, limit, reads[len(reads)-1].pos)
					if len(flatten(reads))+len(flatten(again)) != 0 || start == nil {
						t.Fatal("read records from a file without any")
					}
				}
			}
		})
	}
}

func mustSource(t *testing.T, path string) stream.Source {
	src, err := Registry{}.NewSource(fileSourceSpec(path, "", ""), "")
	if err != nil {
		t.Fatal(err)
	}
	return src
}

func TestFileSourceSeekErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "in.jsonl")
	writeFile(t, path, seekFileContent)
	for _, tc := range []struct {
		name     string
		pos      []byte
		badBytes bool
		msg      string
	}{
		{"beyond the end", encodeFilePosition(int64(len(seekFileContent))+5, 3), false, "beyond the end of the file: it changed since the checkpoint"},
		{"inside a line", encodeFilePosition(3, 0), false, "position 3 (line 1) is not at the start of a line"},
		{"generator position", encodeGeneratorPosition(3, 1), true, "not a file position"},
		{"more lines than bytes", encodeFilePosition(3, 4), true, "bad line number"},
		{"truncated", encodeFilePosition(300, 2)[:3], true, "bad offset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src := mustSource(t, path)
			if err := src.Open(context.Background(), stream.TaskInfo{}); err != nil {
				t.Fatal(err)
			}
			defer src.Close()
			err := src.(stream.Checkpointed).Seek(tc.pos)
			if err == nil || !strings.Contains(err.Error(), tc.msg) || errors.Is(err, ErrBadPosition) != tc.badBytes {
				t.Fatalf("Seek: %v, want %q (ErrBadPosition: %v)", err, tc.msg, tc.badBytes)
			}
		})
	}
}

// FuzzFilePosition feeds arbitrary bytes to the file source as a position
// (they come from checkpoint storage): never a panic; a position accepted
// by the decoder encodes back to the same values; a seek that succeeds
// leaves a source that reads on without failing.
func FuzzFilePosition(f *testing.F) {
	f.Add(encodeFilePosition(0, 0))
	f.Add(encodeFilePosition(8, 1))
	f.Add(encodeFilePosition(40, 5))
	f.Add(encodeFilePosition(1<<62, 1<<20))
	f.Add([]byte("f\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00"))
	f.Add(encodeGeneratorPosition(5, 2))
	path := filepath.Join(f.TempDir(), "in.jsonl")
	if err := os.WriteFile(path, []byte(seekFileContent), 0o644); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, pos []byte) {
		offset, line, err := decodeFilePosition(pos)
		if err != nil {
			if !errors.Is(err, ErrBadPosition) {
				t.Fatalf("error %v does not wrap ErrBadPosition", err)
			}
			return
		}
		if offset < 0 || line < 0 || int64(line) > offset {
			t.Fatalf("decoded offset %d line %d", offset, line)
		}
		if o, l, err := decodeFilePosition(encodeFilePosition(offset, line)); err != nil || o != offset || l != line {
			t.Fatalf("re-encoding %d/%d gives %d/%d, %v", offset, line, o, l, err)
		}
		src := &fileSource{path: path}
		ctx := context.Background()
		if err := src.Open(ctx, stream.TaskInfo{Subtask: 1, Parallelism: 2}); err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		if src.Seek(pos) != nil {
			return
		}
		for range 20 {
			b := stream.NewBatch(4)
			if err := src.Next(ctx, b, 4); err != nil {
				if errors.Is(err, io.EOF) {
					return
				}
				return // an invalid JSON line: a position inside the file's data may land anywhere
			}
		}
	})
}

// FuzzGeneratorPosition: the generator's position decoder never panics,
// and what it accepts encodes back to the same values.
func FuzzGeneratorPosition(f *testing.F) {
	f.Add(encodeGeneratorPosition(0, 1))
	f.Add(encodeGeneratorPosition(1<<63, 1<<31-1))
	f.Add(encodeFilePosition(1, 1))
	f.Fuzz(func(t *testing.T, pos []byte) {
		next, step, err := decodeGeneratorPosition(pos)
		if err != nil {
			if !errors.Is(err, ErrBadPosition) {
				t.Fatalf("error %v does not wrap ErrBadPosition", err)
			}
			return
		}
		if n, s, err := decodeGeneratorPosition(encodeGeneratorPosition(next, step)); err != nil || n != next || s != step {
			t.Fatalf("re-encoding %d/%d gives %d/%d, %v", next, step, n, s, err)
		}
		g := newGenerator(generatorConfig{kind: jobspec.GeneratorSequence, count: 50, intervalNs: uint64(time.Millisecond)})
		ctx := context.Background()
		if err := g.Open(ctx, stream.TaskInfo{Subtask: int(step-1) % 3, Parallelism: 3}); err != nil {
			t.Fatal(err)
		}
		if g.Seek(pos) == nil {
			b := stream.NewBatch(8)
			if err := g.Next(ctx, b, 8); err != nil && !errors.Is(err, io.EOF) {
				t.Fatal(err)
			}
		}
	})
}

// sinkDir lists the files in dir: published ones, and hidden ones apart.
func sinkDir(t *testing.T, dir string) (published, hidden []string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			hidden = append(hidden, e.Name())
		} else {
			published = append(published, e.Name())
		}
	}
	return published, hidden
}

// txSink opens a checkpointing file sink instance on dir/out.jsonl
// restored from checkpoint restored, and aborts what it must.
func txSink(t *testing.T, dir string, subtask, parallelism int, restored int64, staged ...string) *fileSink {
	t.Helper()
	snk, err := Registry{}.NewSink(&jobspec.SinkSpec{File: &jobspec.FileSinkSpec{Path: "out.jsonl"}}, dir)
	if err != nil {
		t.Fatal(err)
	}
	s := snk.(*fileSink)
	ctx := context.Background()
	if err := s.Open(ctx, stream.TaskInfo{Subtask: subtask, Parallelism: parallelism, Checkpointing: true, RestoredCheckpoint: restored}); err != nil {
		t.Fatal(err)
	}
	if err := s.Abort(ctx, staged); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	return s
}

func mustWrite(t *testing.T, s stream.Sink, values ...string) {
	t.Helper()
	if err := s.Write(context.Background(), batchOf(values...)); err != nil {
		t.Fatal(err)
	}
}

func mustPreCommit(t *testing.T, s stream.Transactional, id int64) []string {
	t.Helper()
	staged, err := s.PreCommit(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return staged
}

func readFiles(t *testing.T, dir string, names []string) []string {
	t.Helper()
	var lines []string
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, strings.Fields(string(data))...)
	}
	slices.Sort(lines)
	return lines
}

func expectDir(t *testing.T, dir string, wantPublished, wantHidden []string) {
	t.Helper()
	published, hidden := sinkDir(t, dir)
	for i, h := range hidden {
		if strings.Contains(h, ".tmp-") {
			hidden[i] = h[:strings.Index(h, ".tmp-")+5] + "*"
		}
	}
	if !slices.Equal(published, wantPublished) || !slices.Equal(hidden, wantHidden) {
		t.Fatalf("files %q and hidden %q, want %q and %q", published, hidden, wantPublished, wantHidden)
	}
}

// TestFileSinkTwoPhaseCommit walks one sink subtask through checkpoints,
// crashes and restores: output becomes visible only when a checkpoint
// completes (or at the end), and a restore brings it back to the
// checkpoint exactly.
func TestFileSinkTwoPhaseCommit(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := txSink(t, dir, 0, 2, 0)
	expectDir(t, dir, nil, nil) // nothing before the first record
	mustWrite(t, s, "a1", "a2")
	expectDir(t, dir, nil, []string{".out.jsonl.part-0.tmp-*"})
	if staged := mustPreCommit(t, s, 1); !slices.Equal(staged, []string{".out.jsonl.part-0-1.inprogress"}) {
		t.Fatalf("staged %q", staged)
	}
	if staged := mustPreCommit(t, s, 2); staged != nil {
		t.Fatalf("nothing written, yet staged %q", staged)
	}
	mustWrite(t, s, "b1")
	staged3 := mustPreCommit(t, s, 3)
	expectDir(t, dir, nil, []string{".out.jsonl.part-0-1.inprogress", ".out.jsonl.part-0-3.inprogress"})
	if err := s.Commit(ctx, 2); err != nil {
		t.Fatal(err)
	}
	expectDir(t, dir, []string{"out.jsonl.part-0-1"}, []string{".out.jsonl.part-0-3.inprogress"})
	if _, err := s.PreCommit(ctx, 3); err == nil {
		t.Fatal("a second pre-commit of checkpoint 3 was accepted")
	}
	mustWrite(t, s, "c1")
	mustPreCommit(t, s, 4)
	mustWrite(t, s, "d1")
	// Crash: no Finish, no Commit of 3 or 4.
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	expectDir(t, dir, []string{"out.jsonl.part-0-1"}, []string{".out.jsonl.part-0-3.inprogress", ".out.jsonl.part-0-4.inprogress"})
	// A kill -9 leaves the temporary file too.
	writeFile(t, filepath.Join(dir, ".out.jsonl.part-0.tmp-123"), "d1\n")

	// Restore from 3, which completed though the sink never heard: its
	// output is published, 4's dropped.
	s = txSink(t, dir, 0, 2, 3, staged3...)
	expectDir(t, dir, []string{"out.jsonl.part-0-1", "out.jsonl.part-0-3"}, nil)
	mustWrite(t, s, "c1")
	mustPreCommit(t, s, 5)
	if err := s.Commit(ctx, 5); err != nil {
		t.Fatal(err)
	}
	mustWrite(t, s, "d1")
	s.Close()
	// Restore from 3 again (5 turned out unreadable): 5's published output goes too.
	s = txSink(t, dir, 0, 2, 3, staged3...)
	expectDir(t, dir, []string{"out.jsonl.part-0-1", "out.jsonl.part-0-3"}, nil)
	mustWrite(t, s, "c1", "d1")
	if err := s.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	published, _ := sinkDir(t, dir)
	expectDir(t, dir, []string{"out.jsonl.part-0-1", "out.jsonl.part-0-3", "out.jsonl.part-0-4"}, nil)
	if got := readFiles(t, dir, published); !slices.Equal(got, []string{"a1", "a2", "b1", "c1", "d1"}) {
		t.Fatalf("output %q", got)
	}

	// A run from scratch replaces the subtask's output, as without
	// checkpoints; subtask 1's files are not its business.
	writeFile(t, filepath.Join(dir, "out.jsonl.part-1-2"), "other\n")
	s = txSink(t, dir, 0, 2, 0)
	expectDir(t, dir, []string{"out.jsonl.part-1-2"}, nil)
	s.Close()
}

// TestFileSinkRescale: after a restore at another parallelism, subtask i
// takes care of the files of every old subtask j ≡ i (mod p).
func TestFileSinkRescale(t *testing.T) {
	dir := t.TempDir()
	var staged [][]string
	for sub := range 3 {
		s := txSink(t, dir, sub, 3, 0)
		mustWrite(t, s, "x"+string(rune('0'+sub)))
		staged = append(staged, mustPreCommit(t, s, 1))
		mustWrite(t, s, "y"+string(rune('0'+sub)))
		mustPreCommit(t, s, 2) // never completes
		mustWrite(t, s, "z")
		s.Close()
	}
	a := txSink(t, dir, 0, 2, 1, append(staged[0], staged[2]...)...)
	expectDir(t, dir, []string{"out.jsonl.part-0-1", "out.jsonl.part-2-1"},
		[]string{".out.jsonl.part-1-1.inprogress", ".out.jsonl.part-1-2.inprogress"})
	b := txSink(t, dir, 1, 2, 1, staged[1]...)
	expectDir(t, dir, []string{"out.jsonl.part-0-1", "out.jsonl.part-1-1", "out.jsonl.part-2-1"}, nil)
	for _, s := range []*fileSink{a, b} {
		mustWrite(t, s, "w"+string(rune('0'+s.subtask)))
		if err := s.Finish(context.Background()); err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	published, hidden := sinkDir(t, dir)
	if got := readFiles(t, dir, published); !slices.Equal(got, []string{"w0", "w1", "x0", "x1", "x2"}) || hidden != nil {
		t.Fatalf("output %q, hidden %q", got, hidden)
	}
}

func TestFileSinkAbortErrors(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := txSink(t, dir, 0, 1, 0)
	mustWrite(t, s, "a")
	staged := mustPreCommit(t, s, 1)
	s.Close()
	if err := os.Remove(filepath.Join(dir, staged[0])); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		staged []string
		msg    string
	}{
		{"lost output", staged, "output staged at checkpoint 1 is lost"},
		{"not a staged name", []string{"out.jsonl.part-0-1"}, `"out.jsonl.part-0-1" is not a file this subtask staged at or before checkpoint 1`},
		{"newer than the checkpoint", []string{".out.jsonl.part-0-2.inprogress"}, "not a file this subtask staged at or before checkpoint 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			snk, _ := Registry{}.NewSink(&jobspec.SinkSpec{File: &jobspec.FileSinkSpec{Path: "out.jsonl"}}, dir)
			if err := snk.Open(ctx, stream.TaskInfo{Checkpointing: true, RestoredCheckpoint: 1}); err != nil {
				t.Fatal(err)
			}
			defer snk.Close()
			err := snk.(stream.Transactional).Abort(ctx, tc.staged)
			if err == nil || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Abort: %v, want %q", err, tc.msg)
			}
		})
	}
	// Without checkpoints the sink does not stage.
	snk, _ := Registry{}.NewSink(&jobspec.SinkSpec{File: &jobspec.FileSinkSpec{Path: "plain.jsonl"}}, dir)
	if err := snk.Open(ctx, stream.TaskInfo{}); err != nil {
		t.Fatal(err)
	}
	defer snk.Close()
	if _, err := snk.(stream.Transactional).PreCommit(ctx, 1); err == nil {
		t.Fatal("PreCommit without checkpointing was accepted")
	}
}
