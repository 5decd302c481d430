package window

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/state"
)

// Tumbling and sliding windows keep their accumulators per pane, not per
// window, so that a record costs one get and one put — those of its pane —
// instead of a get and a put for each of its size/slide windows.
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
// A pane is an entry of map statePane: record key, namespace the bucket of
// the pane (its start rounded down to paneBucket·size), user key the pane
// start. A window that fires reads its panes with one scan of its bucket,
// two when it straddles buckets, rather than a get per pane: most of those
// gets would miss on sparse keys, and a miss is a Pebble read's most
// expensive case. Buckets bound what a scan steps over on Pebble, where
// the deleted panes of a map stay as tombstones until a compaction drops
// them. A late record that fires windows again reads the panes under them
// once, with gets: the per-record path must not allocate, and a scan does.
//
// Timers have the window start as namespace:
//
//   - firing, at end-1. A record that creates a pane sets the firing of the
//     earliest window over the pane that is still to fire; a window that
//     fires sets the next window's when they share a pane with data. So
//     every window with data still to fire has its timer, and a record
//     that lands in an existing pane sets none.
//   - cleanup, at end-1 + allowed lateness of window [s, s+size): it drops
//     the panes of [s, s+slide), for which that window is the latest over
//     them, so that every window over them is gone by then. The firing of
//     the window sets it when those panes have data, as does a record that
//     creates one of them after the firing time. Without allowed lateness
//     both times are the same and the firing drops the panes it read.
//
// So a key holds the panes from its oldest window not yet cleaned up to its
// newest record, and at most a timer per window in that span: about
// (size + allowed lateness + disorder)/slide slides' worth of panes (one
// or two a slide) and as many timers, however long the job runs.

// paneBucket is the width of a bucket of panes, in window sizes: a window
// straddles two buckets (size-slide)/(paneBucket·size) of the time.
const paneBucket = 4

// Bits of the panes in the first slide of a window, as readWindow reports
// them.
const (
	headFirst  = 1 << iota // the pane at the window's start
	headSecond             // the pane at start + size mod slide
)

// windowRead is the window that readWindow is merging, for mergeEntry.
type windowRead struct {
	start, end int64
	head       uint8 // headFirst | headSecond, of the panes with data
	tail       bool  // a later pane has data
}

// setPaneLayout derives what panes need from size and slide.
func (o *Operator) setPaneLayout() {
	o.rem = o.size % o.slide
	o.bucket = o.size
	if o.size <= math.MaxInt64/paneBucket {
		o.bucket *= paneBucket
	}
}

// paneOf returns the start of the pane holding ts, and the start of the
// latest window over it (that of the slide holding ts).
func (o *Operator) paneOf(ts int64) (pane, latest int64) {
	latest = floorDiv(ts, o.slide) * o.slide
	if o.rem != 0 && ts-latest >= o.rem {
		return latest + o.rem, latest
	}
	return latest, latest
}

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
	found, err := o.loadPane(r.Key, pane, &o.acc)
	if err != nil {
		return false, o.paneErr(r.Key, pane, err)
	}
	if err := o.acc.add(o.aggs, ts); err != nil {
		return false, o.paneErr(r.Key, pane, err)
	}
	if err := o.storePane(r.Key, pane, &o.acc); err != nil {
		return false, o.paneErr(r.Key, pane, err)
	}
	if o.aggs.apply != nil {
		if err := o.addElem(r.Key, o.elemsNS(pane)); err != nil {
			return false, o.paneErr(r.Key, pane, err)
		}
	}
	if !found {
		if err := o.registerPaneTimers(r.Key, pane, latest); err != nil {
			return false, o.paneErr(r.Key, pane, err)
		}
	}
	if err := o.refire(r.Key, pane, latest, out); err != nil {
		return false, err
	}
	return true, nil
}

// refire emits again, with the update, the windows over the record's pane
// whose end the watermark passed and which are not gone, as
// EventTimeTrigger.onElement; latest first, as SlidingEventTimeWindows
// lists them. It reads the panes under them once, with gets rather than a
// scan, which would allocate.
func (o *Operator) refire(key []byte, pane, latest int64, out *stream.Batch) error {
	earliest := o.earliestOver(pane)
	if earliest+o.size-1 > o.wm {
		return nil // none has fired: the usual case
	}
	// The windows to fire start in [first, last]: up to the latest that has
	// passed its end, back while they are not gone. The earlier a window,
	// the sooner it is gone.
	last := min(latest, floorDiv(o.wm-o.size+1, o.slide)*o.slide)
	first := last + o.slide
	for start := last; start >= earliest && !o.isLate(start+o.size-1); start -= o.slide {
		first = start
	}
	if first > last {
		return nil
	}
	if o.size == o.slide { // tumbling: the window is the pane
		return o.emit(out, key, last, last+o.size, &o.acc)
	}
	if err := o.readSpan(key, first, last+o.size, pane); err != nil {
		return o.stateErr(key, first, last+o.size, err)
	}
	for start := last; start >= first; start -= o.slide {
		o.win.reset()
		for i := range o.span {
			p := &o.span[i]
			if p.start >= start+o.size {
				break
			}
			if p.start >= start && p.acc != nil {
				if err := o.win.merge(o.aggs, p.acc); err != nil {
					return o.stateErr(key, start, start+o.size, err)
				}
			}
		}
		if err := o.emit(out, key, start, start+o.size, &o.win); err != nil {
			return err
		}
	}
	return nil
}

// spanPane is a pane readSpan read: acc is nil when it has no data.
type spanPane struct {
	start int64
	acc   *accum
}

// readSpan reads the panes of key in [from, to), window boundaries, into
// o.span, in order; the one at known is o.acc.
func (o *Operator) readSpan(key []byte, from, to, known int64) error {
	o.span = o.span[:0]
	n := int(2*((to-from)/o.slide) + 1) // at most two panes a slide, and the partial one
	k := len(o.aggs.list)
	if len(o.spanAccs) < n {
		o.spanAccs = make([]accum, n)
		slots := make([]slot, n*k)
		for i := range o.spanAccs {
			o.spanAccs[i].slots = slots[i*k : (i+1)*k : (i+1)*k]
		}
	}
	for p := from; p < to; p = o.paneEnd(p) {
		sp := spanPane{start: p}
		if p == known {
			sp.acc = &o.acc
		} else {
			a := &o.spanAccs[len(o.span)]
			found, err := o.loadPane(key, p, a)
			if err != nil {
				return fmt.Errorf("pane [%d,%d): %w", p, o.paneEnd(p), err)
			}
			if found {
				sp.acc = a
			}
		}
		o.span = append(o.span, sp)
	}
	return nil
}

// registerPaneTimers sets the timers a new pane needs: the firing of the
// earliest window over it still to fire (it chains the later ones), and,
// when its latest window is past its end already, that window's cleanup,
// which its firing would otherwise have set.
func (o *Operator) registerPaneTimers(key []byte, pane, latest int64) error {
	start := o.earliestOver(pane)
	if start+o.size-1 <= o.wm {
		// Past its end: the first window still to fire is the first
		// starting after wm-size+1.
		start = floorDiv(o.wm-o.size+1, o.slide)*o.slide + o.slide
	}
	if start <= latest {
		if err := o.store.TimerRegister(state.EventTime, key, o.fixedNS(start), start+o.size-1); err != nil {
			return err
		}
	}
	if maxTs := latest + o.size - 1; maxTs <= o.wm {
		// The record was kept: the cleanup time is still ahead.
		return o.store.TimerRegister(state.EventTime, key, o.fixedNS(latest), o.cleanupTime(maxTs))
	}
	return nil
}

// readWindow merges the panes of window [start, start+size) of key into
// o.win. It reports which panes of the window's first slide have data and
// whether a later pane, which the next window shares, has.
func (o *Operator) readWindow(key []byte, start int64) (head uint8, tail bool, err error) {
	o.win.reset()
	end := start + o.size
	o.reading = windowRead{start: start, end: end}
	if o.size == o.slide { // tumbling: the window is one pane
		found, err := o.loadPane(key, start, &o.part)
		if err != nil || !found {
			return 0, false, err
		}
		if err := o.mergePane(start, &o.part); err != nil {
			return 0, false, err
		}
		return o.reading.head, o.reading.tail, nil
	}
	for b := floorDiv(start, o.bucket) * o.bucket; b < end; b += o.bucket {
		if err := o.store.MapIter(statePane, key, o.bucketNS(b), o.onPaneEntry); err != nil {
			return 0, false, err
		}
	}
	return o.reading.head, o.reading.tail, nil
}

// mergeEntry is the MapIter callback of readWindow (as o.onPaneEntry): it
// merges a stored pane into o.win when it belongs to the window.
func (o *Operator) mergeEntry(userKey, v []byte) error {
	if len(userKey) != 8 {
		return errCorrupt
	}
	p, _ := decodeNS(userKey)
	if p < o.reading.start || p >= o.reading.end {
		return nil
	}
	if _, err := o.decodeAcc(v, true, &o.part); err != nil {
		return fmt.Errorf("pane [%d,%d): %w", p, o.paneEnd(p), err)
	}
	return o.mergePane(p, &o.part)
}

func (o *Operator) mergePane(p int64, a *accum) error {
	if err := o.win.merge(o.aggs, a); err != nil {
		return err
	}
	w := &o.reading
	switch {
	case p >= w.start+o.slide:
		w.tail = true
	case p == w.start:
		w.head |= headFirst
	default:
		w.head |= headSecond
	}
	return nil
}

// fireFixed handles a due timer of window [start, start+size): at end-1 it
// emits the window when any of its panes has data and chains the next
// window's firing; at end-1 + allowed lateness it drops the panes of the
// window's first slide. Without allowed lateness it is one timer doing
// both.
func (o *Operator) fireFixed(t state.Timer) error {
	if len(t.Namespace) != 8 {
		return fmt.Errorf("node %s: key %q: timer with a %d-byte namespace: %w", o.node, t.Key, len(t.Namespace), errCorrupt)
	}
	start, _ := decodeNS(t.Namespace)
	end := start + o.size
	maxTs := end - 1
	cleanup := o.cleanupTime(maxTs)
	var err error
	switch t.Timestamp {
	case maxTs:
		var head uint8
		var tail bool
		if head, tail, err = o.readWindow(t.Key, start); err != nil {
			break
		}
		if head != 0 || tail {
			if err = o.emit(o.out, t.Key, start, end, &o.win); err != nil {
				return err
			}
		}
		if tail {
			next := start + o.slide
			if err = o.registerFromTimer(t.Key, next, next+o.size-1); err != nil {
				break
			}
		}
		if cleanup == maxTs {
			err = o.dropHead(t.Key, start, head)
		} else if head != 0 {
			err = o.registerFromTimer(t.Key, start, cleanup)
		}
	case cleanup:
		err = o.dropHead(t.Key, start, headFirst|headSecond)
	}
	if err != nil {
		return o.stateErr(t.Key, start, end, err)
	}
	return nil
}

// registerFromTimer sets a timer of window start from within PopTimers. A
// timer due in the same call (at or before the watermark) is set at once,
// so that it fires there and in order; a later one waits until the call
// returns (flushTimers), as registering a timer during the call makes the
// store seek afresh for the next due timer, which on Pebble costs about
// what the firing itself does.
func (o *Operator) registerFromTimer(key []byte, start, ts int64) error {
	if ts <= o.wm {
		return o.store.TimerRegister(state.EventTime, key, o.fixedNS(start), ts)
	}
	o.laterKeys = append(o.laterKeys, key...)
	o.later = append(o.later, laterTimer{keyEnd: len(o.laterKeys), start: start, ts: ts})
	return nil
}

// laterTimer is a timer registerFromTimer put off. Its key is
// laterKeys[previous keyEnd:keyEnd].
type laterTimer struct {
	keyEnd    int
	start, ts int64
}

// flushTimers sets the timers put off during PopTimers.
func (o *Operator) flushTimers() error {
	from := 0
	for _, t := range o.later {
		key := o.laterKeys[from:t.keyEnd]
		from = t.keyEnd
		if err := o.store.TimerRegister(state.EventTime, key, o.fixedNS(t.start), t.ts); err != nil {
			return o.stateErr(key, t.start, t.start+o.size, err)
		}
	}
	o.later, o.laterKeys = o.later[:0], o.laterKeys[:0]
	return nil
}

// dropHead deletes the panes of the first slide of window start that head
// names.
func (o *Operator) dropHead(key []byte, start int64, head uint8) error {
	if head&headFirst != 0 {
		if err := o.deletePane(key, start); err != nil {
			return err
		}
	}
	if head&headSecond != 0 && o.rem != 0 {
		return o.deletePane(key, start+o.rem)
	}
	return nil
}

// A bucket's namespace and a pane's user key are their starts, encoded as
// fixedNS.

func (o *Operator) bucketNS(bucketStart int64) []byte { return o.fixedNS(bucketStart) }

func (o *Operator) paneKey(p int64) []byte {
	binary.BigEndian.PutUint64(o.paneKeyBuf[:], uint64(p)^(1<<63))
	return o.paneKeyBuf[:]
}

func (o *Operator) paneBucketNS(p int64) []byte {
	return o.bucketNS(floorDiv(p, o.bucket) * o.bucket)
}

// loadPane reads the accumulator of pane p of key into a, or resets a when
// the pane has none.
func (o *Operator) loadPane(key []byte, p int64, a *accum) (bool, error) {
	v, found, err := o.store.MapGet(statePane, key, o.paneBucketNS(p), o.paneKey(p), o.val[:0])
	o.val = v
	if err != nil {
		return false, err
	}
	return o.decodeAcc(v, found, a)
}

func (o *Operator) storePane(key []byte, p int64, a *accum) error {
	o.enc = a.encode(append(o.enc[:0], stateFormat), o.aggs, false)
	return o.store.MapPut(statePane, key, o.paneBucketNS(p), o.paneKey(p), o.enc, 0)
}

func (o *Operator) deletePane(key []byte, p int64) error {
	if o.aggs.apply != nil {
		if err := o.store.ListClear(stateElems, key, o.paneKey(p)); err != nil {
			return err
		}
	}
	return o.store.MapDelete(statePane, key, o.paneBucketNS(p), o.paneKey(p))
}

func (o *Operator) paneErr(key []byte, p int64, err error) error {
	if errors.As(err, new(udfError)) {
		return fmt.Errorf("node %s: key %q: pane [%d,%d): %w", o.node, key, p, o.paneEnd(p), err)
	}
	return fmt.Errorf("node %s: key %q: pane [%d,%d): state: %w", o.node, key, p, o.paneEnd(p), err)
}
