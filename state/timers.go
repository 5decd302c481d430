package state

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
)

// timerQueue orders the key groups of a task by the earliest timer each
// holds, so that PopTimers can merge the per-group timer spans (each sorted
// by timestamp in the keyspace) without scanning them. It is an indexed
// min-heap keyed by (bound, group offset): the tie-break on the group makes
// the firing order of equal timestamps deterministic.
//
// bound[g] is a lower bound of the earliest timer of group g, not its exact
// value: a registration lowers it, a deletion leaves it, and the store
// raises it to the true head when that group reaches the top of the heap.
// That keeps TimerRegister and TimerDelete at one write each.
//
// floor[g] is the key of the last timer popped from group g, while no
// timer at or below it has been registered since: the search for the
// group's next timer starts after it. Without it, popping a group's timers
// one by one would make each search step over the deletions (tombstones)
// of all the timers popped before — quadratic in Pebble, as in RocksDB.
type timerQueue struct {
	loaded bool
	bound  []int64
	pos    []int32 // heap index of each group offset, -1 when absent
	heap   []int32 // group offsets
	floor  [][]byte
}

func (q *timerQueue) reset(groups int, loaded bool) {
	q.loaded = loaded
	q.heap = q.heap[:0]
	if cap(q.bound) < groups {
		q.bound = make([]int64, groups)
		q.pos = make([]int32, groups)
		q.floor = make([][]byte, groups)
	}
	q.bound = q.bound[:groups]
	q.pos = q.pos[:groups]
	q.floor = q.floor[:groups]
	for i := range q.pos {
		q.pos[i] = -1
		q.floor[i] = q.floor[i][:0]
	}
}

func (q *timerQueue) less(i, j int) bool {
	a, b := q.heap[i], q.heap[j]
	if q.bound[a] != q.bound[b] {
		return q.bound[a] < q.bound[b]
	}
	return a < b
}

func (q *timerQueue) swap(i, j int) {
	q.heap[i], q.heap[j] = q.heap[j], q.heap[i]
	q.pos[q.heap[i]] = int32(i)
	q.pos[q.heap[j]] = int32(j)
}

func (q *timerQueue) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !q.less(i, parent) {
			return
		}
		q.swap(i, parent)
		i = parent
	}
}

func (q *timerQueue) down(i int) {
	for {
		smallest := i
		if l := 2*i + 1; l < len(q.heap) && q.less(l, smallest) {
			smallest = l
		}
		if r := 2*i + 2; r < len(q.heap) && q.less(r, smallest) {
			smallest = r
		}
		if smallest == i {
			return
		}
		q.swap(i, smallest)
		i = smallest
	}
}

// offer records a timer at ts in group offset g; key is its full key, or
// nil while loading.
func (q *timerQueue) offer(g int, ts int64, key []byte) {
	if fl := q.floor[g]; len(fl) > 0 && bytes.Compare(key, fl) <= 0 {
		q.floor[g] = fl[:0]
	}
	if i := q.pos[g]; i >= 0 {
		if ts < q.bound[g] {
			q.bound[g] = ts
			q.up(int(i))
		}
		return
	}
	q.bound[g] = ts
	q.heap = append(q.heap, int32(g))
	q.pos[g] = int32(len(q.heap) - 1)
	q.up(len(q.heap) - 1)
}

// popped records that the timer with key was removed from group g, which
// stays in the heap with its bound: the next timer is at or after it.
func (q *timerQueue) popped(g int, key []byte) {
	q.floor[g] = append(q.floor[g][:0], key...)
}

// min returns the group with the smallest bound.
func (q *timerQueue) min() (g int, bound int64, ok bool) {
	if len(q.heap) == 0 {
		return 0, 0, false
	}
	g = int(q.heap[0])
	return g, q.bound[g], true
}

// raise sets a group's bound to its true (larger) head.
func (q *timerQueue) raise(g int, ts int64) {
	q.bound[g] = ts
	q.down(int(q.pos[g]))
}

// remove drops a group that has no timers left.
func (q *timerQueue) remove(g int) {
	i := int(q.pos[g])
	last := len(q.heap) - 1
	if i != last {
		q.swap(i, last)
	}
	q.heap = q.heap[:last]
	q.pos[g] = -1
	if i != last {
		q.down(i)
		q.up(i)
	}
}

// recentTimers remembers, in a small direct-mapped cache, timers known to
// be set. Window operators register the same timer for every record of a
// window; the cache turns those repeats into a lookup instead of a write.
// An entry is only ever a timer that is set: pops, deletions and restores
// remove what they might invalidate.
type recentTimers struct {
	slots [][]byte
}

const recentTimerSlots = 1024

func (r *recentTimers) slot(key []byte) *[]byte {
	if r.slots == nil {
		r.slots = make([][]byte, recentTimerSlots)
	}
	return &r.slots[hashKey(key)%recentTimerSlots]
}

func (r *recentTimers) has(key []byte) bool { return bytes.Equal(*r.slot(key), key) }

func (r *recentTimers) add(key []byte) {
	sl := r.slot(key)
	*sl = append((*sl)[:0], key...)
}

func (r *recentTimers) forget(key []byte) {
	if sl := r.slot(key); bytes.Equal(*sl, key) {
		*sl = (*sl)[:0]
	}
}

func (r *recentTimers) clear() {
	for i := range r.slots {
		r.slots[i] = r.slots[i][:0]
	}
}

func (s *store) timerQueue(kind TimerKind) (*timerQueue, error) {
	if !kind.valid() {
		return nil, fmt.Errorf("%w: %s", ErrInvalid, kind)
	}
	q := &s.timers[kind-1]
	if !q.loaded {
		if err := s.loadTimers(kind, q); err != nil {
			return nil, s.errorf("load %s timers: %w", kind, err)
		}
	}
	return q, nil
}

// loadTimers fills q with the head of each key group after a restore.
func (s *store) loadTimers(kind TimerKind, q *timerQueue) error {
	q.reset(s.groups.Len(), true)
	k := s.getBuf()
	defer s.putBuf(k)
	for off := range s.groups.Len() {
		ts, ok, err := s.groupHead(kind, s.groups.Start+off, &k)
		if err != nil {
			return err
		}
		if ok {
			q.offer(off, ts, nil)
		}
	}
	return nil
}

// groupHead finds the earliest timer of kind in key group g and leaves its
// key in *k.
func (s *store) groupHead(kind TimerKind, g int, k *[]byte) (int64, bool, error) {
	lo := appendTimerSpan(s.getBuf(), s.prefix, g, kind)
	defer s.putBuf(lo)
	hi := prefixEnd(s.getBuf(), lo)
	defer s.putBuf(hi)
	key, ok, err := s.eng.first(lo, hi, (*k)[:0])
	*k = key
	if err != nil || !ok {
		return 0, false, err
	}
	if len(key) < len(lo)+8 {
		return 0, false, fmt.Errorf("%w: timer key too short", ErrCorrupt)
	}
	return decodeTimestamp(key[len(lo):]), true, nil
}

func (s *store) TimerRegister(kind TimerKind, key, ns []byte, ts int64) error {
	g, err := s.enter(key)
	if err != nil {
		return err
	}
	q, err := s.timerQueue(kind)
	if err != nil {
		return err
	}
	s.kbuf = appendTimerKey(s.kbuf[:0], s.prefix, g, kind, ts, key, ns)
	if s.recent.has(s.kbuf) {
		return nil
	}
	s.timerGen++
	if err := s.eng.set(s.kbuf, nil); err != nil {
		return s.errorf("register %s timer: %w", kind, err)
	}
	q.offer(g-s.groups.Start, ts, s.kbuf)
	s.recent.add(s.kbuf)
	return nil
}

func (s *store) TimerDelete(kind TimerKind, key, ns []byte, ts int64) error {
	g, err := s.enter(key)
	if err != nil {
		return err
	}
	if _, err := s.timerQueue(kind); err != nil {
		return err
	}
	// The queue keeps a lower bound per key group, which a deletion does not
	// break; PopTimers and NextTimer correct it when they look.
	s.timerGen++
	s.kbuf = appendTimerKey(s.kbuf[:0], s.prefix, g, kind, ts, key, ns)
	s.recent.forget(s.kbuf)
	if err := s.eng.del(s.kbuf); err != nil {
		return s.errorf("delete %s timer: %w", kind, err)
	}
	return nil
}

// timerCursor keeps an engine iterator on the key group at the top of the
// queue across the pops of one PopTimers call, so that the next timer of
// that group costs a step, not a new seek. It is valid while no timer has
// been registered or deleted since it was opened (store.timerGen): its
// iterator may not see those writes. The store's own pops are behind it.
type timerCursor struct {
	it       engineIter
	group    int // offset in the range
	gen      uint64
	lo, hi   []byte // bounds; must not change while it is open
	key      []byte // the group's current head when ok
	ok       bool
	consumed bool // key was popped; step before using the cursor again
}

func (c *timerCursor) close() error {
	if c.it == nil {
		return nil
	}
	err := c.it.close()
	c.it = nil
	return err
}

// head returns the earliest timer of group offset off, leaving its key in
// c.key.
func (s *store) head(kind TimerKind, q *timerQueue, off int, c *timerCursor) (int64, bool, error) {
	span := len(s.prefix) + 4 // group, KindTimer, timer kind
	if c.it != nil && c.group == off && c.gen == s.timerGen {
		if c.consumed {
			var err error
			c.key, c.ok, err = c.it.next(c.key[:0])
			c.consumed = false
			if err != nil {
				return 0, false, err
			}
		}
	} else {
		if err := c.close(); err != nil {
			return 0, false, err
		}
		g := s.groups.Start + off
		c.lo = appendTimerSpan(c.lo[:0], s.prefix, g, kind)
		c.hi = prefixEnd(c.hi[:0], c.lo)
		// Start at what q knows to be below every live timer of the group
		// rather than at the start of its span, which may be a long run of
		// deleted timers (see timerQueue.floor).
		if fl := q.floor[off]; len(fl) > 0 {
			c.lo = append(append(c.lo[:0], fl...), 0)
		} else if q.pos[off] >= 0 {
			c.lo = binary.BigEndian.AppendUint64(c.lo, uint64(q.bound[off])^(1<<63))
		}
		it, err := s.eng.iter(c.lo, c.hi)
		if err != nil {
			return 0, false, err
		}
		c.it, c.group, c.gen, c.consumed = it, off, s.timerGen, false
		if c.key, c.ok, err = it.next(c.key[:0]); err != nil {
			return 0, false, err
		}
	}
	if !c.ok {
		return 0, false, nil
	}
	if len(c.key) < span+8 {
		return 0, false, fmt.Errorf("%w: timer key too short", ErrCorrupt)
	}
	return decodeTimestamp(c.key[span:]), true, nil
}

// nextDue settles the queue's minimum: it returns the key group offset and
// timestamp of the earliest timer, with its key in c.key. It stops early,
// with ok false, once the smallest bound is past upTo.
func (s *store) nextDue(kind TimerKind, q *timerQueue, upTo int64, c *timerCursor) (off int, ts int64, ok bool, err error) {
	for {
		off, bound, ok := q.min()
		if !ok || bound > upTo {
			return 0, 0, false, nil
		}
		ts, found, err := s.head(kind, q, off, c)
		if err != nil {
			return 0, 0, false, err
		}
		switch {
		case !found:
			q.remove(off)
		case ts > bound:
			q.raise(off, ts)
		default:
			return off, ts, true, nil
		}
	}
}

func (s *store) PopTimers(kind TimerKind, upTo int64, fn func(Timer) error) (err error) {
	if s.closed || s.down.Load() {
		return ErrClosed
	}
	q, err := s.timerQueue(kind)
	if err != nil {
		return err
	}
	c := s.getCursor()
	defer func() {
		if cerr := s.putCursor(c); err == nil && cerr != nil {
			err = s.errorf("pop %s timers: %w", kind, cerr)
		}
	}()
	k := s.getBuf()
	defer func() { s.putBuf(k) }()
	for {
		off, ts, ok, err := s.nextDue(kind, q, upTo, c)
		if err != nil {
			return s.errorf("pop %s timers: %w", kind, err)
		}
		if !ok || ts > upTo {
			return nil
		}
		// Copy: the cursor's key changes when it steps, and fn may nest.
		k = append(k[:0], c.key...)
		c.consumed = true
		s.recent.forget(k)
		if err := s.eng.del(k); err != nil {
			return s.errorf("pop %s timers: delete: %w", kind, err)
		}
		q.popped(off, k)
		rk, err := parseRelative(k[len(s.prefix):])
		if err != nil {
			return s.errorf("pop %s timers: %w", kind, err)
		}
		t := Timer{Kind: kind, Timestamp: ts, KeyGroup: s.groups.Start + off, Key: rk.key, Namespace: rk.ns}
		if err := fn(t); err != nil {
			return s.errorf("%s timer at %d: %w", kind, ts, err)
		}
	}
}

func (s *store) NextTimer(kind TimerKind) (ts int64, ok bool, err error) {
	if s.closed || s.down.Load() {
		return 0, false, ErrClosed
	}
	q, err := s.timerQueue(kind)
	if err != nil {
		return 0, false, err
	}
	c := s.getCursor()
	defer func() {
		if cerr := s.putCursor(c); err == nil && cerr != nil {
			err = s.errorf("next %s timer: %w", kind, cerr)
		}
	}()
	_, ts, ok, err = s.nextDue(kind, q, math.MaxInt64, c)
	if err != nil {
		return 0, false, s.errorf("next %s timer: %w", kind, err)
	}
	return ts, ok, nil
}

// getCursor and putCursor reuse cursors (PopTimers may nest through fn).
func (s *store) getCursor() *timerCursor {
	if n := len(s.cursors); n > 0 {
		c := s.cursors[n-1]
		s.cursors = s.cursors[:n-1]
		return c
	}
	return &timerCursor{}
}

func (s *store) putCursor(c *timerCursor) error {
	err := c.close()
	c.ok, c.consumed = false, false
	s.cursors = append(s.cursors, c)
	return err
}
