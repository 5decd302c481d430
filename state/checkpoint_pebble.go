package state

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// tempDirName is the directory, inside the database's, of checkpoints being
// uploaded and snapshots being restored: on the same file system, so that
// Pebble hard-links table files into a checkpoint instead of copying them,
// and wiped with the rest when a worker starts. Pebble ignores it (it is not
// one of its file names).
const tempDirName = "eddy-tmp"

func (p *Pebble) tempRoot() string { return filepath.Join(p.dir, tempDirName) }

// capture takes a Pebble checkpoint of s's key span, for an incremental
// snapshot: its files are uploaded content-addressed, and the table files
// are the same from one checkpoint to the next unless compacted.
//
// The database runs without a WAL, so what is only in the memtable would
// not be in a checkpoint: the memtable is flushed first. That flushes the
// other tasks' writes too, as RocksDB does for Flink; their later writes
// land in a new memtable and are not part of this checkpoint, and this
// task makes no writes meanwhile (it is the caller).
//
// The checkpoint holds every table file that overlaps the span, so keys of
// other tasks and older versions come along; a restore opens the
// checkpoint as a database and reads only the span, through Pebble, which
// resolves versions, merges and deletions.
func (p *Pebble) capture(s *store, e *pebbleEngine) (*SnapshotCapture, error) {
	if e.cache != nil {
		if err := e.cache.flush(p.db); err != nil {
			return nil, err
		}
	}
	if err := p.db.Flush(); err != nil {
		return nil, fmt.Errorf("flush: %w", err)
	}
	work, err := os.MkdirTemp(p.tempRoot(), "checkpoint-")
	if err != nil {
		return nil, err
	}
	c := &SnapshotCapture{
		m:       SnapshotManifest{Format: FormatVersion, Kind: SnapshotPebble},
		work:    work,
		digests: &p.digests,
	}
	dir := filepath.Join(work, "db") // Checkpoint creates it
	lo, hi := s.rangeSpan()
	if err := p.db.Checkpoint(dir, pebble.WithRestrictToSpans([]pebble.CheckpointSpan{{Start: lo, End: hi}})); err != nil {
		c.Discard()
		return nil, fmt.Errorf("pebble checkpoint: %w", err)
	}
	ents, err := os.ReadDir(dir) // sorted by name
	if err != nil {
		c.Discard()
		return nil, err
	}
	for _, e := range ents {
		c.files = append(c.files, capturedFile{path: filepath.Join(dir, e.Name()), name: e.Name()})
	}
	p.digests.prune(p.dir)
	return c, nil
}

// digestCache maps the database's immutable files (tables and blob files,
// by name: a file number is never reused within one database) to their
// sha256, so that each is hashed once, however many checkpoints include it.
// MANIFEST and OPTIONS copies differ between checkpoints and are hashed
// each time; they are small.
type digestCache struct {
	mu      sync.Mutex
	files   map[string]fileDigest
	pruneAt int
	hashed  atomic.Int64 // bytes hashed, for tests
}

type fileDigest struct {
	sha  string
	size int64
}

func immutableFile(name string) bool {
	return strings.HasSuffix(name, ".sst") || strings.HasSuffix(name, ".blob")
}

// digest returns the sha256 and size of the file at p, whose name in the
// database directory is name.
func (c *digestCache) digest(name, p string) (string, int64, error) {
	fi, err := os.Stat(p)
	if err != nil {
		return "", 0, err
	}
	cacheable := immutableFile(name)
	if cacheable {
		c.mu.Lock()
		d, ok := c.files[name]
		c.mu.Unlock()
		if ok && d.size == fi.Size() {
			return d.sha, d.size, nil
		}
	}
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return "", 0, err
	}
	c.hashed.Add(n)
	sha := hex.EncodeToString(h.Sum(nil))
	if cacheable {
		c.mu.Lock()
		if c.files == nil {
			c.files = make(map[string]fileDigest)
		}
		c.files[name] = fileDigest{sha: sha, size: n}
		c.mu.Unlock()
	}
	return sha, n, nil
}

// prune forgets files that are no longer in the database directory dir,
// once the cache has doubled since the last time.
func (c *digestCache) prune(dir string) {
	c.mu.Lock()
	n := len(c.files)
	due := n > c.pruneAt
	c.mu.Unlock()
	if !due {
		return
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return // try again next time
	}
	live := make(map[string]bool, len(ents))
	for _, e := range ents {
		live[e.Name()] = true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.files {
		if !live[name] {
			delete(c.files, name)
		}
	}
	c.pruneAt = 2*len(c.files) + 256
}

// restorePebble feeds to st the entries of m's scope in groups, read from
// the checkpoint rebuilt in dir from the downloaded files (local, by
// sha256) and opened read-only.
func restorePebble(st Store, local map[string]string, m SnapshotManifest, groups Range, dir string) (err error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	for _, f := range m.Files {
		if err := linkOrCopy(local[f.SHA256], filepath.Join(dir, f.Name)); err != nil {
			return err
		}
	}
	// The files passed their sha256 check, so Pebble reads exactly what it
	// wrote; this guards the process against a manifest that is
	// well-formed but lies (Pebble panics on some invariant violations).
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: reading the pebble checkpoint: %v", ErrCorrupt, r)
		}
	}()
	cache := pebble.NewCache(8 << 20)
	defer cache.Unref()
	db, err := pebble.Open(dir, &pebble.Options{
		ReadOnly: true,
		Cache:    cache,
		Merger:   pebble.DefaultMerger,
		Logger:   pebbleLogger{slog.Default()},
	})
	if err != nil {
		return fmt.Errorf("%w: open the pebble checkpoint: %w", ErrCorrupt, err)
	}
	defer db.Close()
	scope := appendScope(nil, m.Scope)
	lo := appendGroup(append([]byte(nil), scope...), groups.Start)
	hi := appendGroup(append([]byte(nil), scope...), groups.End)
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return fmt.Errorf("%w: read the pebble checkpoint: %w", ErrCorrupt, err)
	}
	var readErr error
	err = st.Restore(func(yield func([]byte, []byte) bool) {
		for valid := it.First(); valid; valid = it.Next() {
			v, err := it.ValueAndErr()
			if err != nil {
				readErr = err
				return
			}
			if !yield(it.Key()[len(scope):], v) {
				return
			}
		}
		readErr = it.Error()
	})
	if cerr := it.Close(); readErr == nil {
		readErr = cerr
	}
	if err != nil {
		return err
	}
	if readErr != nil {
		return fmt.Errorf("%w: read the pebble checkpoint: %w", ErrCorrupt, readErr)
	}
	return nil
}

// linkOrCopy makes dst the same file as src: a hard link, or a copy where
// links are not possible.
func linkOrCopy(src, dst string) error {
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
