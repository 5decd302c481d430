package window

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/state"
)

// Sessions of a key are kept together in one value (format byte, uvarint
// count, then per session in start order: varint start, uvarint length,
// accumulator), so that adding a record — which may merge several
// sessions — is one read and one write. A key rarely has more than a few
// sessions open at once: they last until the watermark passes their end
// plus allowed lateness.

// loadSessions reads key's open sessions into o.sessions, sorted by start
// and pairwise apart (neither overlapping nor adjacent).
func (o *Operator) loadSessions(key []byte) error {
	o.sessions = o.sessions[:0]
	v, found, err := o.store.ValueGet(stateSessions, key, nil, o.val[:0])
	o.val = v
	if err != nil || !found {
		return err
	}
	if len(v) == 0 || v[0] != stateFormat {
		return errCorrupt
	}
	b := v[1:]
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)) {
		return errCorrupt
	}
	b = b[w:]
	k := len(o.aggs.list)
	if need := int(n) * k; cap(o.slots) < need {
		o.slots = make([]slot, 2*need)
	}
	for i := range int(n) {
		// Reuse the entries beyond the length, and their accumulators'
		// bytes.
		if i < cap(o.sessions) {
			o.sessions = o.sessions[:i+1]
		} else {
			o.sessions = append(o.sessions, session{})
		}
		s := &o.sessions[i]
		if s.start, w = binary.Varint(b); w <= 0 {
			o.sessions = o.sessions[:0]
			return errCorrupt
		}
		b = b[w:]
		length, w := binary.Uvarint(b)
		if w <= 0 || length == 0 || length > math.MaxInt64 || s.start > math.MaxInt64-int64(length) {
			o.sessions = o.sessions[:0]
			return errCorrupt
		}
		b = b[w:]
		s.end = s.start + int64(length)
		s.acc.slots = o.slots[i*k : (i+1)*k : (i+1)*k]
		if b, err = s.acc.decode(b, o.aggs, false); err != nil {
			o.sessions = o.sessions[:0]
			return err
		}
	}
	if len(b) != 0 {
		return errCorrupt
	}
	return nil
}

// appendSession appends one session of the list encoding.
func (o *Operator) appendSession(dst []byte, start, end int64, a *accum) []byte {
	dst = binary.AppendVarint(dst, start)
	dst = binary.AppendUvarint(dst, uint64(end-start))
	return a.encode(dst, o.aggs, false)
}

// addSession adds the current record's session [ts, ts+gap) to its key,
// merging it with every session it overlaps or touches (Flink's
// TimeWindow.intersects, then mergeWindows). As Flink, lateness is judged
// on the merged session: a record whose own session would be late is kept
// when it extends or bridges a session still kept.
func (o *Operator) addSession(r *stream.Record, out *stream.Batch) (bool, error) {
	ts := r.Timestamp
	start, end := ts, o.sessionEnd(ts)
	if err := o.loadSessions(r.Key); err != nil {
		return false, o.stateErr(r.Key, start, end, err)
	}
	first, last, at, mStart, mEnd := touching(o.sessions, start, end)
	if o.isLate(mEnd - 1) {
		return false, nil
	}
	o.acc.reset()
	if first >= 0 {
		at = first
		for i := first; i <= last; i++ {
			if err := o.acc.merge(o.aggs, &o.sessions[i].acc); err != nil {
				return false, o.stateErr(r.Key, mStart, mEnd, err)
			}
		}
	} else {
		first, last = at, at-1 // replace nothing
	}
	if err := o.acc.add(o.aggs, ts); err != nil {
		return false, o.stateErr(r.Key, mStart, mEnd, err)
	}
	if o.aggs.apply != nil {
		if err := o.addElem(r.Key, nil); err != nil {
			return false, o.stateErr(r.Key, mStart, mEnd, err)
		}
	}

	// Unless the record fell inside one session, the merged session is a
	// new window: move the timers to it.
	if !(last == first && o.sessions[first].start == mStart && o.sessions[first].end == mEnd) {
		for i := first; i <= last; i++ {
			s := &o.sessions[i]
			if err := o.deleteTimers(r.Key, o.sessionNS(s.start, s.end), s.end-1); err != nil {
				return false, o.stateErr(r.Key, s.start, s.end, err)
			}
		}
		if err := o.registerTimers(r.Key, o.sessionNS(mStart, mEnd), mEnd-1); err != nil {
			return false, o.stateErr(r.Key, mStart, mEnd, err)
		}
	}

	n := len(o.sessions) - (last - first + 1) + 1
	o.enc = binary.AppendUvarint(append(o.enc[:0], stateFormat), uint64(n))
	for i := 0; i < at; i++ {
		s := &o.sessions[i]
		o.enc = o.appendSession(o.enc, s.start, s.end, &s.acc)
	}
	o.enc = o.appendSession(o.enc, mStart, mEnd, &o.acc)
	for i := last + 1; i < len(o.sessions); i++ {
		s := &o.sessions[i]
		o.enc = o.appendSession(o.enc, s.start, s.end, &s.acc)
	}
	if err := o.store.ValuePut(stateSessions, r.Key, nil, o.enc, 0); err != nil {
		return false, o.stateErr(r.Key, mStart, mEnd, err)
	}
	if mEnd-1 <= o.wm {
		if err := o.emit(out, r.Key, mStart, mEnd, &o.acc); err != nil {
			return false, err
		}
	}
	return true, nil
}

// sessionEnd is the end of the session a record at ts opens.
func (o *Operator) sessionEnd(ts int64) int64 {
	if ts > math.MaxInt64-o.gap {
		return math.MaxInt64
	}
	return ts + o.gap
}

func (s *session) span() (start, end int64) { return s.start, s.end }

// touching returns the sessions of list (sorted by start, pairwise apart)
// that [start, end) overlaps or touches, and their merge with it: they
// are consecutive, [first, last]. Without any (first = -1), the new one
// goes before index at.
func touching[E any, P interface {
	*E
	span() (int64, int64)
}](list []E, start, end int64) (first, last, at int, mStart, mEnd int64) {
	first, last, at = -1, -1, len(list)
	mStart, mEnd = start, end
	for i := range list {
		s, e := P(&list[i]).span()
		if s <= end && e >= start {
			if first < 0 {
				first = i
			}
			last = i
			mStart, mEnd = min(mStart, s), max(mEnd, e)
		} else if s > end && at == len(list) {
			at = i
		}
	}
	return first, last, at, mStart, mEnd
}

// fireSession handles a due timer of session [start, end) of t.Key. A
// timer whose session merged away was deleted at the merge; one that is
// still found anyway is ignored.
func (o *Operator) fireSession(t state.Timer) error {
	if len(t.Namespace) != 16 {
		return fmt.Errorf("node %s: key %q: timer with a %d-byte namespace: %w", o.node, t.Key, len(t.Namespace), errCorrupt)
	}
	start, end := decodeNS(t.Namespace)
	if err := o.loadSessions(t.Key); err != nil {
		return o.stateErr(t.Key, start, end, err)
	}
	idx := -1
	for i := range o.sessions {
		if o.sessions[i].start == start && o.sessions[i].end == end {
			idx = i
			break
		}
	}
	if idx < 0 {
		return nil
	}
	maxTs := end - 1
	if t.Timestamp == maxTs {
		if err := o.emit(o.out, t.Key, start, end, &o.sessions[idx].acc); err != nil {
			return err
		}
	}
	if t.Timestamp != o.cleanupTime(maxTs) {
		return nil
	}
	if o.aggs.apply != nil {
		if err := o.dropSessionElems(t.Key, start, end); err != nil {
			return o.stateErr(t.Key, start, end, err)
		}
	}
	var err error
	if len(o.sessions) == 1 {
		err = o.store.ValueDelete(stateSessions, t.Key, nil)
	} else {
		o.enc = binary.AppendUvarint(append(o.enc[:0], stateFormat), uint64(len(o.sessions)-1))
		for i := range o.sessions {
			if i != idx {
				s := &o.sessions[i]
				o.enc = o.appendSession(o.enc, s.start, s.end, &s.acc)
			}
		}
		err = o.store.ValuePut(stateSessions, t.Key, nil, o.enc, 0)
	}
	if err != nil {
		return o.stateErr(t.Key, start, end, err)
	}
	return nil
}
