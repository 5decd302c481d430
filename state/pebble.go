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
	// ValueCacheBytes is the size of each task's write-back cache of value
	// state (see valueCache); 0 disables it.
	ValueCacheBytes int64
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
		ValueCacheBytes: 16 << 20,
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
	if c.ValueCacheBytes < 0 {
		return fmt.Errorf("%w: pebble: value cache of %d bytes", ErrInvalid, c.ValueCacheBytes)
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
	cache int64 // PebbleConfig.ValueCacheBytes
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
	return &Pebble{db: db, dir: cfg.Dir, lock: lock, now: now, cache: cfg.ValueCacheBytes}, nil
}

// OpenTask implements Backend.
func (p *Pebble) OpenTask(scope Scope, maxParallelism int, groups Range) (Store, error) {
	eng := &pebbleEngine{p: p, db: p.db}
	if p.cache > 0 {
		eng.cache = newValueCache(p.cache, appendScope(nil, scope))
	}
	s, err := openStore(eng, &p.tasks, &p.down, p.now, scope, maxParallelism, groups)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func (e *pebbleEngine) size(lo, hi []byte) (int64, error) {
	if err := e.flushFor(lo, hi); err != nil {
		return 0, fmt.Errorf("state: estimate size: %w", err)
	}
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
	p     *Pebble // for snapshots, which work on the database as a whole
	db    *pebble.DB
	cache *valueCache // nil when disabled
}

// writeOpts: the WAL is disabled on the database, so there is nothing to
// sync.
var writeOpts = pebble.NoSync

func (e *pebbleEngine) get(key, dst []byte) ([]byte, bool, error) {
	c := e.cache
	if c == nil || !c.cacheable(key) {
		return e.dbGet(key, dst)
	}
	if en := c.lookup(key); en != nil {
		c.last = en
		if en.absent {
			return dst, false, nil
		}
		return append(dst, en.val...), true, nil
	}
	n := len(dst)
	out, ok, err := e.dbGet(key, dst)
	if err != nil {
		return dst, false, err
	}
	c.put(key, out[n:], !ok, false)
	return out, ok, e.fit()
}

func (e *pebbleEngine) dbGet(key, dst []byte) ([]byte, bool, error) {
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

// fit shrinks the cache when it is over budget.
func (e *pebbleEngine) fit() error {
	if e.cache.bytes <= e.cache.budget {
		return nil
	}
	return e.cache.shrink(e.db)
}

// flushFor writes the cache's dirty entries when [lo, hi) may hold value
// keys, so that a range read or write of the database sees them.
func (e *pebbleEngine) flushFor(lo, hi []byte) error {
	if e.cache == nil || e.cache.spansNoValues(lo, hi) {
		return nil
	}
	return e.cache.flush(e.db)
}

func (e *pebbleEngine) set(key, val []byte) error {
	if c := e.cache; c != nil && c.cacheable(key) {
		c.put(key, val, false, true)
		return e.fit()
	}
	return e.db.Set(key, val, writeOpts)
}

func (e *pebbleEngine) merge(key, val []byte) error {
	if c := e.cache; c != nil && c.cacheable(key) {
		// Values are never merged; stay correct if one were.
		if err := c.forget(e.db, key); err != nil {
			return err
		}
	}
	return e.db.Merge(key, val, writeOpts)
}

func (e *pebbleEngine) del(key []byte) error {
	if c := e.cache; c != nil && c.cacheable(key) {
		c.put(key, nil, true, true)
		return e.fit()
	}
	return e.db.Delete(key, writeOpts)
}

func (e *pebbleEngine) delRange(lo, hi []byte) error {
	if e.cache != nil && !e.cache.spansNoValues(lo, hi) {
		if err := e.cache.flush(e.db); err != nil {
			return err
		}
		e.cache.drop()
	}
	return e.db.DeleteRange(lo, hi, writeOpts)
}

func (e *pebbleEngine) first(lo, hi, dst []byte) ([]byte, bool, error) {
	if err := e.flushFor(lo, hi); err != nil {
		return dst, false, err
	}
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
	if err := e.flushFor(lo, hi); err != nil {
		return err
	}
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
	if err := e.flushFor(lo, hi); err != nil {
		return nil, err
	}
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

// newBatch starts a restore, whose entries go to the database directly:
// the cache is written and emptied first, and again at each commit, so that
// no cached version hides a restored one.
func (e *pebbleEngine) newBatch() batch {
	return &pebbleBatch{db: e.db, b: e.db.NewBatch(), cache: e.cache, err: e.flushCache()}
}

// flushCache writes the dirty entries and empties the cache.
func (e *pebbleEngine) flushCache() error {
	if e.cache == nil {
		return nil
	}
	if err := e.cache.flush(e.db); err != nil {
		return err
	}
	e.cache.drop()
	return nil
}

// close drops the cache unwritten: the range is emptied when a task opens
// it again, so nothing reads what it held.
func (e *pebbleEngine) close() {
	if e.cache != nil {
		e.cache.drop()
	}
}

type pebbleBatch struct {
	db    *pebble.DB
	b     *pebble.Batch
	cache *valueCache
	err   error // of writing the cache when the batch was made
}

func (b *pebbleBatch) set(key, val []byte) error {
	if b.err != nil {
		return b.err
	}
	return b.b.Set(key, val, nil)
}
func (b *pebbleBatch) size() int { return b.b.Len() }

func (b *pebbleBatch) commit() error {
	if b.err != nil {
		return b.err
	}
	if b.cache != nil {
		if err := b.cache.flush(b.db); err != nil {
			return err
		}
		b.cache.drop()
	}
	if b.b.Empty() {
		return nil
	}
	err := b.b.Commit(writeOpts)
	_ = b.b.Close()
	b.b = b.db.NewBatch()
	return err
}

func (b *pebbleBatch) close() { _ = b.b.Close() }
