package join

import (
	"errors"
	"fmt"

	"github.com/eddy-stream/eddy/dataflow/stream"
	"github.com/eddy-stream/eddy/state"
)

// Session window join, as Flink's window join on EventTimeSessionWindows:
// both sides' records of a key share its sessions (a record at t opens
// [t, t+gap) and merges every session it overlaps or touches, whichever
// side they came from), and when the watermark reaches a session's end-1
// every pair of a left and a right record in it is emitted.
//
// A key's open sessions are one value (start, end pairs, in order); its
// records are a map by (timestamp, side), so that firing a session reads
// the records of its span in time order and deletes them. A session's
// timer is at its end-1; merging deletes the timers of the sessions it
// replaces.

type span struct{ start, end int64 }

// addSession puts r into the key's sessions, or drops it when the session
// it would be part of has fired already.
func (o *Operator) addSession(side int, r *stream.Record) error {
	ts := r.Timestamp
	sessions, err := o.readSessions(r.Key)
	if err != nil {
		return err
	}
	merged := span{ts, addSat(ts, o.gap)}
	kept := sessions[:0:0]
	var replaced []span
	for _, s := range sessions {
		if s.start <= merged.end && merged.start <= s.end {
			merged = span{min(s.start, merged.start), max(s.end, merged.end)}
			replaced = append(replaced, s)
			continue
		}
		kept = append(kept, s)
	}
	if merged.end-1 <= o.wm {
		o.dropped++
		return nil
	}
	for _, s := range replaced {
		if s.end != merged.end {
			if err := o.store.TimerDelete(state.EventTime, r.Key, nil, s.end-1); err != nil {
				return fmt.Errorf("delete session timer: %w", err)
			}
		}
	}
	kept = append(kept, merged)
	if err := o.writeSessions(r.Key, kept); err != nil {
		return err
	}
	userKey := append(encodeTS(o.tsKey[:0], ts), byte(side))
	if err := o.appendValue(stateRecords, r.Key, nil, userKey, r.Value); err != nil {
		return err
	}
	return o.store.TimerRegister(state.EventTime, r.Key, nil, merged.end-1)
}

// fireSession emits and removes the session of t's key that ends at
// t.Timestamp+1, if it is still open.
func (o *Operator) fireSession(t state.Timer) error {
	sessions, err := o.readSessions(t.Key)
	if err != nil {
		return err
	}
	i := -1
	for k, s := range sessions {
		if s.end-1 == t.Timestamp {
			i = k
		}
	}
	if i < 0 {
		return nil // merged into a later session since
	}
	s := sessions[i]
	o.lefts, o.rights = o.lefts[:0], o.rights[:0]
	var done [][]byte
	err = o.store.MapIter(stateRecords, t.Key, nil, func(k, v []byte) error {
		if len(k) != 9 {
			return fmt.Errorf("%w: join session record key of %d bytes", state.ErrCorrupt, len(k))
		}
		ts := decodeTS(k[:8])
		if ts < s.start {
			return nil
		}
		if ts >= s.end {
			return errStop
		}
		done = append(done, append([]byte(nil), k...))
		dst := &o.lefts
		if k[8] == Right {
			dst = &o.rights
		}
		return eachValue(v, func(val []byte) { *dst = append(*dst, append([]byte(nil), val...)) })
	})
	if err != nil && !errors.Is(err, errStop) {
		return err
	}
	for _, l := range o.lefts {
		for _, r := range o.rights {
			o.emit(o.out, t.Key, l, r, t.Timestamp)
		}
	}
	for _, k := range done {
		if err := o.store.MapDelete(stateRecords, t.Key, nil, k); err != nil {
			return err
		}
	}
	return o.writeSessions(t.Key, append(sessions[:i:i], sessions[i+1:]...))
}

func (o *Operator) readSessions(key []byte) ([]span, error) {
	var (
		ok  bool
		err error
	)
	o.val, ok, err = o.store.ValueGet(stateSessions, key, nil, o.val[:0])
	if err != nil || !ok {
		return nil, err
	}
	if len(o.val)%16 != 0 {
		return nil, fmt.Errorf("%w: join sessions of %d bytes", state.ErrCorrupt, len(o.val))
	}
	out := make([]span, 0, len(o.val)/16)
	for b := o.val; len(b) > 0; b = b[16:] {
		out = append(out, span{decodeTS(b[:8]), decodeTS(b[8:16])})
	}
	return out, nil
}

func (o *Operator) writeSessions(key []byte, ss []span) error {
	if len(ss) == 0 {
		return o.store.ValueDelete(stateSessions, key, nil)
	}
	o.enc = o.enc[:0]
	for _, s := range ss {
		o.enc = encodeTS(o.enc, s.start)
		o.enc = encodeTS(o.enc, s.end)
	}
	return o.store.ValuePut(stateSessions, key, nil, o.enc, 0)
}
