package state

import (
	"errors"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Backend is the state storage of one worker process, shared by all its
// tasks. It is an interface for decoupling (Pebble or memory), not for
// implementations outside this package. Its methods are safe for
// concurrent use.
type Backend interface {
	// OpenTask returns the Store of one task: the operator named by scope,
	// with maxParallelism key groups, of which the task owns groups. The
	// range starts empty: whatever an earlier attempt of the task left in
	// it is removed, because without a WAL only a checkpoint (Restore) is a
	// consistent starting point. It fails with ErrRangeInUse while another
	// open Store of the same scope overlaps groups.
	OpenTask(scope Scope, maxParallelism int, groups Range) (Store, error)
	// Close releases the backend. Stores still open fail with ErrClosed
	// afterwards; the caller must not have calls in flight on them.
	Close() error
}

// Store is the keyed state and the timers of one task. It is not safe for
// concurrent use: a task calls it from its own goroutine (the database
// underneath is shared and safe).
//
// Every method takes the record key: its key group must be in the task's
// range (ErrNotOwned otherwise). ns is the namespace, such as an encoded
// window; nil when unused. name is the state name declared by the
// operator; a value, a list and a map may share a name without colliding.
//
// A ttl of zero or less means no expiry. TTL is measured on the backend's
// clock and renewed by each write (Flink's OnCreateAndWrite); an expired
// entry reads as absent (NeverReturnExpired) and is removed lazily when
// read, by CleanupExpired, or dropped by Snapshot.
//
// Callbacks (fn) may call the Store, including writes to the state being
// iterated; whether such a write is seen by the iteration in progress is
// unspecified. Slices handed to fn are valid only during that call.
// An error returned by fn stops the iteration and is returned, wrapped.
type Store interface {
	// ValueGet appends the value to dst and reports whether there is one.
	// It does not allocate when dst has room.
	ValueGet(name string, key, ns, dst []byte) ([]byte, bool, error)
	ValuePut(name string, key, ns, val []byte, ttl time.Duration) error
	ValueDelete(name string, key, ns []byte) error
	// ValuePutSchema is ValuePut of a value encoded in the operator's
	// schema version schema (ValuePut writes schema 0). The version is kept
	// beside the value, not in its bytes: ValueGet returns the bytes alone,
	// ValueGetSchema both, so a new version of an operator can tell how an
	// older one encoded what it wrote (abi/ABI.md, "Version 4").
	ValuePutSchema(name string, key, ns, val []byte, ttl time.Duration, schema uint32) error
	// ValueGetSchema is ValueGet that also returns the schema version the
	// value was written with: 0 for ValuePut, for state restored from a
	// snapshot of format 1, and when there is no value.
	ValueGetSchema(name string, key, ns, dst []byte) ([]byte, uint32, bool, error)
	// ValueScan calls fn for each live value of state name in the task's
	// range, in order of key group, then key and namespace as stored: for
	// an operator that keeps an index of its state in memory (the window
	// operator's firing times) and rebuilds it after a restore.
	ValueScan(name string, fn func(key, ns, val []byte) error) error

	// ListAppend adds an element at the end; the TTL applies to that
	// element, as in Flink.
	ListAppend(name string, key, ns, val []byte, ttl time.Duration) error
	// ListGet calls fn for each live element, oldest first.
	ListGet(name string, key, ns []byte, fn func(v []byte) error) error
	ListClear(name string, key, ns []byte) error

	MapPut(name string, key, ns, userKey, val []byte, ttl time.Duration) error
	// MapGet appends the value of userKey to dst and reports whether there
	// is one.
	MapGet(name string, key, ns, userKey, dst []byte) ([]byte, bool, error)
	MapDelete(name string, key, ns, userKey []byte) error
	// MapIter calls fn for each live entry in byte order of user keys.
	MapIter(name string, key, ns []byte, fn func(userKey, v []byte) error) error
	MapClear(name string, key, ns []byte) error

	// TimerRegister sets a timer. There is at most one timer per (kind,
	// key, ns, ts): registering it again does nothing.
	TimerRegister(kind TimerKind, key, ns []byte, ts int64) error
	// TimerDelete removes a timer; deleting one that is not set does
	// nothing.
	TimerDelete(kind TimerKind, key, ns []byte, ts int64) error
	// PopTimers removes and hands to fn, one at a time, every timer of kind
	// with timestamp ≤ upTo, in order of (timestamp, key group, key,
	// namespace) across the task's key groups. Each is removed before fn
	// is called, so it fires once; timers fn registers at or before upTo
	// fire in the same call, as in Flink.
	PopTimers(kind TimerKind, upTo int64, fn func(Timer) error) error
	// NextTimer returns the earliest timestamp of a timer of kind, so the
	// task can schedule its processing-time wake-up.
	NextTimer(kind TimerKind) (ts int64, ok bool, err error)

	// Snapshot calls fn with every live entry of the task's range, in key
	// order: state and timers. Keys are scope-relative (EncodeKey's layout
	// without the scope prefix, so they start with the 2-byte key group)
	// and values are in the stored format; both are FormatVersion. fn must
	// not write to the Store.
	Snapshot(fn func(key, val []byte) error) error
	// Restore adds entries produced by Snapshot (possibly of other tasks,
	// other ranges, or several snapshots in turn), keeping those whose key
	// group is in the task's range and which have not expired. It checks
	// every entry and fails with ErrCorrupt on a bad one. If the source
	// fails it should stop yielding and the caller should Close the Store
	// and open it again, which empties the range.
	Restore(entries iter.Seq2[[]byte, []byte]) error
	// CleanupExpired removes every expired entry and list element of the
	// range and reports how many it removed.
	CleanupExpired() (int, error)

	Close() error
}

// FormatVersion is the version of the snapshot entry format (the key layout
// of EncodeKey without its scope prefix, and the value encoding). The
// checkpoint writer records it so that a future change can be detected.
// Version 2 added the schema version of values (the valSchema header
// flag); readers accept MinFormatVersion to FormatVersion.
const FormatVersion = 2

// MinFormatVersion is the oldest entry format this version reads. Format 1
// is format 2 without schema versions: its entries decode unchanged, every
// value with schema 0.
const MinFormatVersion = 1

// readableFormat reports whether entries of format v can be restored.
func readableFormat(v int) bool { return v >= MinFormatVersion && v <= FormatVersion }

// Timer is a timer handed to PopTimers' callback. Key and Namespace are
// valid only during the call.
type Timer struct {
	Kind      TimerKind
	Timestamp int64
	KeyGroup  int
	Key       []byte
	Namespace []byte
}

// engine is the ordered key-value store under a Store: one implementation
// per backend, so that all the semantics (encoding, TTL, timers, snapshot)
// live in the one store type and both backends behave identically.
// An engine value belongs to one Store; the data underneath is shared.
type engine interface {
	// get appends the value of key to dst.
	get(key, dst []byte) ([]byte, bool, error)
	set(key, val []byte) error
	// merge appends val to the value of key (list append).
	merge(key, val []byte) error
	del(key []byte) error
	delRange(lo, hi []byte) error
	// first appends the first key in [lo, hi) to dst.
	first(lo, hi, dst []byte) ([]byte, bool, error)
	// scan calls fn for each entry in [lo, hi) in order; fn may write.
	scan(lo, hi []byte, fn func(k, v []byte) error) error
	// iter returns the keys in [lo, hi) one by one. It may not see writes
	// made after it was opened; lo and hi must not change while it is.
	iter(lo, hi []byte) (engineIter, error)
	newBatch() batch
	// size estimates the bytes stored in [lo, hi).
	size(lo, hi []byte) (int64, error)
	close()
}

// engineIter steps through keys.
type engineIter interface {
	// next appends the next key to dst.
	next(dst []byte) ([]byte, bool, error)
	close() error
}

// batch groups the writes of a restore.
type batch interface {
	set(key, val []byte) error
	size() int
	commit() error
	close()
}

// restoreBatchBytes bounds the memory a restore holds before committing.
const restoreBatchBytes = 4 << 20

// taskSet tracks the open Stores of a backend, so that two tasks never own
// the same key groups of an operator (which would silently mix state).
type taskSet struct {
	mu   sync.Mutex
	open map[Scope][]Range
}

func (t *taskSet) acquire(scope Scope, groups Range) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.open[scope] {
		if r.Start < groups.End && groups.Start < r.End {
			return fmt.Errorf("%w: %s key groups %s overlap open %s", ErrRangeInUse, scope, groups, r)
		}
	}
	if t.open == nil {
		t.open = make(map[Scope][]Range)
	}
	t.open[scope] = append(t.open[scope], groups)
	return nil
}

func (t *taskSet) release(scope Scope, groups Range) {
	t.mu.Lock()
	defer t.mu.Unlock()
	rs := t.open[scope]
	for i, r := range rs {
		if r == groups {
			rs = append(rs[:i], rs[i+1:]...)
			break
		}
	}
	if len(rs) == 0 {
		delete(t.open, scope)
	} else {
		t.open[scope] = rs
	}
}

// store implements Store over an engine.
type store struct {
	eng    engine
	tasks  *taskSet
	down   *atomic.Bool // the backend is closed
	closed bool

	scope  Scope
	prefix []byte // encoded scope
	maxP   uint64
	groups Range
	now    func() time.Time

	kbuf []byte   // key of the current non-iterating call
	vbuf []byte   // value of the current non-iterating call
	free [][]byte // buffers for calls that run callbacks, which may nest

	timers   [2]timerQueue // indexed by TimerKind-1
	timerGen uint64        // counts timer writes other than pops; see timerCursor
	cursors  []*timerCursor
	recent   recentTimers
}

func openStore(eng engine, tasks *taskSet, down *atomic.Bool, now func() time.Time, scope Scope, maxParallelism int, groups Range) (*store, error) {
	if down.Load() {
		return nil, ErrClosed
	}
	if err := scope.Validate(); err != nil {
		return nil, fmt.Errorf("open state of %s: %w", scope, err)
	}
	if err := ValidateParallelism(1, maxParallelism); err != nil {
		return nil, fmt.Errorf("open state of %s: %w", scope, err)
	}
	if groups.Start < 0 || groups.End > maxParallelism || groups.Len() <= 0 {
		return nil, fmt.Errorf("open state of %s: %w: key groups %s not a non-empty part of [0,%d)", scope, ErrInvalid, groups, maxParallelism)
	}
	if err := tasks.acquire(scope, groups); err != nil {
		return nil, fmt.Errorf("open state of %s: %w", scope, err)
	}
	s := &store{
		eng:    eng,
		tasks:  tasks,
		down:   down,
		scope:  scope,
		prefix: appendScope(nil, scope),
		maxP:   uint64(maxParallelism),
		groups: groups,
		now:    now,
	}
	// Clear only when needed: on Pebble a range tombstone makes every read
	// that overlaps it costlier until compaction drops it.
	lo, hi := s.rangeSpan()
	_, leftovers, err := eng.first(lo, hi, nil)
	if err == nil && leftovers {
		err = eng.delRange(lo, hi)
	}
	if err != nil {
		tasks.release(scope, groups)
		return nil, fmt.Errorf("open state of %s: clear key groups %s: %w", scope, groups, err)
	}
	for i := range s.timers {
		s.timers[i].reset(groups.Len(), true)
	}
	return s, nil
}

// rangeSpan returns the keys bounding everything the task owns.
func (s *store) rangeSpan() (lo, hi []byte) {
	lo = appendGroup(append([]byte(nil), s.prefix...), s.groups.Start)
	hi = appendGroup(append([]byte(nil), s.prefix...), s.groups.End)
	return lo, hi
}

// enter checks that the store is usable and returns key's group.
func (s *store) enter(key []byte) (int, error) {
	if s.closed || s.down.Load() {
		return 0, ErrClosed
	}
	g := int(hashKey(key) % s.maxP)
	if !s.groups.Contains(g) {
		return 0, fmt.Errorf("%w: key %s is in key group %d, task of %s owns %s", ErrNotOwned, shortKey(key), g, s.scope, s.groups)
	}
	return g, nil
}

func shortKey(key []byte) string {
	if len(key) > 32 {
		return fmt.Sprintf("%q…", key[:32])
	}
	return fmt.Sprintf("%q", key)
}

func (s *store) nowMs() int64 { return s.now().UnixMilli() }

func (s *store) expiresAt(ttl time.Duration) int64 {
	if ttl <= 0 {
		return noExpiry
	}
	return expiry(s.nowMs(), ttl)
}

// getBuf and putBuf lend buffers to calls that run callbacks: a callback
// may call the store again, so those calls cannot use kbuf and vbuf.
func (s *store) getBuf() []byte {
	if n := len(s.free); n > 0 {
		b := s.free[n-1]
		s.free = s.free[:n-1]
		return b[:0]
	}
	return nil
}

func (s *store) putBuf(b []byte) {
	if cap(b) > 1<<20 {
		return // do not keep one huge list's buffer forever
	}
	s.free = append(s.free, b)
}

func (s *store) errorf(format string, args ...any) error {
	return fmt.Errorf("state of %s: "+format, append([]any{s.scope}, args...)...)
}

// --- value ---

func (s *store) ValueGet(name string, key, ns, dst []byte) ([]byte, bool, error) {
	out, _, ok, err := s.ValueGetSchema(name, key, ns, dst)
	return out, ok, err
}

func (s *store) ValueGetSchema(name string, key, ns, dst []byte) ([]byte, uint32, bool, error) {
	g, err := s.enter(key)
	if err != nil {
		return dst, 0, false, err
	}
	s.kbuf = appendStateKey(s.kbuf[:0], s.prefix, g, KindValue, name, key, ns)
	return s.getPayload(s.kbuf, dst, "value", name)
}

// getPayload appends the payload of the value or map entry at k to dst and
// returns its schema version, treating an expired one as absent and
// deleting it.
func (s *store) getPayload(k, dst []byte, what, name string) ([]byte, uint32, bool, error) {
	n := len(dst)
	out, ok, err := s.eng.get(k, dst)
	if err != nil {
		return dst, 0, false, s.errorf("%s %q: get: %w", what, name, err)
	}
	if !ok {
		return dst, 0, false, nil
	}
	exp, schema, h, err := readHeaderSchema(out[n:])
	if err != nil {
		return dst, 0, false, s.errorf("%s %q: %w", what, name, err)
	}
	if exp != noExpiry && exp <= s.nowMs() {
		if err := s.eng.del(k); err != nil {
			return dst, 0, false, s.errorf("%s %q: delete expired: %w", what, name, err)
		}
		return dst, 0, false, nil
	}
	copy(out[n:], out[n+h:])
	return out[:len(out)-h], schema, true, nil
}

func (s *store) ValuePut(name string, key, ns, val []byte, ttl time.Duration) error {
	return s.ValuePutSchema(name, key, ns, val, ttl, 0)
}

func (s *store) ValuePutSchema(name string, key, ns, val []byte, ttl time.Duration, schema uint32) error {
	g, err := s.enter(key)
	if err != nil {
		return err
	}
	s.kbuf = appendStateKey(s.kbuf[:0], s.prefix, g, KindValue, name, key, ns)
	s.vbuf = appendValue(s.vbuf[:0], val, s.expiresAt(ttl), schema)
	if err := s.eng.set(s.kbuf, s.vbuf); err != nil {
		return s.errorf("value %q: put: %w", name, err)
	}
	return nil
}

func (s *store) ValueDelete(name string, key, ns []byte) error {
	g, err := s.enter(key)
	if err != nil {
		return err
	}
	s.kbuf = appendStateKey(s.kbuf[:0], s.prefix, g, KindValue, name, key, ns)
	if err := s.eng.del(s.kbuf); err != nil {
		return s.errorf("value %q: delete: %w", name, err)
	}
	return nil
}

func (s *store) ValueScan(name string, fn func(key, ns, val []byte) error) error {
	if s.closed || s.down.Load() {
		return ErrClosed
	}
	nowMs := s.nowMs()
	for g := s.groups.Start; g < s.groups.End; g++ {
		lo := appendLPString(append(appendGroup(append(s.getBuf(), s.prefix...), g), byte(KindValue)), name)
		hi := prefixEnd(s.getBuf(), lo)
		err := s.eng.scan(lo, hi, func(k, v []byte) error {
			rk, err := parseRelative(k[len(s.prefix):])
			if err != nil {
				return err
			}
			exp, h, err := readHeader(v)
			if err != nil {
				return err
			}
			if exp != noExpiry && exp <= nowMs {
				return nil
			}
			return fn(rk.key, rk.ns, v[h:])
		})
		s.putBuf(hi)
		s.putBuf(lo)
		if err != nil {
			return s.errorf("value %q: scan: %w", name, err)
		}
	}
	return nil
}

// --- list ---

func (s *store) ListAppend(name string, key, ns, val []byte, ttl time.Duration) error {
	g, err := s.enter(key)
	if err != nil {
		return err
	}
	s.kbuf = appendStateKey(s.kbuf[:0], s.prefix, g, KindList, name, key, ns)
	s.vbuf = appendFrame(s.vbuf[:0], val, s.expiresAt(ttl), 0)
	if err := s.eng.merge(s.kbuf, s.vbuf); err != nil {
		return s.errorf("list %q: append: %w", name, err)
	}
	return nil
}

func (s *store) ListGet(name string, key, ns []byte, fn func(v []byte) error) error {
	g, err := s.enter(key)
	if err != nil {
		return err
	}
	k := appendStateKey(s.getBuf(), s.prefix, g, KindList, name, key, ns)
	defer s.putBuf(k)
	v, ok, err := s.eng.get(k, s.getBuf())
	defer s.putBuf(v)
	if err != nil {
		return s.errorf("list %q: get: %w", name, err)
	}
	if !ok {
		return nil
	}
	var nowMs int64
	expired := false
	for off := 0; off < len(v); {
		payload, exp, n, err := readFrame(v[off:])
		if err != nil {
			return s.errorf("list %q: %w", name, err)
		}
		off += n
		if exp != noExpiry {
			if nowMs == 0 {
				nowMs = s.nowMs()
			}
			if exp <= nowMs {
				expired = true
				continue
			}
		}
		if err := fn(payload); err != nil {
			return s.errorf("list %q: %w", name, err)
		}
	}
	if expired {
		// Re-read rather than rewrite v: fn may have appended meanwhile.
		if _, err := s.dropExpiredElements(k); err != nil {
			return s.errorf("list %q: %w", name, err)
		}
	}
	return nil
}

// dropExpiredElements rewrites the list at k without its expired elements.
func (s *store) dropExpiredElements(k []byte) (int, error) {
	v, ok, err := s.eng.get(k, s.getBuf())
	defer s.putBuf(v)
	if err != nil || !ok {
		return 0, err
	}
	live, dropped, err := liveFrames(s.getBuf(), v, s.nowMs())
	defer s.putBuf(live)
	if err != nil || dropped == 0 {
		return 0, err
	}
	if len(live) == 0 {
		return dropped, s.eng.del(k)
	}
	return dropped, s.eng.set(k, live)
}

// liveFrames appends the frames of list value v that have not expired at
// nowMs to dst and counts the others.
func liveFrames(dst, v []byte, nowMs int64) ([]byte, int, error) {
	dropped := 0
	for off := 0; off < len(v); {
		_, exp, n, err := readFrame(v[off:])
		if err != nil {
			return dst, 0, err
		}
		if exp != noExpiry && exp <= nowMs {
			dropped++
		} else {
			dst = append(dst, v[off:off+n]...)
		}
		off += n
	}
	return dst, dropped, nil
}

func (s *store) ListClear(name string, key, ns []byte) error {
	g, err := s.enter(key)
	if err != nil {
		return err
	}
	s.kbuf = appendStateKey(s.kbuf[:0], s.prefix, g, KindList, name, key, ns)
	if err := s.eng.del(s.kbuf); err != nil {
		return s.errorf("list %q: clear: %w", name, err)
	}
	return nil
}

// --- map ---

func (s *store) MapPut(name string, key, ns, userKey, val []byte, ttl time.Duration) error {
	g, err := s.enter(key)
	if err != nil {
		return err
	}
	s.kbuf = append(appendStateKey(s.kbuf[:0], s.prefix, g, KindMap, name, key, ns), userKey...)
	s.vbuf = appendValue(s.vbuf[:0], val, s.expiresAt(ttl), 0)
	if err := s.eng.set(s.kbuf, s.vbuf); err != nil {
		return s.errorf("map %q: put: %w", name, err)
	}
	return nil
}

func (s *store) MapGet(name string, key, ns, userKey, dst []byte) ([]byte, bool, error) {
	g, err := s.enter(key)
	if err != nil {
		return dst, false, err
	}
	s.kbuf = append(appendStateKey(s.kbuf[:0], s.prefix, g, KindMap, name, key, ns), userKey...)
	out, _, ok, err := s.getPayload(s.kbuf, dst, "map", name)
	return out, ok, err
}

func (s *store) MapDelete(name string, key, ns, userKey []byte) error {
	g, err := s.enter(key)
	if err != nil {
		return err
	}
	s.kbuf = append(appendStateKey(s.kbuf[:0], s.prefix, g, KindMap, name, key, ns), userKey...)
	if err := s.eng.del(s.kbuf); err != nil {
		return s.errorf("map %q: delete: %w", name, err)
	}
	return nil
}

func (s *store) MapIter(name string, key, ns []byte, fn func(userKey, v []byte) error) error {
	g, err := s.enter(key)
	if err != nil {
		return err
	}
	lo := appendStateKey(s.getBuf(), s.prefix, g, KindMap, name, key, ns)
	defer s.putBuf(lo)
	hi := prefixEnd(s.getBuf(), lo)
	defer s.putBuf(hi)
	var nowMs int64
	err = s.eng.scan(lo, hi, func(k, v []byte) error {
		exp, h, err := readHeader(v)
		if err != nil {
			return err
		}
		if exp != noExpiry {
			if nowMs == 0 {
				nowMs = s.nowMs()
			}
			if exp <= nowMs {
				return s.eng.del(k)
			}
		}
		return fn(k[len(lo):], v[h:])
	})
	if err != nil {
		return s.errorf("map %q: iterate: %w", name, err)
	}
	return nil
}

// clearPointLimit is how many entries MapClear deletes one by one before it
// switches to a range deletion: point deletions keep reads cheap for the
// common small map, a range deletion bounds the cost of clearing a big one.
const clearPointLimit = 64

func (s *store) MapClear(name string, key, ns []byte) error {
	g, err := s.enter(key)
	if err != nil {
		return err
	}
	lo := appendStateKey(s.getBuf(), s.prefix, g, KindMap, name, key, ns)
	defer s.putBuf(lo)
	hi := prefixEnd(s.getBuf(), lo)
	defer s.putBuf(hi)
	n := 0
	err = s.eng.scan(lo, hi, func(k, _ []byte) error {
		if n++; n > clearPointLimit {
			return errStopScan
		}
		return s.eng.del(k)
	})
	if errors.Is(err, errStopScan) {
		err = s.eng.delRange(lo, hi)
	}
	if err != nil {
		return s.errorf("map %q: clear: %w", name, err)
	}
	return nil
}

// errStopScan ends a scan early; it never leaves this package.
var errStopScan = errors.New("state: stop scan")

// --- snapshot, restore, cleanup ---

func (s *store) Snapshot(fn func(key, val []byte) error) error {
	if s.closed || s.down.Load() {
		return ErrClosed
	}
	lo, hi := s.rangeSpan()
	nowMs := s.nowMs()
	live := s.getBuf()
	defer func() { s.putBuf(live) }()
	err := s.eng.scan(lo, hi, func(k, v []byte) error {
		rel := k[len(s.prefix):]
		if len(rel) < 3 {
			return fmt.Errorf("%w: key of %d bytes", ErrCorrupt, len(rel))
		}
		switch Kind(rel[2]) {
		case KindValue, KindMap:
			exp, _, err := readHeader(v)
			if err != nil {
				return err
			}
			if exp != noExpiry && exp <= nowMs {
				return nil
			}
		case KindList:
			var dropped int
			var err error
			live, dropped, err = liveFrames(live[:0], v, nowMs)
			if err != nil {
				return err
			}
			if len(live) == 0 {
				return nil
			}
			if dropped > 0 {
				v = live
			}
		}
		return fn(rel, v)
	})
	if err != nil {
		return s.errorf("snapshot key groups %s: %w", s.groups, err)
	}
	return nil
}

func (s *store) Restore(entries iter.Seq2[[]byte, []byte]) error {
	if s.closed || s.down.Load() {
		return ErrClosed
	}
	nowMs := s.nowMs()
	b := s.eng.newBatch()
	defer b.close()
	k := s.getBuf()
	defer func() { s.putBuf(k) }()
	n := 0
	for rel, v := range entries {
		n++
		rk, err := parseRelative(rel)
		if err != nil {
			return s.errorf("restore entry %d: %w", n, err)
		}
		if !s.groups.Contains(rk.group) {
			continue
		}
		keep, err := restorable(rk.kind, v, nowMs)
		if err != nil {
			return s.errorf("restore entry %d (%s): %w", n, rk.kind, err)
		}
		if !keep {
			continue
		}
		k = append(append(k[:0], s.prefix...), rel...)
		if err := b.set(k, v); err != nil {
			return s.errorf("restore entry %d: %w", n, err)
		}
		if b.size() >= restoreBatchBytes {
			if err := b.commit(); err != nil {
				return s.errorf("restore entry %d: commit: %w", n, err)
			}
		}
	}
	if err := b.commit(); err != nil {
		return s.errorf("restore: commit: %w", err)
	}
	// The timer heads changed under the queues; rebuild them when next used.
	for i := range s.timers {
		s.timers[i].loaded = false
	}
	s.timerGen++
	s.recent.clear()
	return nil
}

// restorable checks a snapshot value of the given kind and reports whether
// it is still live.
func restorable(kind Kind, v []byte, nowMs int64) (bool, error) {
	switch kind {
	case KindValue, KindMap:
		exp, _, err := readHeader(v)
		if err != nil {
			return false, err
		}
		return exp == noExpiry || exp > nowMs, nil
	case KindList:
		for off := 0; off < len(v); {
			_, _, n, err := readFrame(v[off:])
			if err != nil {
				return false, err
			}
			off += n
		}
		return len(v) > 0, nil
	case KindTimer:
		if len(v) != 0 {
			return false, fmt.Errorf("%w: timer with a %d-byte value", ErrCorrupt, len(v))
		}
		return true, nil
	}
	return false, fmt.Errorf("%w: %s", ErrCorrupt, kind)
}

func (s *store) CleanupExpired() (int, error) {
	if s.closed || s.down.Load() {
		return 0, ErrClosed
	}
	lo, hi := s.rangeSpan()
	nowMs := s.nowMs()
	removed := 0
	live := s.getBuf()
	defer func() { s.putBuf(live) }()
	err := s.eng.scan(lo, hi, func(k, v []byte) error {
		switch Kind(k[len(s.prefix)+2]) {
		case KindValue, KindMap:
			exp, _, err := readHeader(v)
			if err != nil {
				return err
			}
			if exp != noExpiry && exp <= nowMs {
				removed++
				return s.eng.del(k)
			}
		case KindList:
			var dropped int
			var err error
			live, dropped, err = liveFrames(live[:0], v, nowMs)
			if err != nil || dropped == 0 {
				return err
			}
			removed += dropped
			if len(live) == 0 {
				return s.eng.del(k)
			}
			return s.eng.set(k, live)
		}
		return nil
	})
	if err != nil {
		return removed, s.errorf("clean up expired state: %w", err)
	}
	return removed, nil
}

func (s *store) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	s.eng.close()
	s.tasks.release(s.scope, s.groups)
	return nil
}

// Size estimates the bytes of the task's keyed state: every entry of its
// operator in its key groups, timers included. For Pebble it is the size
// of the table files over that key range (what has not yet been flushed
// from the memtable is not counted, a bounded amount); for the memory
// backend, the keys and values held. It is cheap enough to call every
// second, not on every record: a quota is checked with it (dataflow).
func (s *store) Size() (int64, error) {
	if s.closed || s.down.Load() {
		return 0, ErrClosed
	}
	lo := appendGroup(slices.Clone(s.prefix), s.groups.Start)
	hi := appendGroup(slices.Clone(s.prefix), s.groups.End)
	if s.groups.End >= int(s.maxP) {
		hi = prefixEnd(nil, s.prefix)
	}
	return s.eng.size(lo, hi)
}
