package state

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/bloom"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// PebbleConfig configures the Pebble backend.
type PebbleConfig struct {
	// Dir is the directory of the worker's database. It is owned by the
	// backend: opened fresh (wiped) at each start, since without a WAL a
	// database left by an earlier process is not a consistent state.
	Dir string
	// BlockCacheBytes is the size of the block cache shared by all tasks.
	BlockCacheBytes int64
	// MemTableBytes is the size of one memtable: writes are buffered there
	// before being flushed to a table file.
	MemTableBytes int64
	// Now is the clock of state TTL; nil means time.Now. Tests inject one.
	Now func() time.Time
	// Logger receives Pebble's own messages; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultPebbleConfig returns the configuration of a worker with data
// directory dir.
func DefaultPebbleConfig(dir string) PebbleConfig {
	return PebbleConfig{
		Dir:             dir,
		BlockCacheBytes: 256 << 20,
		MemTableBytes:   64 << 20,
	}
}

// Validate checks the configuration.
func (c PebbleConfig) Validate() error {
	if c.Dir == "" {
		return fmt.Errorf("%w: pebble: no directory", ErrInvalid)
	}
	if c.BlockCacheBytes < 0 {
		return fmt.Errorf("%w: pebble: block cache of %d bytes", ErrInvalid, c.BlockCacheBytes)
	}
	if c.MemTableBytes < 1<<20 || c.MemTableBytes >= 4<<30 {
		return fmt.Errorf("%w: pebble: memtable of %d bytes outside [1 MiB, 4 GiB)", ErrInvalid, c.MemTableBytes)
	}
	return nil
}

// ownerMarker is the file that says a directory holds eddy state, so that
// a misconfigured Dir pointing at someone's data is refused, not wiped.
const ownerMarker = "EDDY_STATE"

// Pebble is the default Backend: one Pebble database per worker process,
// shared by all tasks through their key prefixes, so that the block cache,
// memtables and compactions are shared too. Writes skip the WAL
// (checkpoints give durability).
type Pebble struct {
	db    *pebble.DB
	dir   string
	lock  *pebble.Lock
	now   func() time.Time
	tasks taskSet
	down  atomic.Bool
	// digests remembers the sha256 of the database's immutable files, so
	// that an incremental snapshot hashes only the files that are new.
	digests digestCache
}

var _ Backend = (*Pebble)(nil)

// OpenPebble opens the worker's database in cfg.Dir, removing what an
// earlier process left there.
func OpenPebble(cfg PebbleConfig) (*Pebble, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("state: open pebble: %w", err)
	}
	entries, err := os.ReadDir(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("state: open pebble: %w", err)
	}
	owned := len(entries) == 0
	for _, e := range entries {
		owned = owned || e.Name() == ownerMarker
	}
	if !owned {
		return nil, fmt.Errorf("state: open pebble in %s: %w (no %s file); use an empty directory", cfg.Dir, ErrDirNotOwned, ownerMarker)
	}
	// Lock before wiping, so that a second worker on the same directory
	// fails instead of destroying the first one's state.
	lock, err := pebble.LockDirectory(cfg.Dir, vfs.Default)
	if err != nil {
		return nil, fmt.Errorf("state: open pebble in %s: %w", cfg.Dir, err)
	}
	fail := func(err error) (*Pebble, error) {
		_ = lock.Close()
		return nil, fmt.Errorf("state: open pebble in %s: %w", cfg.Dir, err)
	}
	for _, e := range entries {
		if e.Name() == "LOCK" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(cfg.Dir, e.Name())); err != nil {
			return fail(err)
		}
	}
	if err := os.WriteFile(filepath.Join(cfg.Dir, ownerMarker), []byte("eddy keyed state; wiped when a worker starts\n"), 0o644); err != nil {
		return fail(err)
	}
	if err := os.Mkdir(filepath.Join(cfg.Dir, tempDirName), 0o755); err != nil {
		return fail(err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.Default()
	}
	cache := pebble.NewCache(cfg.BlockCacheBytes)
	defer cache.Unref() // the database holds its own reference
	opts := &pebble.Options{
		Cache:              cache,
		MemTableSize:       uint64(cfg.MemTableBytes),
		DisableWAL:         true,
		FormatMajorVersion: pebble.FormatNewest,
		// Lists are appended with Merge; concatenation is exactly the list
		// encoding (a sequence of frames).
		Merger: pebble.DefaultMerger,
		Lock:   lock,
		Logger: pebbleLogger{logger},
		// Every incremental snapshot uploads a copy of the MANIFEST, which
		// otherwise grows to 128 MB of edit history before it is rewritten.
		// With a small limit Pebble rewrites it once the edits outnumber the
		// live files, so it stays within about twice a listing of them.
		MaxManifestFileSize: 256 << 10,
	}
	// Bloom filters on every level: state access is mostly point reads of
	// keys that are often in no table at all (a first touch of a key).
	opts.Levels[0].FilterPolicy = bloom.FilterPolicy(10)
	db, err := pebble.Open(cfg.Dir, opts)
	if err != nil {
		return fail(err)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Pebble{db: db, dir: cfg.Dir, lock: lock, now: now}, nil
}

// OpenTask implements Backend.
func (p *Pebble) OpenTask(scope Scope, maxParallelism int, groups Range) (Store, error) {
	s, err := openStore(&pebbleEngine{p: p, db: p.db}, &p.tasks, &p.down, p.now, scope, maxParallelism, groups)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (e *pebbleEngine) size(lo, hi []byte) (int64, error) {
	n, err := e.db.EstimateDiskUsage(lo, hi)
	if err != nil {
		return 0, fmt.Errorf("state: estimate size: %w", err)
	}
	return int64(n), nil
}

// Close implements Backend.
func (p *Pebble) Close() error {
	if p.down.Swap(true) {
		return nil
	}
	err := p.db.Close()
	if lerr := p.lock.Close(); err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("state: close pebble: %w", err)
	}
	return nil
}

// pebbleLogger routes Pebble's messages to slog.
type pebbleLogger struct{ l *slog.Logger }

func (p pebbleLogger) Infof(format string, args ...any) {
	p.l.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Errorf(format string, args ...any) {
	p.l.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

func (p pebbleLogger) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	p.l.Error(msg, "component", "pebble", "fatal", true)
	panic("state: pebble: " + msg) // Pebble requires Fatalf not to return
}

// pebbleEngine is one Store's view of the shared database.
type pebbleEngine struct {
	p  *Pebble // for snapshots, which work on the database as a whole
	db *pebble.DB
}

// writeOpts: the WAL is disabled on the database, so there is nothing to
// sync.
var writeOpts = pebble.NoSync

func (e *pebbleEngine) get(key, dst []byte) ([]byte, bool, error) {
	v, closer, err := e.db.Get(key)
	if err != nil {
		if errors.Is(err, pebble.ErrNotFound) {
			return dst, false, nil
		}
		return dst, false, err
	}
	dst = append(dst, v...)
	return dst, true, closer.Close()
}

func (e *pebbleEngine) set(key, val []byte) error   { return e.db.Set(key, val, writeOpts) }
func (e *pebbleEngine) merge(key, val []byte) error { return e.db.Merge(key, val, writeOpts) }
func (e *pebbleEngine) del(key []byte) error        { return e.db.Delete(key, writeOpts) }
func (e *pebbleEngine) delRange(lo, hi []byte) error {
	return e.db.DeleteRange(lo, hi, writeOpts)
}

func (e *pebbleEngine) first(lo, hi, dst []byte) ([]byte, bool, error) {
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return dst, false, err
	}
	ok := it.First()
	if ok {
		dst = append(dst, it.Key()...)
	}
	return dst, ok, it.Close()
}

// scan iterates a point-in-time view (a Pebble iterator pins one), so
// writes made by fn are not seen.
func (e *pebbleEngine) scan(lo, hi []byte, fn func(k, v []byte) error) error {
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return err
	}
	for valid := it.First(); valid; valid = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			_ = it.Close()
			return err
		}
		if err := fn(it.Key(), v); err != nil {
			_ = it.Close()
			return err
		}
	}
	return it.Close()
}

func (e *pebbleEngine) iter(lo, hi []byte) (engineIter, error) {
	it, err := e.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: hi})
	if err != nil {
		return nil, err
	}
	return &pebbleIter{it: it}, nil
}

type pebbleIter struct {
	it      *pebble.Iterator
	started bool
}

func (i *pebbleIter) next(dst []byte) ([]byte, bool, error) {
	var ok bool
	if i.started {
		ok = i.it.Next()
	} else {
		ok, i.started = i.it.First(), true
	}
	if !ok {
		return dst, false, i.it.Error()
	}
	return append(dst, i.it.Key()...), true, nil
}

func (i *pebbleIter) close() error { return i.it.Close() }

func (e *pebbleEngine) newBatch() batch { return &pebbleBatch{db: e.db, b: e.db.NewBatch()} }
func (e *pebbleEngine) close()          {}

type pebbleBatch struct {
	db *pebble.DB
	b  *pebble.Batch
}

func (b *pebbleBatch) set(key, val []byte) error { return b.b.Set(key, val, nil) }
func (b *pebbleBatch) size() int                 { return b.b.Len() }

func (b *pebbleBatch) commit() error {
	if b.b.Empty() {
		return nil
	}
	err := b.b.Commit(writeOpts)
	_ = b.b.Close()
	b.b = b.db.NewBatch()
	return err
}

func (b *pebbleBatch) close() { _ = b.b.Close() }
