package state

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/eddy-stream/eddy/storage"
)

// SnapshotManifest describes one task's snapshot of one operator's keyed
// state: what a task manifest records under the operator's node, and what
// RestoreFrom needs to bring the state back. It is plain JSON.
//
// File keys are relative to the prefix given to SnapshotTo (they are
// "shared/<sha256>"), so the files can be copied under another prefix (a
// savepoint) and restored from there, with that prefix, without rewriting
// the manifest. Use [File.StorageKey] for a file's key in the Store.
type SnapshotManifest struct {
	// Format is the FormatVersion of the entries the snapshot holds.
	Format int `json:"format"`
	// Kind says how the files are to be read: SnapshotFull or
	// SnapshotPebble.
	Kind string `json:"kind"`
	// Files are the state files the snapshot references, sorted by name
	// (pebble) or the one entries file (full). Package dataflow/checkpoint
	// reads their key and size (checkpoint.StateFile) out of task manifests
	// to keep and copy them: the contract of checkpoint_contract_test.go.
	Files []File `json:"files"`
	// Groups are the key groups of the task that took the snapshot. A
	// restore skips snapshots that do not overlap its own range.
	Groups Range `json:"groups"`
	// MaxParallelism is the number of key groups of the operator; 0 when
	// the Store did not say (see SnapshotTo). A restore needs the same.
	MaxParallelism int `json:"max_parallelism,omitempty"`
	// Scope is the operator's scope when the snapshot was taken. Pebble
	// files hold full keys, and a restore reads those of this scope; full
	// snapshots hold scope-relative entries and record it for information.
	Scope Scope `json:"scope"`
	// FullSize is the number of bytes of the files the snapshot references.
	FullSize int64 `json:"full_size"`
	// IncrementalSize is the number of bytes this snapshot uploaded: files
	// that were not in the store already.
	IncrementalSize int64 `json:"incremental_size"`
}

// File is one state file of a snapshot, content-addressed.
type File struct {
	// Key is the object's key relative to the snapshot's prefix:
	// "shared/<SHA256>".
	Key string `json:"key"`
	// SHA256 is the lowercase hex sha256 of the content; a restore checks it.
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"`
	// Name is the file's name in a Pebble checkpoint directory (pebble
	// snapshots only): the restore rebuilds the directory from the names.
	Name string `json:"name,omitempty"`
}

// Kinds of snapshot.
const (
	// SnapshotFull is one file of Store.Snapshot's entries, in the format of
	// package state/internal/entryfile: what the memory backend, and any
	// Store that is not a Pebble one, writes.
	SnapshotFull = "full"
	// SnapshotPebble is a Pebble checkpoint restricted to the task's key
	// span: its table files, shared with earlier snapshots, plus its
	// MANIFEST, OPTIONS and marker files.
	SnapshotPebble = "pebble-sst"
)

// SharedDir is the folder, under a snapshot's prefix, of its state files.
const SharedDir = "shared"

// StorageKey returns the key of f in the Store for the prefix the snapshot
// was written (or copied) under.
func (f File) StorageKey(prefix string) string {
	prefix = strings.TrimSuffix(prefix, "/")
	if prefix == "" {
		return f.Key
	}
	return prefix + "/" + f.Key
}

// StorageKeys returns the keys of every file m references under prefix: the
// files that must be kept (and copied, for a savepoint) while m is.
func (m SnapshotManifest) StorageKeys(prefix string) []string {
	keys := make([]string, len(m.Files))
	for i, f := range m.Files {
		keys[i] = f.StorageKey(prefix)
	}
	return keys
}

// Concurrent transfers of one snapshot or restore.
const transferWorkers = 4

// SnapshotTo writes the task's state (keyed state and timers of its
// key-group range) to blobs under prefix+"/shared/", uploading only the
// files that are not there already, and returns what a task manifest
// records. It is CaptureSnapshot followed by Upload.
//
// A Pebble Store writes an incremental snapshot (SnapshotPebble): it
// flushes the database's memtable, takes a Pebble checkpoint of the task's
// key span and uploads its files content-addressed, so that a table file an
// earlier snapshot (or another task sharing the database) uploaded is
// referenced, not uploaded again. Any other Store writes a full snapshot
// (SnapshotFull); it too is content-addressed, so unchanged state uploads
// nothing. A Store of another package (a wrapper) is snapshotted through
// its Snapshot method; its manifest then covers every key group and does
// not know the scope or the number of key groups.
//
// Like Snapshot, it must be called from the task's goroutine, between
// writes. Nothing is held in memory: a full snapshot streams through a
// temporary file.
func SnapshotTo(ctx context.Context, st Store, blobs storage.Store, prefix string) (SnapshotManifest, error) {
	c, err := CaptureSnapshot(ctx, st)
	if err != nil {
		return SnapshotManifest{}, err
	}
	return c.Upload(ctx, blobs, prefix)
}

// SnapshotCapture is a task's state frozen on local disk by
// CaptureSnapshot, waiting to be uploaded: the synchronous part of a
// snapshot is the capture, and the upload can run on another goroutine
// while the task goes on (Flink's asynchronous snapshot phase). Exactly one
// of Upload and Discard must be called; both remove the local files.
type SnapshotCapture struct {
	m       SnapshotManifest // without files and sizes
	work    string           // local directory to remove when done
	files   []capturedFile
	digests *digestCache // for the files of a Pebble checkpoint
	what    string       // for errors: the scope and key groups
	done    atomic.Bool
}

type capturedFile struct {
	path string
	name string // Pebble only: its name in the checkpoint
	sha  string // when known from the capture (full snapshots)
	size int64
}

// CaptureSnapshot freezes the task's state on local disk: a Pebble
// checkpoint of the task's key span (a flush and hard links: quick), or the
// entries of Store.Snapshot written to a temporary file (as long as
// reading the state). It must be called from the task's goroutine, between
// writes; the capture is then independent of the Store.
func CaptureSnapshot(ctx context.Context, st Store) (*SnapshotCapture, error) {
	var (
		c   *SnapshotCapture
		err error
	)
	s, ok := st.(*store)
	switch {
	case ok && (s.closed || s.down.Load()):
		return nil, ErrClosed
	case ok:
		what := fmt.Sprintf("state of %s key groups %s", s.scope, s.groups)
		if pe, isPebble := s.eng.(*pebbleEngine); isPebble {
			c, err = pe.p.capture(s, pe)
		} else {
			c, err = captureFull(ctx, st, tempRoot(s))
		}
		if err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", what, err)
		}
		c.m.Groups, c.m.MaxParallelism, c.m.Scope, c.what = s.groups, int(s.maxP), s.scope, what
	default:
		if c, err = captureFull(ctx, st, os.TempDir()); err != nil {
			return nil, fmt.Errorf("snapshot state: %w", err)
		}
		c.m.Groups, c.what = Range{0, MaxKeyGroups}, "state"
	}
	return c, nil
}

// Upload uploads the captured files that blobs does not hold yet under
// prefix+"/shared/" and returns the manifest. It may be called from any
// goroutine, once.
func (c *SnapshotCapture) Upload(ctx context.Context, blobs storage.Store, prefix string) (SnapshotManifest, error) {
	if c.done.Swap(true) {
		return SnapshotManifest{}, fmt.Errorf("%w: snapshot capture already uploaded or discarded", ErrInvalid)
	}
	defer os.RemoveAll(c.work)
	m := c.m
	m.Files = make([]File, len(c.files))
	uploaded := make([]bool, len(c.files))
	err := forEach(ctx, len(c.files), func(ctx context.Context, i int) error {
		cf := c.files[i]
		sha, size := cf.sha, cf.size
		if sha == "" {
			var err error
			if sha, size, err = c.digests.digest(cf.name, cf.path); err != nil {
				return fmt.Errorf("hash %s: %w", cf.name, err)
			}
		}
		f := File{Key: sharedKey(sha), SHA256: sha, Size: size, Name: cf.name}
		up, err := putFile(ctx, blobs, prefix, f, cf.path)
		if err != nil {
			return fmt.Errorf("upload %s: %w", filepath.Base(cf.path), err)
		}
		m.Files[i], uploaded[i] = f, up
		return nil
	})
	if err != nil {
		return SnapshotManifest{}, fmt.Errorf("snapshot %s: %w", c.what, err)
	}
	for i, f := range m.Files {
		m.FullSize += f.Size
		if uploaded[i] {
			m.IncrementalSize += f.Size
		}
	}
	return m, nil
}

// Discard removes the captured files without uploading them.
func (c *SnapshotCapture) Discard() {
	if !c.done.Swap(true) {
		os.RemoveAll(c.work)
	}
}

// RestoreFrom adds to st the entries of the snapshots whose key groups
// fall in st's range (any number of manifests, of any kind and backend:
// rescaling, or a savepoint of another job). blobs and prefix are where the
// snapshots' files are, which may be a copy of where they were written.
//
// It first downloads every file it needs and checks its sha256, and only
// then changes st, so a missing file (an error matching
// storage.ErrNotFound) or a damaged one (matching both ErrCorrupt and
// storage.ErrCorrupt) leaves st as it was. An error after that point (a
// failing disk, a snapshot whose content is well-formed but invalid) may
// leave st partly restored; as with Store.Restore, the caller then closes
// the Store and opens it again, which empties the range.
func RestoreFrom(ctx context.Context, st Store, blobs storage.Store, prefix string, ms []SnapshotManifest) error {
	if err := restoreFrom(ctx, st, blobs, prefix, ms); err != nil {
		if s, ok := st.(*store); ok {
			return fmt.Errorf("restore state of %s key groups %s: %w", s.scope, s.groups, err)
		}
		return fmt.Errorf("restore state: %w", err)
	}
	return nil
}

func restoreFrom(ctx context.Context, st Store, blobs storage.Store, prefix string, ms []SnapshotManifest) error {
	s, known := st.(*store)
	if known && (s.closed || s.down.Load()) {
		return ErrClosed
	}
	var todo []SnapshotManifest
	for i, m := range ms {
		if err := m.validate(); err != nil {
			return fmt.Errorf("snapshot %d of %d: %w", i+1, len(ms), err)
		}
		if !known {
			todo = append(todo, m)
			continue
		}
		if m.MaxParallelism != 0 && m.MaxParallelism != int(s.maxP) {
			return fmt.Errorf("%w: snapshot %d of %d has %d key groups, the task %d: key groups cannot be remapped", ErrInvalid, i+1, len(ms), m.MaxParallelism, s.maxP)
		}
		if m.Groups.Start < s.groups.End && s.groups.Start < m.Groups.End {
			todo = append(todo, m)
		}
	}
	if len(todo) == 0 {
		return nil
	}
	work, err := os.MkdirTemp(tempRoot(s), "restore-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)

	local, err := fetchFiles(ctx, blobs, prefix, todo, work)
	if err != nil {
		return err
	}
	for i, m := range todo {
		if err := ctx.Err(); err != nil {
			return err
		}
		groups := m.Groups
		if known {
			groups = Range{max(groups.Start, s.groups.Start), min(groups.End, s.groups.End)}
		}
		switch m.Kind {
		case SnapshotFull:
			err = restoreFull(st, local[m.Files[0].SHA256], m.Files[0].Size)
		case SnapshotPebble:
			err = restorePebble(st, local, m, groups, filepath.Join(work, fmt.Sprintf("snapshot-%d", i)))
		}
		if err != nil {
			return fmt.Errorf("%s snapshot of %s key groups %s: %w", m.Kind, m.Scope, m.Groups, err)
		}
	}
	return nil
}

// tempRoot is the directory for the local files of a snapshot or restore
// of s (which may be nil: a Store of another package).
func tempRoot(s *store) string {
	if s != nil {
		switch e := s.eng.(type) {
		case *pebbleEngine:
			return e.p.tempRoot()
		case *memEngine:
			if e.m.tmp != "" {
				return e.m.tmp
			}
		}
	}
	return os.TempDir()
}

// validate checks what a restore relies on; a manifest comes from storage
// and is not trusted. Errors wrap ErrCorrupt.
func (m SnapshotManifest) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: snapshot manifest: "+format, append([]any{ErrCorrupt}, args...)...)
	}
	if !readableFormat(m.Format) {
		return bad("entry format %d; this version reads %d to %d", m.Format, MinFormatVersion, FormatVersion)
	}
	if m.Groups.Start < 0 || m.Groups.Start >= m.Groups.End || m.Groups.End > MaxKeyGroups {
		return bad("key groups %s", m.Groups)
	}
	if m.MaxParallelism < 0 || m.MaxParallelism > MaxKeyGroups || (m.MaxParallelism != 0 && m.Groups.End > m.MaxParallelism) {
		return bad("key groups %s of %d", m.Groups, m.MaxParallelism)
	}
	for i, f := range m.Files {
		if !isSHA256Hex(f.SHA256) || f.Size < 0 || storage.ValidateKey(f.Key) != nil {
			return bad("file %d: key %q, sha256 %q, size %d", i, f.Key, f.SHA256, f.Size)
		}
	}
	switch m.Kind {
	case SnapshotFull:
		if len(m.Files) != 1 {
			return bad("full snapshot with %d files", len(m.Files))
		}
	case SnapshotPebble:
		if err := m.Scope.Validate(); err != nil {
			return bad("%v", err)
		}
		names := make(map[string]bool, len(m.Files))
		for i, f := range m.Files {
			// The names become paths in a local directory: nothing that
			// could point outside it.
			if f.Name == "" || f.Name == "." || f.Name == ".." || f.Name == "LOCK" ||
				strings.ContainsAny(f.Name, `/\`+"\x00") || names[f.Name] {
				return bad("file %d: name %q", i, f.Name)
			}
			names[f.Name] = true
		}
	default:
		return bad("unknown kind %q", m.Kind)
	}
	return nil
}

func isSHA256Hex(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(s) {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// corruptFileError reports a downloaded file that does not match its
// manifest. It matches both ErrCorrupt and storage.ErrCorrupt: the first is
// what callers of this package test, the second what storage's own
// content-addressed reads report.
type corruptFileError struct{ msg string }

func (e *corruptFileError) Error() string { return e.msg }

func (e *corruptFileError) Is(target error) bool {
	return target == ErrCorrupt || target == storage.ErrCorrupt
}

// putFile uploads the local file at p as f under prefix unless an object of
// f's size is there already (its name is its content's hash), and reports
// whether it uploaded.
func putFile(ctx context.Context, blobs storage.Store, prefix string, f File, p string) (bool, error) {
	key := f.StorageKey(prefix)
	info, err := blobs.Stat(ctx, key)
	switch {
	case err == nil && info.Size == f.Size:
		return false, nil
	case err != nil && !errors.Is(err, storage.ErrNotFound):
		return false, err
	}
	r, err := os.Open(p)
	if err != nil {
		return false, err
	}
	defer r.Close()
	if err := blobs.Put(ctx, key, r, f.Size); err != nil {
		return false, err
	}
	return true, nil
}

// fetchFiles downloads each distinct file of ms into dir, checking sizes
// and hashes, and returns their local paths by sha256.
func fetchFiles(ctx context.Context, blobs storage.Store, prefix string, ms []SnapshotManifest, dir string) (map[string]string, error) {
	var files []File
	local := make(map[string]string)
	for _, m := range ms {
		for _, f := range m.Files {
			if _, ok := local[f.SHA256]; !ok {
				local[f.SHA256] = filepath.Join(dir, f.SHA256)
				files = append(files, f)
			}
		}
	}
	err := forEach(ctx, len(files), func(ctx context.Context, i int) error {
		return fetchFile(ctx, blobs, prefix, files[i], local[files[i].SHA256])
	})
	return local, err
}

func fetchFile(ctx context.Context, blobs storage.Store, prefix string, f File, dst string) error {
	key := f.StorageKey(prefix)
	rc, err := blobs.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("download state file: %w", err) // storage's errors name the key
	}
	defer rc.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	h := sha256.New()
	// One byte more than expected, to notice a longer object.
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(rc, f.Size+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("download state file %s: %w", key, err)
	}
	if sum := hex.EncodeToString(h.Sum(nil)); n != f.Size || sum != f.SHA256 {
		return &corruptFileError{fmt.Sprintf("state file %s is corrupt: %d bytes hashing to %s, want %d bytes hashing to %s", key, n, sum, f.Size, f.SHA256)}
	}
	return nil
}

// forEach calls fn for 0 ≤ i < n on up to transferWorkers goroutines and
// returns the first error; the others then see ctx cancelled.
func forEach(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next int
		errs error
	)
	for range min(n, transferWorkers) {
		wg.Go(func() {
			for {
				mu.Lock()
				i := next
				next++
				failed := errs != nil
				mu.Unlock()
				if i >= n || failed {
					return
				}
				if err := fn(ctx, i); err != nil {
					mu.Lock()
					if errs == nil {
						errs = err
						cancel(err)
					}
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return errs
}

// sharedKey is the relative key of a file with the given sha256.
func sharedKey(sha string) string { return path.Join(SharedDir, sha) }
