package window

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"slices"

	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/state"
)

// Tumbling and sliding windows keep their accumulators per pane, not per
// window, so that a record updates one accumulator — its pane's — instead
// of one for each of its size/slide windows.
//
// A pane is the slice of time between two consecutive window boundaries.
// The boundaries are the starts k·slide and the ends k·slide + size, so a
// slide holds two panes, [k·slide, k·slide+r) and [k·slide+r, (k+1)·slide)
// with r = size mod slide, or one, the slide itself, when slide divides
// size. A window is then a whole number of panes (size/slide, or
// 2·⌊size/slide⌋+1), and a pane lies wholly inside or outside each window,
// so a record's windows are exactly the windows over its pane. (Flink's
// aligned-window operators cut panes of gcd(size, slide) instead: the same
// when slide divides size, but a window of 61s every 60s would be 61 such
// panes and is 3 here.)
//
// All the panes of a key are one value (stateFixed, no namespace): a
// record is one get and one put, and so is a firing, which merges the
// window from the panes it decoded. With sparse keys most panes of a key
// are alone in their window, and an entry per pane made a firing a scan
// and a record a get that missed, Pebble's most expensive read. The value
// also holds next, the start of the earliest window of the key that has
// not fired: windows before it fired (or had no data) when the watermark
// passed their end, which a restored operator must not repeat.
//
// Firing times are not store timers but an index in memory (firingIndex):
// for each time, the keys due then. A key is due at the earliest of the
// end-1 of its first window at or after next that has data, and the
// cleanup time (end-1 + allowed lateness) of the latest window over its
// oldest pane, when that pane goes. The index holds what the values say,
// so Open rebuilds it from them after a restore or a rescale
// (state.Store.ValueScan); a key whose due time changed leaves a stale
// entry behind, which fireKey recognises and skips. Due keys fire in the
// order store timers did: by time, then key group, then key as a timer
// encodes it (length first).

// fixedPane is a decoded pane: its start and accumulator.
type fixedPane struct {
	start int64
	acc   accum
}

// setPaneLayout derives what panes need from size and slide.
func (o *Operator) setPaneLayout() {
	o.rem = o.size % o.slide
}

// paneOf returns the start of the pane holding ts, and the start of the
// latest window over it (that of the slide holding ts).
func (o *Operator) paneOf(ts int64) (pane, latest int64) {
	latest = o.latestOver(ts)
	if o.rem != 0 && ts-latest >= o.rem {
		return latest + o.rem, latest
	}
	return latest, latest
}

// latestOver returns the start of the latest window over time t.
func (o *Operator) latestOver(t int64) int64 { return floorDiv(t, o.slide) * o.slide }

// earliestOver returns the start of the earliest window over pane p (or
// over any time in it): the first multiple of slide after p - size.
func (o *Operator) earliestOver(p int64) int64 {
	return floorDiv(p-o.size, o.slide)*o.slide + o.slide
}

// paneEnd returns the end of the pane starting at p.
func (o *Operator) paneEnd(p int64) int64 {
	base := floorDiv(p, o.slide) * o.slide
	if o.rem != 0 && p == base {
		return base + o.rem
	}
	return base + o.slide
}

// firstUnfired is the start of the earliest window whose end the
// watermark has not reached.
func (o *Operator) firstUnfired() int64 {
	if o.wm < math.MinInt64+o.size {
		return math.MinInt64
	}
	return floorDiv(o.wm-o.size+1, o.slide)*o.slide + o.slide
}

// addFixed adds the current record to its pane, unless all its windows are
// gone, and fires again those of its windows that fired already. It
// reports whether the record was kept.
func (o *Operator) addFixed(r *stream.Record, out *stream.Batch) (bool, error) {
	ts := r.Timestamp
	pane, latest := o.paneOf(ts)
	// The latest window over ts ends last: when it is gone, all are.
	if o.isLate(latest + o.size - 1) {
		return false, nil
	}
	oldDue, found, err := o.beginKey(r.Key)
	if err != nil {
		return false, o.paneErr(r.Key, pane, err)
	}
	p := o.paneAt(pane)
	if err := p.acc.add(o.aggs, ts); err != nil {
		return false, o.paneErr(r.Key, pane, err)
	}
	if o.aggs.apply != nil {
		if err := o.addElem(r.Key, o.elemsNS(pane)); err != nil {
			return false, o.paneErr(r.Key, pane, err)
		}
	}
	if err := o.refire(r.Key, pane, latest, out); err != nil {
		return false, err
	}
	if err := o.endKey(r.Key, found, oldDue); err != nil {
		return false, o.paneErr(r.Key, pane, err)
	}
	return true, nil
}

// beginKey loads the panes of key before records are added to them, and
// returns when the key was due.
func (o *Operator) beginKey(key []byte) (oldDue int64, found bool, err error) {
	if found, err = o.loadFixed(key); err != nil {
		return 0, false, err
	}
	if found {
		oldDue, _, _ = o.dueFixed()
	}
	// Windows the watermark passed fired before these records came, or
	// refire emits them now.
	o.next = max(o.next, o.firstUnfired())
	return oldDue, found, nil
}

// endKey stores the panes of key once records were added, and puts the key
// in the index when its due time changed.
func (o *Operator) endKey(key []byte, found bool, oldDue int64) error {
	if err := o.storeFixed(key); err != nil {
		return err
	}
	if due, _, _ := o.dueFixed(); !found || due != oldDue {
		o.idx.add(key, o.groupOf(key), due)
	}
	return nil
}

// pendingAdd is a record of the batch being processed, waiting to be
// added with the other records of its key (processFixed).
type pendingAdd struct {
	hash uint64 // of the key, which sorts before its bytes
	rec  int    // index in the batch
	pane int64
}

// processFixed is Process for tumbling and sliding windows. It groups the
// records of a batch by key, so that each key's panes are read and written
// once, and with a Wasm aggregate by (key, pane), so that one eddy_agg_add
// call adds them all; within a key and pane, records go in arrival order.
// A record of a window that fired already (allowed lateness) is added on
// its own, after those before it, since it fires the window again at once.
func (o *Operator) processFixed(in, out *stream.Batch) error {
	o.pending = o.pending[:0]
	for i := range in.Records {
		r := &in.Records[i]
		if r.Timestamp == stream.NoTimestamp {
			return o.noEventTime(r)
		}
		pane, latest := o.paneOf(r.Timestamp)
		switch {
		case o.isLate(latest + o.size - 1):
			o.lateRecord(r, out)
		case o.earliestOver(pane)+o.size-1 <= o.wm:
			if err := o.flushFixed(in); err != nil {
				return err
			}
			o.aggs.read(r)
			if _, err := o.addFixed(r, out); err != nil {
				return err
			}
		default:
			o.pending = append(o.pending, pendingAdd{hash: maphash.Bytes(o.seed, r.Key), rec: i, pane: pane})
		}
	}
	return o.flushFixed(in)
}

// flushFixed adds the pending records of batch in to their panes.
func (o *Operator) flushFixed(in *stream.Batch) error {
	if len(o.pending) == 0 {
		return nil
	}
	o.sortPending(in, o.pending)
	var res [][]byte // a Wasm aggregate's new accumulators, per (key, pane)
	if o.aggs.udf != nil {
		var err error
		if res, err = o.addPanes(in); err != nil {
			return err
		}
	}
	for i := 0; i < len(o.pending); {
		key := o.pendingKey(in, i)
		oldDue, found, err := o.beginKey(key)
		if err != nil {
			return o.paneErr(key, o.pending[i].pane, err)
		}
		for i < len(o.pending) && bytes.Equal(o.pendingKey(in, i), key) {
			pane := o.pending[i].pane
			p := o.paneAt(pane)
			for ; o.samePane(in, i, key, pane); i++ {
				r := &in.Records[o.pending[i].rec]
				if res != nil {
					p.acc.note(r.Timestamp)
					continue
				}
				o.aggs.read(r)
				if err := p.acc.add(o.aggs, r.Timestamp); err != nil {
					return o.paneErr(key, pane, err)
				}
				if o.aggs.apply != nil {
					if err := o.addElem(key, o.elemsNS(pane)); err != nil {
						return o.paneErr(key, pane, err)
					}
				}
			}
			if res != nil {
				p.acc.blob, p.acc.hasBlob = append(p.acc.blob[:0], res[0]...), true
				res = res[1:]
			}
		}
		if err := o.endKey(key, found, oldDue); err != nil {
			return o.paneErr(key, o.pending[i-1].pane, err)
		}
	}
	o.pending = o.pending[:0]
	return nil
}

func (o *Operator) pendingKey(in *stream.Batch, i int) []byte {
	return in.Records[o.pending[i].rec].Key
}

// samePane reports whether pending record i is of key and pane.
func (o *Operator) samePane(in *stream.Batch, i int, key []byte, pane int64) bool {
	return i < len(o.pending) && o.pending[i].pane == pane && bytes.Equal(o.pendingKey(in, i), key)
}

// sortPending sorts pending records p of batch in by key, pane and
// arrival.
func (o *Operator) sortPending(in *stream.Batch, p []pendingAdd) {
	o.sortIn = in
	slices.SortFunc(p, o.byKeyPane)
	o.sortIn = nil
}

// compareKeyPane orders pending records by key, then pane, then arrival.
// The order of keys only has to keep each key's records together: it
// compares the keys' hashes first, their bytes only on a tie (the profile
// of hot keys had a fifth of its time in sorting on the bytes).
func (o *Operator) compareKeyPane(a, b pendingAdd) int {
	if a.hash != b.hash {
		return cmp.Compare(a.hash, b.hash)
	}
	if c := bytes.Compare(o.sortIn.Records[a.rec].Key, o.sortIn.Records[b.rec].Key); c != 0 {
		return c
	}
	if a.pane != b.pane {
		return cmp.Compare(a.pane, b.pane)
	}
	return cmp.Compare(a.rec, b.rec)
}

// paneAt returns the decoded pane starting at start, adding an empty one
// in order when the key has none there. Records mostly go to the newest
// pane, so the search starts at the end.
func (o *Operator) paneAt(start int64) *fixedPane {
	i, ok := o.paneIndex(start)
	if ok {
		return &o.panes[i]
	}
	n := len(o.panes)
	o.growPanes(n + 1)
	added := o.panes[n]
	copy(o.panes[i+1:], o.panes[i:n])
	o.panes[i] = added
	p := &o.panes[i]
	p.start = start
	p.acc.reset()
	return p
}

// paneIndex returns the index of the decoded pane starting at start, or
// where it would go.
func (o *Operator) paneIndex(start int64) (int, bool) {
	i := len(o.panes)
	for i > 0 && o.panes[i-1].start >= start {
		if o.panes[i-1].start == start {
			return i - 1, true
		}
		i--
	}
	return i, false
}

// growPanes sets len(o.panes) to n, reusing the accumulators of panes
// beyond the length: the per-record path must not allocate.
func (o *Operator) growPanes(n int) {
	if n > cap(o.panes) {
		for cap(o.panes) < n {
			o.panes = append(o.panes[:cap(o.panes)], fixedPane{})
		}
		k := len(o.aggs.list)
		all := o.panes[:cap(o.panes)]
		for i := range all {
			if all[i].acc.slots == nil {
				all[i].acc.slots = make([]slot, k)
			}
		}
	}
	o.panes = o.panes[:n]
}

// mergeWindow merges the panes of window [start, start+size) into o.win.
func (o *Operator) mergeWindow(start int64) error {
	o.win.reset()
	end := start + o.size
	for i := range o.panes {
		p := &o.panes[i]
		if p.start >= end {
			break
		}
		if p.start >= start {
			if err := o.win.merge(o.aggs, &p.acc); err != nil {
				return err
			}
		}
	}
	return nil
}

// refire emits again, with the update, the windows over the record's pane
// whose end the watermark passed and which are not gone, as
// EventTimeTrigger.onElement; latest first, as SlidingEventTimeWindows
// lists them.
func (o *Operator) refire(key []byte, pane, latest int64, out *stream.Batch) error {
	earliest := o.earliestOver(pane)
	if earliest+o.size-1 > o.wm {
		return nil // none has fired: the usual case
	}
	last := min(latest, floorDiv(o.wm-o.size+1, o.slide)*o.slide)
	// The earlier a window, the sooner it is gone.
	for start := last; start >= earliest && !o.isLate(start+o.size-1); start -= o.slide {
		if err := o.mergeWindow(start); err != nil {
			return o.stateErr(key, start, start+o.size, err)
		}
		if err := o.emit(out, key, start, start+o.size, &o.win); err != nil {
			return err
		}
	}
	return nil
}

// dueFixed returns when the decoded key is due (the earlier of fire and
// clean), when its next window with data fires (math.MaxInt64 if none),
// and when its oldest pane goes. The key must have a pane.
func (o *Operator) dueFixed() (due, fire, clean int64) {
	fire, clean = math.MaxInt64, math.MaxInt64
	if len(o.panes) == 0 {
		return fire, fire, clean
	}
	for i := range o.panes {
		p := o.panes[i].start
		if o.latestOver(p) >= o.next {
			fire = max(o.next, o.earliestOver(p)) + o.size - 1
			break
		}
	}
	clean = o.cleanupTime(o.latestOver(o.panes[0].start) + o.size - 1)
	return min(fire, clean), fire, clean
}

// fireKey handles key when it is due at t: it emits the window ending at
// t when it has data, drops the panes whose windows are all gone by t, and
// puts the key in the index at its next due time. A stale entry of the
// index (the key is due at another time, or has no panes) does nothing.
func (o *Operator) fireKey(key []byte, t int64) error {
	found, err := o.loadFixed(key)
	if err != nil {
		return fmt.Errorf("node %s: key %q: state: %w", o.node, key, err)
	}
	if !found {
		return nil
	}
	due, fire, _ := o.dueFixed()
	if due != t {
		return nil
	}
	if fire == t {
		start := t - o.size + 1
		if err := o.mergeWindow(start); err != nil {
			return o.stateErr(key, start, start+o.size, err)
		}
		if err := o.emit(o.out, key, start, start+o.size, &o.win); err != nil {
			return err
		}
		o.next = start + o.slide
	}
	drop := 0
	for drop < len(o.panes) && o.cleanupTime(o.latestOver(o.panes[drop].start)+o.size-1) <= t {
		if o.aggs.apply != nil {
			if err := o.store.ListClear(stateElems, key, o.paneKey(o.panes[drop].start)); err != nil {
				return fmt.Errorf("node %s: key %q: state: %w", o.node, key, err)
			}
		}
		drop++
	}
	o.dropPanes(drop)
	if err := o.storeFixed(key); err != nil {
		return fmt.Errorf("node %s: key %q: state: %w", o.node, key, err)
	}
	if len(o.panes) > 0 {
		due, _, _ := o.dueFixed()
		o.idx.add(key, o.groupOf(key), due)
	}
	return nil
}

// dropPanes removes the first n decoded panes, keeping their accumulators
// beyond the length for reuse.
func (o *Operator) dropPanes(n int) {
	if n == 0 {
		return
	}
	o.dropped0 = append(o.dropped0[:0], o.panes[:n]...)
	live := copy(o.panes, o.panes[n:])
	copy(o.panes[live:], o.dropped0)
	clear(o.dropped0)
	o.panes = o.panes[:live]
}

// fireFixed fires the keys due up to the watermark, in order.
func (o *Operator) fireFixed() error {
	for {
		t, b, ok := o.idx.pop(o.wm)
		if !ok {
			return nil
		}
		for _, e := range b.ents {
			if err := o.fireKey(b.keys[e.from:e.to], t); err != nil {
				return err
			}
		}
		o.idx.release(b)
	}
}

// rebuildIndex fills the index from the stored panes, after a restore.
func (o *Operator) rebuildIndex() error {
	o.idx.reset()
	return o.store.ValueScan(stateFixed, func(key, _, v []byte) error {
		if err := o.decodeFixed(v); err != nil {
			return fmt.Errorf("node %s: key %q: state: %w", o.node, key, err)
		}
		if len(o.panes) > 0 {
			due, _, _ := o.dueFixed()
			o.idx.add(key, o.groupOf(key), due)
		}
		return nil
	})
}

func (o *Operator) groupOf(key []byte) int32 { return int32(state.KeyGroup(key, o.maxParallelism)) }

// The encoding of a key's panes: stateFormat, varint next, uvarint number
// of panes, then per pane its start (varint for the first, uvarint from the
// previous for the others) and its accumulator.

// loadFixed decodes the panes of key into o.panes and o.next; without
// any, o.panes is empty and o.next the first window still to fire.
func (o *Operator) loadFixed(key []byte) (bool, error) {
	v, found, err := o.store.ValueGet(stateFixed, key, nil, o.val[:0])
	o.val = v
	if err != nil {
		return false, err
	}
	if !found {
		o.panes, o.next = o.panes[:0], o.firstUnfired()
		return false, nil
	}
	return true, o.decodeFixed(v)
}

func (o *Operator) decodeFixed(v []byte) error {
	o.panes = o.panes[:0]
	if len(v) == 0 || v[0] != stateFormat {
		return errCorrupt
	}
	b := v[1:]
	var n int
	if o.next, n = binary.Varint(b); n <= 0 {
		return errCorrupt
	}
	b = b[n:]
	count, n := binary.Uvarint(b)
	if n <= 0 || count > uint64(len(b)) {
		return errCorrupt
	}
	b = b[n:]
	o.growPanes(int(count))
	var start int64
	for i := range o.panes {
		if i == 0 {
			start, n = binary.Varint(b)
		} else {
			var d uint64
			d, n = binary.Uvarint(b)
			start += int64(d)
		}
		if n <= 0 {
			o.panes = o.panes[:0]
			return errCorrupt
		}
		p := &o.panes[i]
		p.start = start
		var err error
		if b, err = p.acc.decode(b[n:], o.aggs, false); err != nil {
			o.panes = o.panes[:0]
			return err
		}
	}
	if len(b) != 0 {
		o.panes = o.panes[:0]
		return errCorrupt
	}
	return nil
}

// storeFixed writes o.panes and o.next as the state of key, or deletes it
// when no pane is left.
func (o *Operator) storeFixed(key []byte) error {
	if len(o.panes) == 0 {
		return o.store.ValueDelete(stateFixed, key, nil)
	}
	o.enc = binary.AppendVarint(append(o.enc[:0], stateFormat), o.next)
	o.enc = binary.AppendUvarint(o.enc, uint64(len(o.panes)))
	for i := range o.panes {
		p := &o.panes[i]
		if i == 0 {
			o.enc = binary.AppendVarint(o.enc, p.start)
		} else {
			o.enc = binary.AppendUvarint(o.enc, uint64(p.start-o.panes[i-1].start))
		}
		o.enc = p.acc.encode(o.enc, o.aggs, false)
	}
	return o.store.ValuePut(stateFixed, key, nil, o.enc, 0)
}

// paneKey is the namespace of a window function's elements of pane p: its
// start, encoded as fixedNS.
func (o *Operator) paneKey(p int64) []byte {
	binary.BigEndian.PutUint64(o.paneKeyBuf[:], uint64(p)^(1<<63))
	return o.paneKeyBuf[:]
}

func (o *Operator) paneErr(key []byte, p int64, err error) error {
	if errors.As(err, new(udfError)) {
		return fmt.Errorf("node %s: key %q: pane [%d,%d): %w", o.node, key, p, o.paneEnd(p), err)
	}
	return fmt.Errorf("node %s: key %q: pane [%d,%d): state: %w", o.node, key, p, o.paneEnd(p), err)
}

// firingIndex is the in-memory index of when the keys of fixed windows are
// due: a bucket of keys per time, and a min-heap of the times.
type firingIndex struct {
	times   []int64
	buckets map[int64]*dueKeys
	free    []*dueKeys
	sorting *dueKeys // the bucket byKey compares in
	byKey   func(a, b dueKey) int
}

// dueKeys are the keys due at one time: key i is keys[ents[i].from:ents[i].to].
type dueKeys struct {
	keys []byte
	ents []dueKey
}

type dueKey struct {
	group    int32
	from, to int32
}

func (x *firingIndex) reset() {
	for t, b := range x.buckets {
		delete(x.buckets, t)
		x.release(b)
	}
	x.times = x.times[:0]
	if x.buckets == nil {
		x.buckets = make(map[int64]*dueKeys)
		x.byKey = x.compare
	}
}

func (x *firingIndex) add(key []byte, group int32, t int64) {
	b := x.buckets[t]
	if b == nil {
		if n := len(x.free); n > 0 {
			b, x.free = x.free[n-1], x.free[:n-1]
		} else {
			b = &dueKeys{}
		}
		x.buckets[t] = b
		x.times = append(x.times, t)
		x.up(len(x.times) - 1)
	}
	from := int32(len(b.keys))
	b.keys = append(b.keys, key...)
	b.ents = append(b.ents, dueKey{group: group, from: from, to: int32(len(b.keys))})
}

// pop removes the earliest time up to upTo and returns its keys, in
// firing order; the caller hands the bucket back with release.
func (x *firingIndex) pop(upTo int64) (int64, *dueKeys, bool) {
	if len(x.times) == 0 || x.times[0] > upTo {
		return 0, nil, false
	}
	t := x.times[0]
	last := len(x.times) - 1
	x.times[0] = x.times[last]
	x.times = x.times[:last]
	x.down(0)
	b := x.buckets[t]
	delete(x.buckets, t)
	x.sorting = b
	slices.SortFunc(b.ents, x.byKey)
	x.sorting = nil
	return t, b, true
}

func (x *firingIndex) release(b *dueKeys) {
	b.keys, b.ents = b.keys[:0], b.ents[:0]
	x.free = append(x.free, b)
}

// compare orders keys as the store orders timers of one time: key group,
// then the key's length (timer keys length-prefix it), then its bytes.
func (x *firingIndex) compare(a, b dueKey) int {
	if c := cmp.Compare(a.group, b.group); c != 0 {
		return c
	}
	if c := cmp.Compare(a.to-a.from, b.to-b.from); c != 0 {
		return c
	}
	k := x.sorting.keys
	return bytes.Compare(k[a.from:a.to], k[b.from:b.to])
}

func (x *firingIndex) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if x.times[parent] <= x.times[i] {
			return
		}
		x.times[i], x.times[parent] = x.times[parent], x.times[i]
		i = parent
	}
}

func (x *firingIndex) down(i int) {
	n := len(x.times)
	for {
		small := i
		if l := 2*i + 1; l < n && x.times[l] < x.times[small] {
			small = l
		}
		if r := 2*i + 2; r < n && x.times[r] < x.times[small] {
			small = r
		}
		if small == i {
			return
		}
		x.times[i], x.times[small] = x.times[small], x.times[i]
		i = small
	}
}
