package state

import (
	"bytes"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/google/btree"
)

// MemoryConfig configures the memory backend.
type MemoryConfig struct {
	// Now is the clock of state TTL; nil means time.Now.
	Now func() time.Time
	// TempDir is where snapshots are written before they are uploaded, and
	// downloaded before they are restored: as much disk as the state. Empty
	// means os.TempDir(), which may be a small RAM disk; a worker points it
	// at its data directory.
	TempDir string
}

// DefaultMemoryConfig returns the default configuration.
func DefaultMemoryConfig() MemoryConfig { return MemoryConfig{} }

// Validate checks the configuration; every MemoryConfig is valid today.
func (c MemoryConfig) Validate() error { return nil }

// Memory is the in-memory Backend, for small, latency-critical state: one
// B-tree per worker in the same keyspace as Pebble, so it behaves (and
// snapshots) identically, plus a hash index over the same entries so that a
// per-record get or update of an existing key costs a hash lookup instead
// of a dozen cache misses down the tree. State is lost with the process,
// like Pebble's.
type Memory struct {
	mu    sync.RWMutex
	tree  *btree.BTreeG[*memEntry] // order, for scans
	index map[string]*memEntry     // the same entries, for point access
	now   func() time.Time
	tmp   string // MemoryConfig.TempDir
	tasks taskSet
	down  atomic.Bool
}

var _ Backend = (*Memory)(nil)

type memEntry struct {
	k, v []byte // k is never modified once stored: the index shares it
}

// indexKey is the index's view of e.k, sharing its bytes.
func (e *memEntry) indexKey() string { return unsafe.String(unsafe.SliceData(e.k), len(e.k)) }

func memLess(a, b *memEntry) bool { return bytes.Compare(a.k, b.k) < 0 }

// NewMemory returns an empty memory backend.
func NewMemory(cfg MemoryConfig) (*Memory, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	// Degree 16: nodes of up to 31 entries keep a lookup within a few
	// cache lines per level.
	return &Memory{tree: btree.NewG(16, memLess), index: make(map[string]*memEntry), now: now, tmp: cfg.TempDir}, nil
}

// OpenTask implements Backend.
func (m *Memory) OpenTask(scope Scope, maxParallelism int, groups Range) (Store, error) {
	s, err := openStore(&memEngine{m: m}, &m.tasks, &m.down, m.now, scope, maxParallelism, groups)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Close implements Backend: it drops all state.
func (m *Memory) Close() error {
	if m.down.Swap(true) {
		return nil
	}
	m.mu.Lock()
	m.tree.Clear(false)
	m.index = make(map[string]*memEntry)
	m.mu.Unlock()
	return nil
}

// memEngine is one Store's view of the shared tree. Stored values are
// only read under the lock and copied out, so a writer may reuse a value's
// memory in place.
type memEngine struct {
	m     *Memory
	probe memEntry // search key; owned by this engine's (single) goroutine
	free  []*memChunk
}

// memChunk holds entries copied out of the tree, so that scan can run fn
// without holding the lock (fn may write).
type memChunk struct {
	data []byte
	ents []memSpan
	last []byte
}

type memSpan struct{ k, v, end int }

// Scans copy this many entries (or bytes) per lock acquisition.
const (
	memChunkEntries = 256
	memChunkBytes   = 256 << 10
)

func (e *memEngine) find(key []byte) (*memEntry, bool) {
	it, ok := e.m.index[string(key)]
	return it, ok
}

// insert adds a new entry, or replaces the one with the same key. Called
// with the write lock held.
func (m *Memory) insert(it *memEntry) {
	if old, ok := m.tree.ReplaceOrInsert(it); ok {
		delete(m.index, old.indexKey())
	}
	m.index[it.indexKey()] = it
}

func (m *Memory) remove(it *memEntry) {
	m.tree.Delete(it)
	delete(m.index, it.indexKey())
}

func (e *memEngine) get(key, dst []byte) ([]byte, bool, error) {
	e.m.mu.RLock()
	defer e.m.mu.RUnlock()
	it, ok := e.find(key)
	if !ok {
		return dst, false, nil
	}
	return append(dst, it.v...), true, nil
}

func (e *memEngine) set(key, val []byte) error {
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	if it, ok := e.find(key); ok {
		if cap(it.v) >= len(val) && cap(it.v) <= 2*len(val)+64 {
			it.v = append(it.v[:0], val...)
		} else {
			it.v = bytes.Clone(val)
		}
		return nil
	}
	e.m.insert(&memEntry{k: bytes.Clone(key), v: append(make([]byte, 0, len(val)), val...)})
	return nil
}

func (e *memEngine) merge(key, val []byte) error {
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	if it, ok := e.find(key); ok {
		it.v = append(it.v, val...)
		return nil
	}
	e.m.insert(&memEntry{k: bytes.Clone(key), v: append(make([]byte, 0, len(val)), val...)})
	return nil
}

func (e *memEngine) del(key []byte) error {
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	if it, ok := e.find(key); ok {
		e.m.remove(it)
	}
	return nil
}

func (e *memEngine) delRange(lo, hi []byte) error {
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	var doomed []*memEntry
	e.probe.k = lo
	e.m.tree.AscendGreaterOrEqual(&e.probe, func(it *memEntry) bool {
		if hi != nil && bytes.Compare(it.k, hi) >= 0 {
			return false
		}
		doomed = append(doomed, it)
		return true
	})
	e.probe.k = nil
	for _, it := range doomed {
		e.m.remove(it)
	}
	return nil
}

func (e *memEngine) first(lo, hi, dst []byte) ([]byte, bool, error) {
	e.m.mu.RLock()
	defer e.m.mu.RUnlock()
	found := false
	e.probe.k = lo
	e.m.tree.AscendGreaterOrEqual(&e.probe, func(it *memEntry) bool {
		if hi == nil || bytes.Compare(it.k, hi) < 0 {
			dst = append(dst, it.k...)
			found = true
		}
		return false
	})
	e.probe.k = nil
	return dst, found, nil
}

// scan copies entries out chunk by chunk and calls fn without the lock.
// A span that fits in one chunk is therefore seen at one point in time,
// like a Pebble iterator; a longer one may see fn's own writes further on,
// which Store's contract leaves unspecified.
func (e *memEngine) scan(lo, hi []byte, fn func(k, v []byte) error) error {
	c := e.chunk()
	defer e.release(c)
	c.last = append(c.last[:0], lo...)
	inclusive := true
	for {
		c.data, c.ents = c.data[:0], c.ents[:0]
		more := false
		e.m.mu.RLock()
		e.probe.k = c.last
		e.m.tree.AscendGreaterOrEqual(&e.probe, func(it *memEntry) bool {
			if hi != nil && bytes.Compare(it.k, hi) >= 0 {
				return false
			}
			if !inclusive && bytes.Equal(it.k, c.last) {
				return true
			}
			if len(c.ents) == memChunkEntries || len(c.data) >= memChunkBytes {
				more = true
				return false
			}
			k := len(c.data)
			c.data = append(c.data, it.k...)
			v := len(c.data)
			c.data = append(c.data, it.v...)
			c.ents = append(c.ents, memSpan{k: k, v: v, end: len(c.data)})
			return true
		})
		e.probe.k = nil
		e.m.mu.RUnlock()
		for _, s := range c.ents {
			if err := fn(c.data[s.k:s.v:s.v], c.data[s.v:s.end:s.end]); err != nil {
				return err
			}
		}
		if !more {
			return nil
		}
		s := c.ents[len(c.ents)-1]
		c.last = append(c.last[:0], c.data[s.k:s.v]...)
		inclusive = false
	}
}

// iter steps with one lookup per key: the caller's view need not be a
// snapshot (see engine.iter), and holding the lock between steps is not an
// option.
func (e *memEngine) iter(lo, hi []byte) (engineIter, error) {
	return &memIter{e: e, lo: lo, hi: hi}, nil
}

type memIter struct {
	e       *memEngine
	lo, hi  []byte
	from    []byte
	started bool
}

func (i *memIter) next(dst []byte) ([]byte, bool, error) {
	from := i.lo
	if i.started {
		from = i.from
	}
	n := len(dst)
	dst, ok, err := i.e.first(from, i.hi, dst)
	if ok {
		i.started = true
		i.from = append(append(i.from[:0], dst[n:]...), 0)
	}
	return dst, ok, err
}

func (i *memIter) close() error { return nil }

func (e *memEngine) chunk() *memChunk {
	if n := len(e.free); n > 0 {
		c := e.free[n-1]
		e.free = e.free[:n-1]
		return c
	}
	return &memChunk{}
}

func (e *memEngine) release(c *memChunk) {
	if cap(c.data) > 4*memChunkBytes {
		c.data = nil // a single huge value grew it; do not keep it
	}
	e.free = append(e.free, c)
}

func (e *memEngine) newBatch() batch { return &memBatch{e: e} }

func (e *memEngine) size(lo, hi []byte) (int64, error) {
	var n int64
	e.m.mu.RLock()
	defer e.m.mu.RUnlock()
	e.probe.k = lo
	e.m.tree.AscendGreaterOrEqual(&e.probe, func(it *memEntry) bool {
		if bytes.Compare(it.k, hi) >= 0 {
			return false
		}
		n += int64(len(it.k) + len(it.v))
		return true
	})
	return n, nil
}
func (e *memEngine) close() {}

// memBatch applies a restore's writes under one lock acquisition per
// commit.
type memBatch struct {
	e    *memEngine
	data []byte
	ents []memSpan
}

func (b *memBatch) set(key, val []byte) error {
	k := len(b.data)
	b.data = append(b.data, key...)
	v := len(b.data)
	b.data = append(b.data, val...)
	b.ents = append(b.ents, memSpan{k: k, v: v, end: len(b.data)})
	return nil
}

func (b *memBatch) size() int { return len(b.data) }

func (b *memBatch) commit() error {
	m := b.e.m
	m.mu.Lock()
	for _, s := range b.ents {
		// Fresh slices: the batch buffer is reused.
		m.insert(&memEntry{k: bytes.Clone(b.data[s.k:s.v]), v: bytes.Clone(b.data[s.v:s.end])})
	}
	m.mu.Unlock()
	b.data, b.ents = b.data[:0], b.ents[:0]
	return nil
}

func (b *memBatch) close() {}
