package window

// Session and global windows with a Wasm aggregate add the records of an
// input batch as tumbling and sliding windows do (processFixed): grouped
// by key, each key's state read and written once, and added with one
// eddy_agg_add call, a group per (key, window). The per-record path
// (addSession, addGlobal) stays the model: the results, their order and
// every accumulator are the ones it gives (the same folds and merges, in
// fewer calls): each group starts from the accumulator the per-record
// path would add the group's first record to, and adds the records in
// arrival order.

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"slices"

	"github.com/eddy-stream/eddy/dataflow/stream"
)

// simSession is a session of the key being planned (planSessions): one
// of its stored sessions, or a new or extended one that records of the
// round go to.
type simSession struct {
	start, end  int64
	first, last int // the stored sessions it merges, [first, last]; -1 for a new one
	n           int // records of the round it gets
	id          int // of those records (pendingAdd.pane during planning), when n > 0
}

func (s *simSession) span() (start, end int64) { return s.start, s.end }

// simKey is a key of the round: its record (for its key) and its sessions,
// o.sim[from:to].
type simKey struct {
	rec, from, to int
}

// globalFiring is a global window that fired in a batch: the record that
// completed it, its span and count, and its accumulator,
// o.firedAccs[accFrom:accTo].
type globalFiring struct {
	rec            int
	minTs, maxTs   int64
	count          uint64
	accFrom, accTo int
}

// processSessions is Process for session windows with a Wasm aggregate.
// A record behind the watermark (its own session ended) may be late, or
// extend a session that fired and fire it again at once: it is added on
// its own, after the records before it. The others only open, extend or
// merge sessions, which fire later.
func (o *Operator) processSessions(in, out *stream.Batch) error {
	o.pending = o.pending[:0]
	for i := range in.Records {
		r := &in.Records[i]
		if r.Timestamp == stream.NoTimestamp {
			return o.noEventTime(r)
		}
		if o.sessionEnd(r.Timestamp)-1 > o.wm {
			o.pending = append(o.pending, pendingAdd{hash: maphash.Bytes(o.seed, r.Key), rec: i})
			continue
		}
		if err := o.flushSessions(in); err != nil {
			return err
		}
		o.aloneAdds++
		o.aggs.read(r)
		kept, err := o.addSession(r, out)
		if err != nil {
			return err
		}
		if !kept {
			o.lateRecord(r, out)
		}
	}
	return o.flushSessions(in)
}

// flushSessions adds the pending records of batch in to their sessions,
// in rounds of one eddy_agg_add call each. A record that merges sessions
// which records of the round went to needs their accumulators with those
// records added, as the per-record path merges them: it and the later
// records of its key wait for the next round. Without such merges (records
// in order of time bridge nothing), one round adds the whole batch.
func (o *Operator) flushSessions(in *stream.Batch) error {
	if len(o.pending) == 0 {
		return nil
	}
	o.sortPending(in, o.pending) // by key, then arrival: pane is 0
	for len(o.pending) > 0 {
		if err := o.sessionRound(in); err != nil {
			return err
		}
		o.pending, o.deferred = o.deferred, o.pending[:0]
	}
	return nil
}

// sessionRound adds the pending records, sorted by key and arrival, with
// one eddy_agg_add call, but for those it defers to the next round
// (o.deferred, in the same order).
func (o *Operator) sessionRound(in *stream.Batch) error {
	o.rounds++
	u := o.aggs.udf
	u.startGroups()
	o.sim, o.simKeys, o.deferred = o.sim[:0], o.simKeys[:0], o.deferred[:0]
	for i := 0; i < len(o.pending); {
		key := o.pendingKey(in, i)
		j := i + 1
		for j < len(o.pending) && bytes.Equal(o.pendingKey(in, j), key) {
			j++
		}
		if err := o.planSessions(in, key, i, j); err != nil {
			return err
		}
		i = j
	}
	n := len(u.recs)
	res, err := u.addGroups()
	if err != nil {
		return fmt.Errorf("node %s: add %d records to %d sessions: %w", o.node, n, len(u.counts), err)
	}
	for _, k := range o.simKeys {
		if res, err = o.applySessions(in.Records[k.rec].Key, o.sim[k.from:k.to], res); err != nil {
			return err
		}
	}
	return nil
}

// planSessions follows pending records [i, j), of key, through the key's
// sessions as addSession would, on their bounds alone, until one merges
// sessions holding records of the round; that one and those after it are
// deferred. It appends the key's sessions to o.sim and a group per session
// with records to the eddy_agg_add call: the stored accumulator it extends
// (the merge of those it bridges, merged now as addSession merges them) and
// its records in arrival order.
func (o *Operator) planSessions(in *stream.Batch, key []byte, i, j int) error {
	if err := o.loadSessions(key); err != nil {
		ts := in.Records[o.pending[i].rec].Timestamp
		return o.stateErr(key, ts, o.sessionEnd(ts), err)
	}
	from := len(o.sim)
	for p := range o.sessions {
		s := &o.sessions[p]
		o.sim = append(o.sim, simSession{start: s.start, end: s.end, first: p, last: p, id: -1})
	}
	o.idStart = o.idStart[:0]
	cut := j
plan:
	for k := i; k < j; k++ {
		ts := in.Records[o.pending[k].rec].Timestamp
		first, last, at, mStart, mEnd := touching(o.sim[from:], ts, o.sessionEnd(ts))
		switch {
		case first < 0:
			at = from + at
			o.sim = slices.Insert(o.sim, at, simSession{start: mStart, end: mEnd, first: -1, last: -1, id: -1})
			first = at
		case first == last:
			first += from
			o.sim[first].start, o.sim[first].end = mStart, mEnd
		default:
			first, last = first+from, last+from
			for x := first; x <= last; x++ {
				if o.sim[x].n > 0 {
					cut = k
					break plan
				}
			}
			// Stored sessions only, consecutive: merge them as they are.
			merged := simSession{start: mStart, end: mEnd, first: o.sim[first].first, last: o.sim[last].last, id: -1}
			o.sim = slices.Replace(o.sim, first, last+1, merged)
			o.roundMerges++
		}
		s := &o.sim[first]
		if s.id < 0 {
			s.id = len(o.idStart)
			o.idStart = append(o.idStart, 0)
		}
		s.n++
		o.pending[k].pane = int64(s.id)
	}
	o.deferred = append(o.deferred, o.pending[cut:j]...)
	o.deferredAdds += int64(j - cut)

	// The records by session (start order), then arrival.
	sim := o.sim[from:]
	for x := range sim {
		if sim[x].n > 0 {
			o.idStart[sim[x].id] = sim[x].start
		}
	}
	for k := i; k < cut; k++ {
		o.pending[k].pane = o.idStart[o.pending[k].pane]
	}
	o.sortPending(in, o.pending[i:cut])

	u := o.aggs.udf
	k := i
	for x := range sim {
		s := &sim[x]
		if s.n == 0 {
			continue
		}
		acc := u.zero
		switch {
		case s.first < 0:
		case s.first == s.last:
			acc = u.of(&o.sessions[s.first].acc)
		default:
			o.acc.reset()
			for p := s.first; p <= s.last; p++ {
				if err := o.acc.merge(o.aggs, &o.sessions[p].acc); err != nil {
					return o.stateErr(key, s.start, s.end, err)
				}
			}
			acc = u.of(&o.acc)
		}
		for range s.n {
			u.recs = append(u.recs, in.Records[o.pending[k].rec])
			k++
		}
		u.group(acc, s.n)
	}
	o.simKeys = append(o.simKeys, simKey{rec: o.pending[i].rec, from: from, to: len(o.sim)})
	return nil
}

// applySessions writes the sessions sim of key planned by planSessions,
// those with records taking their new accumulators from res, moves the
// timers of the sessions that changed bounds, and returns what is left
// of res.
func (o *Operator) applySessions(key []byte, sim []simSession, res [][]byte) ([][]byte, error) {
	if err := o.loadSessions(key); err != nil {
		return nil, o.stateErr(key, sim[0].start, sim[len(sim)-1].end, err)
	}
	o.enc = binary.AppendUvarint(append(o.enc[:0], stateFormat), uint64(len(sim)))
	for x := range sim {
		s := &sim[x]
		if s.n == 0 {
			p := &o.sessions[s.first]
			o.enc = o.appendSession(o.enc, p.start, p.end, &p.acc)
			continue
		}
		o.acc.reset()
		o.acc.count = uint64(s.n)
		if s.first >= 0 {
			for p := s.first; p <= s.last; p++ {
				o.acc.count += o.sessions[p].acc.count
			}
		}
		o.acc.blob, o.acc.hasBlob = append(o.acc.blob[:0], res[0]...), true
		res = res[1:]
		o.enc = o.appendSession(o.enc, s.start, s.end, &o.acc)
		// What addSession does record by record comes down to this: the
		// timers of the stored sessions it grew or merged go, those of the
		// session they became come (the sessions in between came and went).
		if s.first >= 0 && s.first == s.last && o.sessions[s.first].start == s.start && o.sessions[s.first].end == s.end {
			continue
		}
		for p := s.first; p >= 0 && p <= s.last; p++ {
			old := &o.sessions[p]
			if err := o.deleteTimers(key, o.sessionNS(old.start, old.end), old.end-1); err != nil {
				return nil, o.stateErr(key, old.start, old.end, err)
			}
		}
		if err := o.registerTimers(key, o.sessionNS(s.start, s.end), s.end-1); err != nil {
			return nil, o.stateErr(key, s.start, s.end, err)
		}
	}
	if err := o.store.ValuePut(stateSessions, key, nil, o.enc, 0); err != nil {
		return nil, o.stateErr(key, sim[0].start, sim[len(sim)-1].end, err)
	}
	return res, nil
}

// processGlobal is Process for global windows with a Wasm aggregate: a
// group per (key, window), the first of a key starting from its stored
// accumulator and the others, after a firing, from the empty one. The
// windows that fill up fire in the order of the records that fill them,
// as addGlobal fires them.
func (o *Operator) processGlobal(in, out *stream.Batch) error {
	o.pending = o.pending[:0]
	for i := range in.Records {
		r := &in.Records[i]
		if r.Timestamp == stream.NoTimestamp {
			return o.noEventTime(r)
		}
		o.pending = append(o.pending, pendingAdd{hash: maphash.Bytes(o.seed, r.Key), rec: i})
	}
	if len(o.pending) == 0 {
		return nil
	}
	o.sortPending(in, o.pending)

	u := o.aggs.udf
	u.startGroups()
	for i := 0; i < len(o.pending); {
		key := o.pendingKey(in, i)
		if _, err := o.loadAcc(stateAcc, key, nil, &o.acc); err != nil {
			return fmt.Errorf("node %s: key %q: state: %w", o.node, key, err)
		}
		acc, count, n := u.of(&o.acc), o.acc.count, 0
		for ; i < len(o.pending) && bytes.Equal(o.pendingKey(in, i), key); i++ {
			u.recs = append(u.recs, in.Records[o.pending[i].rec])
			n++
			if count++; count >= o.trigger {
				u.group(acc, n)
				acc, count, n = u.zero, 0, 0
			}
		}
		if n > 0 {
			u.group(acc, n)
		}
	}
	n := len(u.recs)
	res, err := u.addGroups()
	if err != nil {
		return fmt.Errorf("node %s: add %d records to %d windows: %w", o.node, n, len(u.counts), err)
	}

	o.fired, o.firedAccs = o.fired[:0], o.firedAccs[:0]
	for i := 0; i < len(o.pending); {
		key := o.pendingKey(in, i)
		if _, err := o.loadAcc(stateAcc, key, nil, &o.acc); err != nil {
			return fmt.Errorf("node %s: key %q: state: %w", o.node, key, err)
		}
		for ; i < len(o.pending) && bytes.Equal(o.pendingKey(in, i), key); i++ {
			rec := o.pending[i].rec
			o.acc.note(in.Records[rec].Timestamp)
			full := o.acc.count >= o.trigger
			if !full && i+1 < len(o.pending) && bytes.Equal(o.pendingKey(in, i+1), key) {
				continue
			}
			if !full {
				o.acc.blob, o.acc.hasBlob = append(o.acc.blob[:0], res[0]...), true
			} else {
				from := len(o.firedAccs)
				o.firedAccs = append(o.firedAccs, res[0]...)
				o.fired = append(o.fired, globalFiring{rec: rec, minTs: o.acc.minTs, maxTs: o.acc.maxTs, count: o.acc.count, accFrom: from, accTo: len(o.firedAccs)})
				o.acc.reset()
			}
			res = res[1:]
		}
		if o.acc.count == 0 {
			err = o.store.ValueDelete(stateAcc, key, nil)
		} else {
			err = o.storeAcc(stateAcc, key, nil, &o.acc)
		}
		if err != nil {
			return fmt.Errorf("node %s: key %q: state: %w", o.node, key, err)
		}
	}

	slices.SortFunc(o.fired, func(a, b globalFiring) int { return cmp.Compare(a.rec, b.rec) })
	for _, f := range o.fired {
		o.win.reset()
		o.win.count, o.win.minTs, o.win.maxTs = f.count, f.minTs, f.maxTs
		o.win.blob, o.win.hasBlob = append(o.win.blob[:0], o.firedAccs[f.accFrom:f.accTo]...), true
		if err := o.emit(out, in.Records[f.rec].Key, f.minTs, f.maxTs+1, &o.win); err != nil {
			return err
		}
	}
	return nil
}
