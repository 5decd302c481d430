package state

import (
	"bytes"
	"fmt"

	"github.com/cockroachdb/pebble/v2"
)

// valueCache is the write-back cache of one task's value state on Pebble:
// a Go map from encoded key to stored value (header included), in front
// of the shared database.
//
// Why: a value update is a read and a write of the same key, and on Pebble
// both walk the memtable's skiplist, whose long keys (the scope prefix) and
// cache misses were two thirds of the CPU of BenchmarkValueUpdate. A hit
// here is a map lookup, and a key updated many times between flushes costs
// one memtable insert instead of one per update.
//
// Semantics: the cache is the newest version of the keys it holds, so
// reads of the task see its own writes at once (read-your-writes). Dirty
// entries reach Pebble in one batch when the cache is over budget, before
// any range operation that may cover value keys (Snapshot, CleanupExpired,
// Restore, Size, capture of a checkpoint, a range deletion), and nowhere
// else. Nothing is lost that is not already lost: the database has no WAL
// and is wiped at start, so only a checkpoint makes state durable, and a
// checkpoint flushes the cache first.
//
// Only value entries are cached (the kind byte after the key group says
// which), so the range operations of maps and timers, whose spans hold no
// value keys, need no flush.
type valueCache struct {
	budget    int64  // bytes of entries beyond which the cache is flushed and shrunk
	prefix    []byte // the task's scope prefix, left out of the map's keys
	kindAt    int    // offset of the kind byte in a key: len(prefix)+2
	scratch   []byte // a full key being written
	entries   map[string]*cacheEntry
	last      *cacheEntry // the entry of the latest get or put: an update's put finds it without a lookup
	dirty     []*cacheEntry
	bytes     int64
	evictions int // for tests
	flushes   int // batches written, for tests
}

// cacheEntry is one key's newest version. absent means there is no value
// (a deletion not yet written, or a read that found nothing).
type cacheEntry struct {
	key     string // without the scope prefix, which all keys share: shorter to hash and compare
	val     []byte
	absent  bool
	isDirty bool
}

// entryOverhead approximates the bytes of map and entry bookkeeping per
// key, so that the budget bounds memory, not just payload.
const entryOverhead = 96

func newValueCache(budget int64, prefix []byte) *valueCache {
	return &valueCache{budget: budget, prefix: prefix, kindAt: len(prefix) + 2, entries: make(map[string]*cacheEntry)}
}

// lookup returns the entry of key (a cacheable one), or nil.
func (c *valueCache) lookup(key []byte) *cacheEntry {
	return c.entries[string(key[len(c.prefix):])]
}

// cacheable reports whether key is a value entry.
func (c *valueCache) cacheable(key []byte) bool {
	return len(key) > c.kindAt && Kind(key[c.kindAt]) == KindValue
}

// spansNoValues reports whether [lo, hi) provably holds no value entry: both
// bounds lie in one (scope, key group, kind) span of another kind.
func (c *valueCache) spansNoValues(lo, hi []byte) bool {
	n := c.kindAt + 1
	return len(lo) >= n && len(hi) >= n && bytes.Equal(lo[:n], hi[:n]) && Kind(lo[c.kindAt]) != KindValue
}

// put records the newest version of key, marking it dirty when it is not
// yet in the database.
func (c *valueCache) put(key, val []byte, absent, dirty bool) {
	rel := key[len(c.prefix):]
	e := c.last
	if e == nil || e.key != string(rel) {
		e = c.entries[string(rel)]
	}
	if e == nil {
		e = &cacheEntry{key: string(rel)}
		c.entries[e.key] = e
		c.bytes += int64(len(rel)) + entryOverhead
	}
	c.bytes += int64(len(val) - len(e.val))
	e.val = append(e.val[:0], val...)
	e.absent = absent
	c.last = e
	if dirty && !e.isDirty {
		e.isDirty = true
		c.dirty = append(c.dirty, e)
	}
}

// flush writes the dirty entries to db in one batch.
func (c *valueCache) flush(db *pebble.DB) error {
	if len(c.dirty) == 0 {
		return nil
	}
	b := db.NewBatch()
	defer b.Close()
	for _, e := range c.dirty {
		c.scratch = append(append(c.scratch[:0], c.prefix...), e.key...)
		var err error
		if e.absent {
			err = b.Delete(c.scratch, nil)
		} else {
			err = b.Set(c.scratch, e.val, nil)
		}
		if err != nil {
			return fmt.Errorf("write cached values: %w", err)
		}
	}
	if err := b.Commit(writeOpts); err != nil {
		return fmt.Errorf("write cached values: %w", err)
	}
	for i, e := range c.dirty {
		e.isDirty = false
		c.dirty[i] = nil
	}
	c.dirty = c.dirty[:0]
	c.flushes++
	return nil
}

// shrink flushes and then drops entries, in the map's (random) order, until
// the cache is at three quarters of its budget: random replacement keeps
// hot keys likely to stay (they come back at once) at no per-hit cost.
func (c *valueCache) shrink(db *pebble.DB) error {
	if err := c.flush(db); err != nil {
		return err
	}
	target := c.budget / 4 * 3
	c.last = nil
	for k, e := range c.entries {
		if c.bytes <= target {
			break
		}
		delete(c.entries, k)
		c.bytes -= int64(len(e.key)+len(e.val)) + entryOverhead
		c.evictions++
	}
	return nil
}

// drop forgets every entry, dirty ones included: callers flush first
// unless the entries are meant to be discarded.
func (c *valueCache) drop() {
	c.last = nil
	clear(c.entries)
	clear(c.dirty)
	c.dirty = c.dirty[:0]
	c.bytes = 0
}

// forget removes key from the cache, writing it first if dirty.
func (c *valueCache) forget(db *pebble.DB, key []byte) error {
	e := c.lookup(key)
	if e == nil {
		return nil
	}
	if e.isDirty {
		if err := c.flush(db); err != nil {
			return err
		}
	}
	delete(c.entries, e.key)
	c.bytes -= int64(len(e.key)+len(e.val)) + entryOverhead
	c.last = nil
	return nil
}
